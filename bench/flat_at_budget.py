"""Which laptop runs still move at their last round, paper by paper: where training until flat would pay.

Reads every run that a laptop pass's notebooks read (their traces under output/laptop/trace/) and
judges each one's curve of evaluated accuracies by the flatness rule (fedrepro.fl.flatness) at its
last round. A run counts once, under the first notebook (in name order) that read it; tuning runs
(the tuning seed) are counted apart from the runs claims read. A run whose method reads
train.rounds (fedrepro.runs.prefix.reads_total_rounds) is counted apart too: the rule cannot stop
it, so training until flat would not change it.

    .venv/bin/python bench/flat_at_budget.py --root <output root of a laptop pass>

writes bench/flat_at_budget.json: per paper and notebook, the runs, how many the rule cannot judge
(fewer than two windows of evaluated rounds: a run evaluated only at its end), how many are flat,
and the CPU-hours (train + eval) of all of them and of the moving ones (the judged runs that are
not flat); per paper and method, the moving
runs. Evidence for the laptop budgets (train.stop_when_flat from train.flat_from), not a claim."""
import argparse
import json
import math
from collections import Counter, defaultdict
from pathlib import Path

from fedrepro.env import trace
from fedrepro.execute.tuning import TUNING_SEED
from fedrepro.analysis.by_round import evaluated
from fedrepro.fl.flatness import judge
from fedrepro.methods import METHODS
from fedrepro.runs.prefix import reads_total_rounds
from fedrepro.runs.store import RunResult

OUT = Path(__file__).with_suffix(".json")
PAPERS = ("fedpft", "pfedcspc", "pep_fedpt", "fedotp")


def survey(root: Path) -> dict:
    seen: set[str] = set()
    notebooks: dict = defaultdict(lambda: defaultdict(lambda: {"runs": 0, "unjudged": 0, "flat": 0, "cpu_h": 0.0,
                                                                "moving_cpu_h": 0.0}))
    moving_methods: dict = defaultdict(Counter)
    fixed: Counter = Counter()
    for paper in PAPERS:
        for path in sorted((root / "output" / "laptop" / "trace").glob(f"{paper}__*.ipynb.jsonl")):
            notebook = path.name.removesuffix(".ipynb.jsonl").replace("__", "/")
            for h in sorted({e["hash"] for e in trace.read(path) if e.get("event") == "run"} - seen):
                seen.add(h)
                result = RunResult(root / "runs" / h)
                cfg = result.config
                if cfg.profile != "laptop":
                    continue
                if reads_total_rounds(METHODS.get(cfg.method.name)):
                    fixed[paper] += 1
                    continue
                change, _, flat = judge(evaluated(result.rounds)["acc_mean"].to_numpy())
                kind = "tuning" if cfg.seed == TUNING_SEED else "claims"
                row = notebooks[paper][f"{notebook} ({kind})"]
                hours = (result.summary.get("time_train_s", 0.0) + result.summary.get("time_eval_s", 0.0)) / 3600
                row["runs"] += 1
                row["cpu_h"] = round(row["cpu_h"] + hours, 3)
                if math.isnan(change):  # fewer than two windows of evaluated rounds: the rule cannot judge it
                    row["unjudged"] += 1
                    continue
                row["flat"] += int(flat)
                if not flat:
                    row["moving_cpu_h"] = round(row["moving_cpu_h"] + hours, 3)
                    moving_methods[paper][cfg.method.name] += 1
    papers = {}
    for paper, rows in notebooks.items():
        total = {k: round(sum(r[k] for r in rows.values()), 3)
                 for k in ("runs", "unjudged", "flat", "cpu_h", "moving_cpu_h")}
        papers[paper] = {"total": total, "rule_cannot_stop": fixed[paper], "notebooks": rows,
                         "moving_by_method": dict(moving_methods[paper].most_common())}
    return {"rule": "fedrepro.fl.flatness at each run's last round", "papers": papers}


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", type=Path, required=True,
                    help="output root of a laptop pass (runs/, output/laptop/trace/)")
    report = survey(ap.parse_args().root)
    OUT.write_text(json.dumps(report, indent=1) + "\n")
    for paper, s in report["papers"].items():
        print(paper, s["total"], "rule cannot stop:", s["rule_cannot_stop"])
