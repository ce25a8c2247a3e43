"""Where PEP-FedPT's laptop runs flatten: FedVPT (its main baseline) and PEP-FedPT on the laptop
profile's pathological split, seeds 0-2, trained for 40 rounds and read at cuts of 10-40 rounds (the
first r rounds of a longer run equal an r-round run: nothing in a run depends on its round budget,
the learning-rate decay γ^round included).

    FEDREPRO_OUTPUT=/tmp/pep_pilot .venv/bin/python bench/pep_fedpt_rounds_pilot.py [report]

writes bench/pep_fedpt_rounds_pilot.json: per run and cut, ``final`` (mean client accuracy at that
round, points), ``last_change`` (the mean of the last 5 evaluated rounds minus the 5 before,
points), ``noise`` (its standard error from round-to-round noise) and ``flat`` (the rule of
fedrepro.fl.flatness), and the seconds each run took. Rates are the setup's own (train.lr,
train.prompt_lr), untuned: the pilot asks how many rounds the curves need, not which rate is best.

Evidence for the laptop profile's round budget (fedrepro/papers/pep_fedpt/setup.py), not a claim."""
import json
import sys
from pathlib import Path

from fedrepro.execute.grid import train_pending
from fedrepro.fl.flatness import judge
from fedrepro.papers import setup
from fedrepro.runs.catalog import read_run
from fedrepro.runs.store import RunStore

ROUNDS = 40
CUTS = (10, 15, 20, 25, 30, 35, 40)
SEEDS = (0, 1, 2)
METHODS = ("fedvpt", "pep_fedpt")
OUT = Path(__file__).with_suffix(".json")


def configs():
    base = setup("pep_fedpt", "laptop", "pathological").replace(**{"train.rounds": ROUNDS})
    return [base.replace(**{"method.name": m}, seed=s) for s in SEEDS for m in METHODS]


def report() -> dict:
    """Every pilot run's curve so far (a run still training is read from its checkpoint), cut at CUTS."""
    runs = []
    for c in configs():
        folder = RunStore(c.runs_dir).path(c)
        if not folder.exists():
            continue
        stored = read_run(folder, checkpoint=True)
        acc = stored.rounds["acc_mean"].dropna().to_numpy() if not stored.rounds.empty else []
        train_s = float(stored.rounds["time_train_s"].sum()) if "time_train_s" in stored.rounds else None
        cuts = {}
        for r in CUTS:
            if r > len(acc):
                break
            change, noise, flat = judge(acc[:r])
            cuts[r] = {"final": round(100 * float(acc[r - 1]), 2),
                       "last5_mean": round(100 * float(acc[r - 5:r].mean()), 2),
                       "last_change": round(100 * change, 2), "noise": round(100 * noise, 2), "flat": bool(flat)}
        runs.append({"method": c.method.name, "seed": c.seed, "rounds_done": len(acc),
                     "train_seconds": train_s, "acc": [round(100 * float(a), 2) for a in acc], "cuts": cuts})
    c0 = configs()[0]
    return {"setup": "pep_fedpt laptop pathological, rates untuned (train.lr, train.prompt_lr as the setup)",
            "rounds": ROUNDS, "seeds": list(SEEDS),
            "train": {k: getattr(c0.train, k) for k in ("lr", "prompt_lr", "local_epochs", "batch_size",
                                                         "participation")},
            "max_train": c0.data.max_train, "max_test": c0.data.max_test, "num_clients": c0.data.num_clients,
            "runs": runs}


if __name__ == "__main__":
    if sys.argv[1:] != ["report"]:
        # One process per run: the runs are independent and seeded on their own.
        train_pending(configs(), workers=len(configs()), progress=False)
    OUT.write_text(json.dumps(report(), indent=1))
    for r in report()["runs"]:
        print(r["method"], r["seed"], r["rounds_done"], {k: (v["last5_mean"], v["last_change"], v["flat"])
                                                        for k, v in r["cuts"].items()})
