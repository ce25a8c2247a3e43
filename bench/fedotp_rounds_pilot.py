"""How far FedOTP's laptop setup is from flat: FedOTP and local CoOp on the noisy pathological split
(5 clients × 2 classes, 4 shots, E = 5), each at the rate its study arm chose on validation data
(``fedotp.TABLES["vs_coop"]``, run bench/fedotp_vs_coop.py first), seeds 0-2, trained for 30 rounds
(three times the laptop budget) and evaluated every round, read at cuts of 5-30 rounds (the first r
rounds of a longer run equal an r-round run: nothing in a run depends on its round budget).

    FEDREPRO_OUTPUT=/tmp/otpstudy nice -n 5 .venv/bin/python bench/fedotp_rounds_pilot.py \
        > bench/fedotp_rounds_pilot.txt

Per run and cut: "last_change" (the mean of the last 5 evaluated rounds minus the 5 before, points),
"noise" (its standard error from round-to-round noise) and "flat" (1/0), the flatness rule of
fedrepro.analysis.by_round; tables show the mean over seeds (flat: the share of seeds). Per cut:
FedOTP − CoOp (final round), mean and per seed. Evidence for the laptop profile's round budget
(fedrepro.papers.fedotp.setup), not a claim of its own."""
import pandas as pd

import fedrepro
from fedrepro.analysis.by_round import at_round, judge
from fedrepro.papers import fedotp

CUTS = (10, 15, 20, 25, 30)
SEEDS = (0, 1, 2)

if __name__ == "__main__":
    table = fedotp.TABLES["vs_coop"]
    search = table.search("laptop")
    cfgs = {fedotp.study_label(c): c for c in table.configs("laptop", tuned=False) if c.seed == 0}
    # Each method at its own searched rate (the study's own-rate arms), as this pilot measured it.
    arms = {"coop": "coop, equal budget (ours), own rate", "fedotp": "fedotp, own rate"}
    parts = []
    for arm, label in arms.items():
        cfg = search.choose(cfgs[label]).replace(**{"train.rounds": max(CUTS), "train.eval_every": 1})
        parts.append(fedrepro.run_grid(cfg, seeds=SEEDS, progress=False).assign(arm=arm, lr=cfg.train.lr))
    grid = pd.concat(parts, ignore_index=True)
    rows = []
    for r in CUTS:
        for _, x in at_round(grid, r).iterrows():
            change, noise, flat = judge(fedrepro.RunResult(x["path"]).rounds["acc_mean"].dropna().to_numpy()[:r])
            rows.append({"round": r, "arm": x["arm"], "lr": x["lr"], "seed": x["seed"], "final": 100 * x["final"],
                         "last_change": 100 * change, "noise": 100 * noise, "flat": int(flat)})
    df = pd.DataFrame(rows)
    pd.set_option("display.width", 200)
    print(f"seeds {list(SEEDS)}; the laptop budget is {cfgs[arms['fedotp']].train.rounds} rounds; rates "
          + ", ".join(f"{a} {lr:g}" for a, lr in grid.groupby("arm")["lr"].first().items()) + "\n")
    for value in ("final", "last_change", "noise", "flat"):
        print(f"{value} (mean client accuracy, points; mean over seeds) by round budget:")
        print(df.pivot_table(index="arm", columns="round", values=value).round(2), "\n")
    acc = df.pivot_table(index=["seed", "round"], columns="arm", values="final")
    diff = (acc["fedotp"] - acc["coop"]).rename("FedOTP − CoOp")
    print("FedOTP − CoOp, final round, per seed (rows) by round budget:")
    print(diff.unstack("round").round(2), "\n")
    print("mean over seeds:")
    print(diff.groupby("round").mean().round(2).to_string())
