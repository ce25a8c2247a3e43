"""What a laptop pass cost, and what it decided: CPU-hours per decided claim, per paper.

A pass may be run whole, or in parts (``fedrepro reproduce --only <paper>``, one after the other
into one output root); each part leaves its report (``timings.json``). Give every part's report
(copied aside as the parts run) and the output root::

    python bench/pass_cost.py --root /path/to/pass /path/to/timings.fedotp.json ...

Per part: wall and CPU time, the cores' use, runs trained, peak memory. Per paper: the claims the
notebooks recorded under the root (``fedrepro.papers.verdicts.collect_claims``), by verdict, and the
CPU-hours per decided claim (PASS or FAIL): the CPU time of the parts that trained the paper's
notebooks over its decided claims. A part that ran several papers (``--only 00_tour,fedotp``)
charges its CPU time to the papers it ran in proportion to their notebooks' task time (runs,
analyses, renders). Writes ``--out`` (JSON) and prints the table.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pandas as pd

from fedrepro.app.compute import paper_of
from fedrepro.env.jsonfiles import read_json_file
from fedrepro.papers import PAPERS
from fedrepro.papers.verdicts import collect_claims

DECIDED = ("PASS", "FAIL")


def part_row(path: Path) -> dict:
    t = read_json_file(path, "timings file", "name a timings.json written by `fedrepro reproduce`", {"tasks": dict})
    only = t.get("only") or "all"
    papers = [p for p in PAPERS if p in only] if only != "all" else list(PAPERS)
    # Each paper's share of the part: the task time of its notebooks (their runs, analyses, render).
    work = {p: sum(n.get("train_s_of_its_runs", 0) + n.get("analyses_s", 0) + n.get("render_s", 0)
                   for n in t.get("notebooks", []) if paper_of(n["notebook"]) == p) for p in papers}
    total = sum(work.values())
    share = {p: (w / total if total else 1 / len(papers)) for p, w in work.items()}
    return {"part": only, "papers": papers, "share": share, "commit": t.get("commit"), "wall_s": t.get("wall_s"),
            "cpu_s": t.get("cpu_s"), "cpu_use": t.get("cpu_use"), "runs_trained": t.get("runs_trained"),
            "peak_memory_mib": t.get("peak_memory_mib"), **{f"{k}_s": v for k, v in t.get("task_seconds", {}).items()}}


def per_paper(parts: pd.DataFrame, claims: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for paper in PAPERS:
        mine = parts[parts["papers"].map(lambda ps: paper in ps)]
        cpu_h = float((mine["cpu_s"] * mine["share"].map(lambda s: s[paper])).sum()) / 3600 if len(mine) \
            else float("nan")
        verdicts = claims[claims["paper"] == paper]["verdict"].value_counts()
        decided = int(sum(verdicts.get(v, 0) for v in DECIDED))
        rows.append({"paper": paper, "CPU-h": cpu_h, "claims": int(verdicts.sum()),
                     **{v: int(verdicts.get(v, 0)) for v in ("PASS", "FAIL", "INCONCLUSIVE", "UNTESTABLE", "NOT RUN")},
                     "decided": decided, "CPU-h per decided claim": cpu_h / decided if decided else float("nan")})
    return pd.DataFrame(rows).set_index("paper")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("timings", nargs="+", type=Path, help="each part's timings.json")
    ap.add_argument("--root", required=True, help="the pass's output root (its claims)")
    ap.add_argument("--profile", default="laptop")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    parts = pd.DataFrame([part_row(p) for p in args.timings])
    claims = collect_claims(args.profile, args.root)
    papers = per_paper(parts, claims)
    print(parts.drop(columns=["papers", "share"]).to_string(index=False) + "\n")
    print(papers.round(3).to_string() + "\n")
    if args.out:
        args.out.write_text(json.dumps({"parts": parts.to_dict("records"), "papers": papers.reset_index().to_dict(
            "records")}, indent=1, default=float) + "\n")
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
