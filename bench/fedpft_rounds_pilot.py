"""How far FedPFT's laptop setup is from flat, and whether its headline verdict moves with the
budget: FedAvg and FedPFT at every α, seeds 0-2, trained for 100 rounds (twice the laptop budget),
read at cuts of 20-100 rounds (the first r rounds of a longer run equal an r-round run: nothing in a
run depends on its round budget).

    FEDREPRO_OUTPUT=/tmp/pilot .venv/bin/python bench/fedpft_rounds_pilot.py > bench/fedpft_rounds_pilot.txt

Per run: "last_change" (the mean of the last 5 evaluated rounds minus the 5 before, points),
"noise" (its standard error from round-to-round noise) and "flat" (1/0), the flatness rule of
fedrepro.analysis.by_round (|last_change| < max(0.5, 2 × noise)); tables show the mean over seeds
(flat: the share of seeds). Per cut: FedPFT − FedAvg (best round) per α, mean and per seed, and the
verdict of fedpft.beats_fedavg_every_alpha on the runs cut there, as notebook 17 cuts them.

Evidence for the laptop profile's round budget, not a claim of its own. The claim's verdicts at the
cuts are also recorded as a longer run (fedrepro.papers.diagnose.save_longer) under the output root
it runs in: run it in a pass's root (FEDREPRO_OUTPUT unset) and that pass's pages read it, the only
measurement on which a FAIL's cause may say "not a budget artefact"."""
import pandas as pd

import fedrepro
from fedrepro.analysis.by_round import at_round, judge
from fedrepro.papers.diagnose import save_longer
from fedrepro.papers.verdicts import evaluate_claims
from fedrepro.papers import setup

CUTS = (20, 30, 40, 50, 60, 70, 80, 90, 100)
SEEDS = (0, 1, 2)
A, M = "data.partition_args.alpha", "method.name"

if __name__ == "__main__":
    base = setup("fedpft", "laptop").replace(**{"train.rounds": max(CUTS)})
    grid = fedrepro.run_grid(base, {M: ["fedavg", "fedpft"], A: [0.1, 0.5, 1.0]}, seeds=SEEDS, progress=False)
    rows, verdicts = [], []
    for r in CUTS:
        cut = at_round(grid, r)
        claim = evaluate_claims(cut, ids=["fedpft.beats_fedavg_every_alpha"]).iloc[0]
        verdicts.append({"round": r, "claim_id": claim["claim_id"], "verdict": claim["verdict"],
                         "deciding effect": claim["interval"]})
        for _, x in cut.iterrows():
            change, noise, flat = judge(fedrepro.RunResult(x["path"]).rounds["acc_mean"].dropna().to_numpy()[:r])
            rows.append({"round": r, "method": x[M], "alpha": x[A], "seed": x["seed"],
                         "best": 100 * x["best"], "final": 100 * x["final"],
                         "last_change": 100 * change, "noise": 100 * noise, "flat": int(flat)})
    df = pd.DataFrame(rows)
    pd.set_option("display.width", 200)
    pd.set_option("display.max_colwidth", 120)
    print(f"seeds {list(SEEDS)}; the laptop budget is {setup('fedpft', 'laptop').train.rounds} rounds\n")
    for value in ("best", "final", "last_change", "noise", "flat"):
        print(f"{value} (mean client accuracy, points; mean over seeds) by round budget:")
        print(df.pivot_table(index=["alpha", "method"], columns="round", values=value).round(2), "\n")
    gap = df.pivot_table(index=["alpha", "seed", "round"], columns="method", values="best")
    diff = (gap["fedpft"] - gap["fedavg"]).rename("gap")
    print("FedPFT − FedAvg, best round, mean over seeds:")
    print(diff.groupby(["alpha", "round"]).mean().unstack("round").round(2), "\n")
    print("FedPFT − FedAvg, best round, per seed:")
    print(diff.unstack("round").round(2), "\n")
    print("fedpft.beats_fedavg_every_alpha on the runs cut after each round:")
    print(pd.DataFrame(verdicts).drop(columns="claim_id").set_index("round").to_string())
    save_longer(pd.DataFrame(verdicts).rename(columns={"deciding effect": "interval"}), "fedpft_rounds_pilot",
                "laptop", setup("fedpft", "laptop").train.rounds)
