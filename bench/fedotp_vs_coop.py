"""Why FedOTP trails local CoOp on the CLIP stand-in: the study table ``fedotp.TABLES["vs_coop"]``
(notebook 05) at the laptop profile (noisy pathological split, 5 clients × 2 classes, 4 shots, the
setup's 25 rounds), on the factors issue 55's audit found to move the gap, each changed alone from
one reference pair (local CoOp at our equal budget and FedOTP, both at the paper's rate 0.001, on
standin_patch, batch 32): the rate (each method's own, searched on validation data), CoOp's budget
(one session of 10 epochs, the official one, or of 25, ours), the backbone (the first stand-in,
``model.args.arch="standin"``) and batch = shots. Only the rate arms search (each rate at the
tuning seeds 1000-1002); every arm then runs at the claim seeds 0-2.

    FEDREPRO_OUTPUT=/tmp/otpstudy nice -n 5 .venv/bin/python bench/fedotp_vs_coop.py [PROFILE] [--stored]

writes bench/fedotp_vs_coop.json (PROFILE laptop, the default; else fedotp_vs_coop_<PROFILE>.json):
the search (validation accuracy per rate, the rate chosen) of the searched arms, every run (arm,
seed, rate, final mean client accuracy), per arm the mean and spread over seeds with each pair's
FedOTP − CoOp (fedotp.study_summary), and the findings generated from them (fedotp.study_findings).
``--stored`` trains nothing and records the arms whose runs are all stored (a partial study). The
record of notebook 05's study at laptop."""
import json
import sys
import time
from pathlib import Path

import pandas as pd

from fedrepro.execute.grid import train_pending
from fedrepro.execute.run import run
from fedrepro.execute.tuning import TuningPending
from fedrepro.runs.store import RunStore
from fedrepro.papers import fedotp

if {"-h", "--help"} & set(sys.argv):
    print(__doc__)
    sys.exit(0)
PROFILE = next((a for a in sys.argv[1:] if not a.startswith("-")), "laptop")
# --stored: train nothing; record the arms whose search and seed runs are all stored (a partial study).
STORED_ONLY = "--stored" in sys.argv
OUT = Path(__file__).with_name("fedotp_vs_coop.json" if PROFILE == "laptop" else f"fedotp_vs_coop_{PROFILE}.json")


def train(cfgs):
    """Train what is missing of ``cfgs``: in worker processes where there are several workers, then
    (one worker: the smoke profile's default) each in this process."""
    train_pending(cfgs, progress=False)
    for cfg in cfgs:
        run(cfg)


def stored_arms(table, search, by_arm):
    """The tidy results and the search table of every arm whose runs are all stored."""
    runs, chosen = [], []
    for arm, cfgs in by_arm.items():
        searched = search is not None and search.searched(cfgs[0])
        try:
            scores = search.scores(cfgs[0]) if searched else {}
            tuned = [search.choose(c) for c in cfgs] if searched else cfgs
        except TuningPending:
            continue
        if any(RunStore(c.runs_dir).status(c) != "done" for c in tuned):
            continue
        if searched:
            chosen.append({"row": arm, **{f"lr={lr:g}": v for lr, v in scores.items()}, "chosen lr": tuned[0].train.lr})
        runs += [{"row": arm, "seed": c.seed, "lr": c.train.lr,
                  "final": RunStore(c.runs_dir).load(c).summary["final_acc_mean"]} for c in tuned]
    return pd.DataFrame(runs), pd.DataFrame(chosen, columns=None if chosen else ["row"]).set_index("row")


if __name__ == "__main__":
    start = time.time()
    table = fedotp.TABLES["vs_coop"]
    search = table.search(PROFILE)
    by_arm: dict[str, list] = {}
    for cfg in table.configs(PROFILE, tuned=False):
        by_arm.setdefault(fedotp.study_label(cfg), []).append(cfg)
    # Arm by arm (search, then the claim seeds at the chosen rate), so an interrupted study keeps
    # whole arms.
    for arm, cfgs in ({} if STORED_ONLY else by_arm).items():
        if search is not None:
            train(search.search_configs(cfgs[0]))
        train([search.choose(c) if search is not None else c for c in cfgs])
        print(f"{time.time() - start:7.0f}s  {arm}", flush=True)
    runs, chosen = stored_arms(table, search, by_arm)
    if runs.empty:
        sys.exit("no arm of the study is stored yet")
    summary = fedotp.study_summary(runs)
    record = {"profile": PROFILE, "arms": f"{runs['row'].nunique()} of {len(by_arm)}",
              "search": chosen.reset_index().to_dict(orient="records"),
              "runs": runs.to_dict(orient="records"),
              "summary": summary.reset_index().to_dict(orient="records"),
              "findings": fedotp.study_findings(summary)}
    OUT.write_text(json.dumps(record, indent=1, ensure_ascii=False, default=str) + "\n")
    pd.set_option("display.width", 200)
    print(summary.to_string(float_format=lambda v: f"{v:.3g}"))
    print(chosen.to_string(float_format=lambda v: f"{v:.3g}"))
    print(record["findings"])
