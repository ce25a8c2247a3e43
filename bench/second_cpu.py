"""The same runs on a second CPU: a table of the reference archive trained again here, run by run and
verdict by verdict (issue 56: how firm a verdict is on another machine).

Trains every run of ``--table`` (claim seeds as the archive's pass ran them) with the archive off in
the store of ``$FEDREPRO_OUTPUT``, reads the archived runs of the same configs, and writes per run the
largest difference of the claims' metrics, and per claim of ``--claims`` its verdict and effect on
each CPU beside the archived record's estimate of how firm it is ("holds on a re-run").

    FEDREPRO_OUTPUT=/work/cpu2 .venv/bin/python bench/second_cpu.py --table pfedcspc:ablation_global \
        --claims pfedcspc.calibration_raises_global,pfedcspc.clusters_beat_one_mean,pfedcspc.ablation_adds_up \
        --out bench/second_cpu_pfedcspc_table4.json
"""
from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import pandas as pd

from fedrepro.claims.core import record_rerun
from fedrepro.env.host import cpu_model, git_commit, repo_root
from fedrepro.papers import claim_seeds, paper, table_seeds
from fedrepro.papers.verdicts import evaluate_claims
from fedrepro.runs import archive


def table_on(t, profile: str, policy: str) -> pd.DataFrame:
    os.environ[archive.ENV] = policy
    return t.run(profile, claim_seeds(profile, t.key), table_seeds(profile), progress=policy == "off")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--table", required=True, help="paper:table, e.g. pfedcspc:ablation_global")
    ap.add_argument("--claims", required=True, help="comma-separated claim ids the table decides")
    ap.add_argument("--profile", default="laptop")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    name, table = args.table.split(":")
    t = paper(name).TABLES[table]
    ids = args.claims.split(",")
    arch = archive.Archive(archive.archive_folder(args.profile))
    source = next(iter(arch.manifest["files"].values()))["source"]
    # The archive's runs (restored into this store), then the same configs trained here.
    theirs = table_on(t, args.profile, "read")
    ours = table_on(t, args.profile, "off")
    metrics = [c for c in ours.columns if c.startswith("final_") or c in ("final", "best")]
    runs = []
    for (_, a), (_, b) in zip(theirs.iterrows(), ours.iterrows()):
        diffs = {m: abs(float(a[m]) - float(b[m])) for m in metrics if pd.notna(a[m]) and pd.notna(b[m])}
        runs.append({"path": Path(b["path"]).name, "identical": all(v == 0 for v in diffs.values()),
                     "max_abs_diff_pts": 100 * max(diffs.values(), default=0.0)})
    kept = {row["claim_id"]: row for rec in arch.claims().values() for row in rec["claims"]}
    verdicts = {}
    for who, results in (("archive", theirs), ("here", ours)):
        for c in evaluate_claims(results, ids=ids).to_dict("records"):
            verdicts.setdefault(c["claim_id"], {})[who] = {k: c.get(k) for k in ("verdict", "interval", "seeds")}
    for cid in ids:
        rerun = record_rerun(kept[cid]) if cid in kept else None
        verdicts[cid]["archived_record_holds_on_rerun"] = rerun
    record = {"table": args.table, "profile": args.profile,
              "archive": {"cpu": source.get("cpu"), "commit": source.get("commit")},
              "here": {"cpu": cpu_model(), "commit": git_commit(repo_root())},
              "runs": runs, "identical_runs": sum(r["identical"] for r in runs),
              "largest_run_difference_pts": max((r["max_abs_diff_pts"] for r in runs), default=0.0),
              "claims": verdicts}
    Path(args.out).write_text(json.dumps(record, indent=1, default=str) + "\n")
    print(json.dumps({k: v for k, v in record.items() if k != "runs"}, indent=1, default=str))


if __name__ == "__main__":
    main()
