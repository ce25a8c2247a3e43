"""Are PEP-FedPT's laptop runs flat at the laptop budget (30 rounds) at the rates the search chose?

bench/pep_fedpt_rounds_pilot.py set the budget from untuned runs and could not read PEP-FedPT past
18 rounds. This reads the laptop pass's own runs instead: every run of the pathological table that
notebook 01 read (every method of Table 1 at its tuned rates, every claim seed; held-out and tuning
runs left out), judged by the flatness rule (fedrepro.fl.flatness) at cuts of 20, 25 and 30 rounds.

    .venv/bin/python bench/pep_fedpt_rounds_reread.py --root <output root of a laptop pass>

writes bench/pep_fedpt_rounds_reread.json: per run, each cut's last-window change, its noise and the
verdict of the rule (points); per method, how many runs are flat at each cut. Evidence for the
laptop budget (fedrepro/papers/pep_fedpt/setup.py), not a claim."""
import argparse
import json
from collections import Counter, defaultdict
from pathlib import Path

from fedrepro.env import trace
from fedrepro.execute.tuning import TUNING_SEED
from fedrepro.fl.flatness import evaluated_acc, judge
from fedrepro.runs.store import RunResult

CUTS = (20, 25, 30)
NOTEBOOK = "pep_fedpt/01_label_heterogeneity.ipynb"
OUT = Path(__file__).with_suffix(".json")


def reread(root: Path) -> dict:
    events = trace.read(root / "output" / "laptop" / "trace" / trace.notebook_file(NOTEBOOK))
    runs, flat = [], defaultdict(lambda: defaultdict(int))
    for h in sorted({e["hash"] for e in events if e.get("event") == "run"}):
        result = RunResult(root / "runs" / h)
        cfg = result.config
        if cfg.data.partition != "pathological" or cfg.data.holdout_clients or cfg.seed == TUNING_SEED:
            continue
        acc = evaluated_acc(result.rounds.to_dict(orient="records"))
        cuts = {}
        for r in CUTS:
            if r <= len(acc):
                change, noise, is_flat = judge(acc[:r])
                cuts[r] = {"last_change": round(100 * change, 2), "noise": round(100 * noise, 2), "flat": is_flat}
                flat[cfg.method.name][r] += int(is_flat)
        runs.append({"hash": h, "method": cfg.method.name, "method_args": cfg.method.args, "seed": cfg.seed,
                     "rounds": len(acc), "cuts": cuts})
    counts = Counter(r["method"] for r in runs)
    summary = {m: {"runs": counts[m], **{f"flat_at_{c}": flat[m][c] for c in CUTS}} for m in sorted(counts)}
    return {"notebook": NOTEBOOK, "cuts": list(CUTS), "summary": summary, "runs": runs}


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", type=Path, required=True,
                    help="output root of a laptop pass (runs/, output/laptop/trace/)")
    report = reread(ap.parse_args().root)
    OUT.write_text(json.dumps(report, indent=1) + "\n")
    for m, s in report["summary"].items():
        print(m, s)
