"""Another reading of "final accuracy", measured on a laptop pass's stored runs; nothing trains.

    FEDREPRO_OUTPUT=/path/to/pass python bench/final_window.py [--out bench/final_window.json]

The claims read a run's last evaluated round. pFedCSPC's scores move by about a point from one round
to the next (docs/speed.md), so a verdict read at one round depends on the round a run ends at. A
paper that says "final accuracy" without saying how it was read leaves room for the mean over the
last k evaluated rounds, which averages that noise away. Each paper's convergence-notebook claims
(``BY_ROUND``, whose tables carry the per-round scores) are judged with ``final`` and every
``final_<m>`` read over the last k rounds (:func:`fedrepro.analysis.by_round.final_over_last`),
for each k of ``--k``; k = 1 is the verdict as the pages state it. Evidence for docs/claims.md, not
a claim. Runs a group needs that the store lacks are reported as missing, not trained.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pandas as pd

from fedrepro.analysis.by_round import final_over_last
from fedrepro.env.host import repo_root
from fedrepro.papers import paper
from fedrepro.papers.verdicts import by_round_papers, evaluate_claims, stored_groups



def verdicts(name: str, profile: str, ks: list[int]) -> pd.DataFrame:
    """One row per BY_ROUND claim of paper ``name`` and k: its verdict, effect and interval."""
    pkg = paper(name)
    groups, missing = stored_groups(name, profile)
    if groups is None:
        raise LookupError(f"{missing} of the runs (or searches) its claims read are not stored")
    rows = []
    for group, ids in pkg.BY_ROUND.items():
        for k in ks:
            judged = evaluate_claims(final_over_last(groups[group], k, pkg.ROUNDS_OF),
                                     ids=list(ids)).set_index("claim_id")
            rows += [{"paper": name, "claim_id": cid, "k": k, "verdict": judged.at[cid, "verdict"],
                      "effect": judged.at[cid, "effect"], "interval": judged.at[cid, "interval"]} for cid in ids]
    return pd.DataFrame(rows)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=str(repo_root() / "bench" / "final_window.json"))
    ap.add_argument("--profile", default="laptop", choices=("smoke", "laptop"))
    ap.add_argument("--k", type=int, nargs="+", default=[1, 3, 5, 10], help="last evaluated rounds averaged")
    args = ap.parse_args(argv)
    report: dict = {"profile": args.profile, "k": args.k, "papers": {}}
    for name in by_round_papers():
        try:
            table = verdicts(name, args.profile, args.k)
        except LookupError as e:
            print(f"{name}: not judged, {e}")
            report["papers"][name] = {"missing": str(e)}
            continue
        wide = table.pivot(index="claim_id", columns="k", values="verdict")
        moved = wide.ne(wide[args.k[0]], axis=0).sum()
        print(f"{name}: verdict over the last k evaluated rounds\n{wide.to_string()}\n"
              f"changed against k={args.k[0]}: " + ", ".join(f"k={k}: {int(n)}" for k, n in moved.items()) + "\n")
        report["papers"][name] = {"changed": {str(k): int(n) for k, n in moved.items()},
                                  "claims": table.to_dict("records")}
    Path(args.out).write_text(json.dumps(report, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
