"""pFedCSPC's notebook-02 verdicts under both readings of PTA's edge loss (Eq. 7): ours (distances
divided by their mean, as the FedCSPC code does: ``method.args.edge_scale="mean"``) and the literal
one (raw distances: ``"none"``). Issue 54: "show the verdict under the other reading where it matters".

Tables IV and V run as notebook 02 runs them (the runs the archive or the store holds); every row
whose method trains PTA's loss (pFedCSPC with ``align`` on) is trained again with raw distances, the
other rows are shared, and the notebook's claims are evaluated on each version of the tables.

    FEDREPRO_OUTPUT=/work/edge .venv/bin/python bench/pfedcspc_edge_reading.py [--profile laptop] \
        [--out bench/pfedcspc_edge_reading.json]

Writes one JSON record: per claim, its verdict, interval and evidence under each reading.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import pandas as pd

import fedrepro
from fedrepro.env.host import cpu_model, git_commit, repo_root
from fedrepro.execute.grid import train_pending
from fedrepro.papers import claim_seeds, pfedcspc, table_seeds
from fedrepro.papers.verdicts import evaluate_claims
from fedrepro.runs.store import RunResult

IDS = ["pfedcspc.calibration_raises_global", "pfedcspc.clusters_beat_one_mean", "pfedcspc.ablation_adds_up",
       "pfedcspc.personalisation_chain", "pfedcspc.cspc_chain_beats_fedavg_chain"]
TABLES = ("ablation_global", "ablation_personal")


def literal(cfg):
    """``cfg`` with Eq. 7 read literally, or None where the run trains no edge loss."""
    if cfg.method.name != "pfedcspc" or not cfg.method.args.get("align", True):
        return None
    return cfg.replace(**{"method.args.edge_scale": "none"})


def with_runs(table: pd.DataFrame, runs: dict[str, RunResult]) -> pd.DataFrame:
    """``table`` with each row whose run has a literal twin (``runs`` by the row's path) read from it."""
    out = table.copy()
    for i, path in out["path"].items():
        twin = runs.get(path)
        if twin is None:
            continue
        s = twin.summary
        out.at[i, "best"], out.at[i, "final"], out.at[i, "path"] = s["best_acc_mean"], s["final_acc_mean"], \
            str(twin.path)
        for col in out.columns:
            if col.startswith(("best_", "final_")) and col in s:
                out.at[i, col] = s[col]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", default="laptop")
    ap.add_argument("--out", default=str(repo_root() / "bench" / "pfedcspc_edge_reading.json"))
    args = ap.parse_args()
    tables, twins = {}, {}
    for name in TABLES:
        t = pfedcspc.TABLES[name]
        df = t.run(args.profile, claim_seeds(args.profile, t.key), table_seeds(args.profile), progress=False)
        tables[name] = df
        for path in df["path"]:
            raw = literal(RunResult(path).config)
            if raw is not None:
                twins[path] = raw
    print(f"{len(twins)} runs train PTA's edge loss; training them with raw distances", flush=True)
    train_pending(list(twins.values()), progress=True)
    runs = {p: fedrepro.run(c) for p, c in twins.items()}
    # A table's derived columns (pFedCSPC's I_local is read off each run's client rows) are derived
    # again from the literal runs.
    literal_tables = []
    for name, df in tables.items():
        derive = pfedcspc.TABLES[name].derive
        swapped = with_runs(df, runs)
        literal_tables.append(derive(swapped) if derive is not None else swapped)
    readings = {"mean-scaled (ours, the FedCSPC code's)": pd.concat(tables.values(), ignore_index=True),
                "raw (Eq. 7 read literally)": pd.concat(literal_tables, ignore_index=True)}
    record = {"profile": args.profile, "commit": git_commit(repo_root()), "cpu": cpu_model(),
              "literal_runs": len(twins), "claims": {}}
    for reading, results in readings.items():
        for c in evaluate_claims(results, ids=IDS).to_dict("records"):
            record["claims"].setdefault(c["claim_id"], {})[reading] = {
                k: c.get(k) for k in ("verdict", "interval", "effect", "seeds", "evidence")}
    Path(args.out).write_text(json.dumps(record, indent=1, default=str) + "\n")
    for cid, by in record["claims"].items():
        print(cid, " | ".join(f"{r.split(' ')[0]}: {v['verdict']} {v['interval']}" for r, v in by.items()))


if __name__ == "__main__":
    main()
