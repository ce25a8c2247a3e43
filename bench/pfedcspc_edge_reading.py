"""pFedCSPC's verdicts under both readings of PTA's edge loss (Eq. 7): ours (distances divided by
their mean, as the FedCSPC code does: ``method.args.edge_scale="mean"``) and the literal one (raw
distances: ``"none"``). Issue 54: "show the verdict under the other reading where it matters".

Every claim whose runs train PTA's loss: notebook 02 (Tables IV and V), notebook 05 (Fig. 6's
``more_prototypes_help``) and notebook 06 (Figs. 7-8's ``features_align``). Each reads its runs as its
notebook does (the archive's or the store's); every run whose method trains PTA's loss (pFedCSPC
with ``align`` on) is trained again with raw distances, the other runs are shared, and the claims
are evaluated on each version of the rows.

    FEDREPRO_OUTPUT=/work/edge .venv/bin/python bench/pfedcspc_edge_reading.py [--profile laptop] \
        [--notebooks 02,05] [--out bench/pfedcspc_edge_reading.json]
    FEDREPRO_OUTPUT=/work/edge FEDREPRO_ARCHIVE=off .venv/bin/python bench/pfedcspc_edge_reading.py --notebooks 06

Notebook 06 reads the runs' final models, which the archive does not keep: run it with the archive off.

Writes one JSON record, one section per notebook (a notebook not run keeps its earlier section):
per claim, its verdict, interval and evidence under each reading.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import pandas as pd

import fedrepro
from fedrepro.analysis import extract_features
from fedrepro.analysis.alignment import alignment_ratio
from fedrepro.env.host import cpu_model, git_commit, repo_root
from fedrepro.execute.grid import train_pending
from fedrepro.papers import claim_seeds, pfedcspc, table_seeds
from fedrepro.papers.pfedcspc.notebooks import ALIGN_STAGE, alignment_runs
from fedrepro.papers.verdicts import evaluate_claims
from fedrepro.runs.archive import Archive, archive_folder
from fedrepro.runs.store import RunResult

WHAT = "PTA's edge loss (Eq. 7)"
OURS, LITERAL = "mean-scaled (ours, the FedCSPC code's)", "raw (Eq. 7 read literally)"
# What each notebook's claims read: its tables (None: notebook 06's alignment rows) and its claims.
NOTEBOOKS = {
    "02": (("ablation_global", "ablation_personal"),
           ["pfedcspc.calibration_raises_global", "pfedcspc.clusters_beat_one_mean", "pfedcspc.ablation_adds_up",
            "pfedcspc.personalisation_chain", "pfedcspc.cspc_chain_beats_fedavg_chain"]),
    "05": (("sensitivity",), ["pfedcspc.more_prototypes_help"]),
    "06": (None, ["pfedcspc.features_align"]),
}
# Notebook 06's feature sample (its MAX_PER_CLIENT).
MAX_PER_CLIENT = 100


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


def table_readings(names, profile: str) -> tuple[dict[str, pd.DataFrame], int]:
    """Each reading's rows of the tables ``names``, and how many runs were trained again."""
    tables, twins = {}, {}
    for name in names:
        t = pfedcspc.TABLES[name]
        df = t.run(profile, claim_seeds(profile, t.key), table_seeds(profile), progress=False)
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
    return {OURS: pd.concat(tables.values(), ignore_index=True),
            LITERAL: pd.concat(literal_tables, ignore_index=True)}, len(twins)


def alignment_readings(profile: str) -> tuple[dict[str, pd.DataFrame], int]:
    """Notebook 06's alignment rows under each reading (its runs, its feature sample)."""
    # Its final models are not archived, so every run is trained here, at the seeds the archived
    # pass's stage reached (the page's verdict rests on them).
    stage = Archive(archive_folder(profile)).stages().get(ALIGN_STAGE)
    cfgs = alignment_runs(profile, None if stage is None else list(range(stage)))
    twins = {key: literal(cfg) for key, cfg in cfgs.items()}
    todo = [c for c in twins.values() if c is not None]
    print(f"{len(todo)} runs train PTA's edge loss; training them with raw distances", flush=True)
    train_pending(list(cfgs.values()) + todo, progress=True)
    out = {}
    for reading, pick in ((OURS, lambda k: cfgs[k]), (LITERAL, lambda k: twins[k] or cfgs[k])):
        rows = []
        for (name, seed) in cfgs:
            res = fedrepro.run(pick((name, seed)))
            feats, y, cid = extract_features(res, max_per_client=MAX_PER_CLIENT)
            rows.append({"model": name, "seed": seed, "alignment_ratio": alignment_ratio(feats, y, cid),
                         "path": str(res.path)})
        out[reading] = pd.DataFrame(rows)
    return out, len(todo)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", default="laptop")
    ap.add_argument("--notebooks", default=",".join(NOTEBOOKS),
                    help=f"comma-separated, of {', '.join(NOTEBOOKS)}")
    ap.add_argument("--out", default=str(repo_root() / "bench" / "pfedcspc_edge_reading.json"))
    args = ap.parse_args()
    chosen = [n.strip() for n in args.notebooks.split(",") if n.strip()]
    unknown = sorted(set(chosen) - set(NOTEBOOKS))
    if unknown:
        ap.error(f"--notebooks: unknown {', '.join(unknown)}; valid: {', '.join(NOTEBOOKS)}")
    out = Path(args.out)
    record = json.loads(out.read_text()) if out.exists() else {}
    if "notebooks" not in record:  # the first version held notebook 02 alone, at its top level
        record = {"profile": record.get("profile", args.profile),
                  "notebooks": {"02": record} if record else {}}
    record["what"] = WHAT  # the results pages name the reading by it (fedrepro.app.results_page.READINGS)
    for nb in chosen:
        names, ids = NOTEBOOKS[nb]
        readings, trained = table_readings(names, args.profile) if names else alignment_readings(args.profile)
        section = {"profile": args.profile, "commit": git_commit(repo_root()), "cpu": cpu_model(),
                   "literal_runs": trained, "claims": {}}
        for reading, results in readings.items():
            for c in evaluate_claims(results, ids=ids).to_dict("records"):
                section["claims"].setdefault(c["claim_id"], {})[reading] = {
                    k: c.get(k) for k in ("verdict", "interval", "effect", "seeds", "evidence")}
        record["notebooks"][nb] = section
        out.write_text(json.dumps(record, indent=1, default=str) + "\n")
        for cid, by in section["claims"].items():
            print(nb, cid, " | ".join(f"{r.split(' ')[0]}: {v['verdict']} {v['interval']}" for r, v in by.items()),
                  flush=True)


if __name__ == "__main__":
    main()
