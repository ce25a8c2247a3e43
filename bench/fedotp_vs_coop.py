"""Why FedOTP trails local CoOp on the CLIP stand-in: the study table ``fedotp.TABLES["vs_coop"]`` at
the laptop profile (noisy pathological split, 5 clients × 2 classes, 4 shots, 10 rounds), one factor
at a time: the logit scale (the stand-in's own, about 15, against CLIP's 100 via the prompt methods'
``logit_scale`` option), γ, E and the shots. Every arm's learning rate is the best of
{0.001, 0.01, 0.1, 1} on validation data at the tuning seed (1000); the arms then run at the claim
seeds 0-2.

    FEDREPRO_OUTPUT=/tmp/otpstudy nice -n 5 .venv/bin/python bench/fedotp_vs_coop.py

writes bench/fedotp_vs_coop.json: the search (validation accuracy per rate, the rate chosen), every
run (arm, seed, rate, final mean client accuracy) and per arm the mean and spread over seeds, with
the gap to local CoOp at the same factor. The record of notebook 05's study at laptop."""
import json
import sys
import time
from pathlib import Path

import pandas as pd

from fedrepro.execute.grid import train_pending
from fedrepro.execute.tuning import TuningPending
from fedrepro.runs.store import RunStore
from fedrepro.papers import fedotp

PROFILE = sys.argv[1] if len(sys.argv) > 1 else "laptop"
# --stored: train nothing; record the arms whose search and seed runs are all stored (a partial study).
STORED_ONLY = "--stored" in sys.argv
OUT = Path(__file__).with_name("fedotp_vs_coop.json" if PROFILE == "laptop" else f"fedotp_vs_coop_{PROFILE}.json")


def stored_arms(table, search, by_arm):
    """The tidy results and the search table of every arm whose runs are all stored."""
    runs, chosen = [], []
    for arm, cfgs in by_arm.items():
        try:
            scores = search.scores(cfgs[0])
            tuned = [search.choose(c) for c in cfgs]
        except TuningPending:
            continue
        if any(RunStore(c.runs_dir).status(c) != "done" for c in tuned):
            continue
        chosen.append({"row": arm, **{f"lr={lr:g}": v for lr, v in scores.items()}, "chosen lr": tuned[0].train.lr})
        runs += [{"row": arm, "seed": c.seed, "lr": c.train.lr,
                  "final": RunStore(c.runs_dir).load(c).summary["final_acc_mean"]} for c in tuned]
    return pd.DataFrame(runs), pd.DataFrame(chosen).set_index("row")


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
        train_pending(search.search_configs(cfgs[0]), progress=False)
        train_pending([search.choose(c) for c in cfgs], progress=False)
        print(f"{time.time() - start:7.0f}s  {arm}", flush=True)
    runs, chosen = stored_arms(table, search, by_arm)
    summary = fedotp.study_summary(runs)
    record = {"profile": PROFILE, "arms": f"{len(chosen)} of {len(by_arm)}",
              "search": chosen.reset_index().to_dict(orient="records"),
              "runs": runs.to_dict(orient="records"),
              "summary": summary.reset_index().to_dict(orient="records")}
    OUT.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n")
    pd.set_option("display.width", 200)
    print(summary.round({"mean": 2, "std": 2, "minus CoOp": 2, "minus CoOp, min over seeds": 2}).to_string())
    print(chosen.round(3).to_string())
