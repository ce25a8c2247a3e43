"""Claims across papers: every paper's registered claims, a notebook's claims evaluated by paper or
id, the claims the notebooks recorded, and claims' verdicts on tables cut after each round or where
each run's curve turned flat."""
from __future__ import annotations

from typing import Iterable, Mapping, Sequence

import pandas as pd

from ..analysis.by_round import FLAT_WINDOW, Groups, RoundsOf, at_flat_stop, at_round, run_groups, stored_rounds
from ..execute.local import unfinished
from ..execute.tuning import TuningPending
from ..claims.core import CLAIMS, Claim, claims_dir, recorded_claims
from ..registry import Registry
from ..runs.store import RunResult
from . import PAPERS, load_all, paper as paper_package


def registered() -> Registry:
    """The claim registry with every paper's claims in it (each paper package registers its own)."""
    load_all()
    return CLAIMS


def claims_for(paper: str) -> list[Claim]:
    reg = registered()
    return [reg.get(n) for n in reg.names() if reg.get(n).paper == paper]


def evaluate_claims(results: pd.DataFrame, paper: str | None = None,
                    ids: Iterable[str] | None = None) -> pd.DataFrame:
    """Evaluate claims (all of a paper's, or the given ids) into a display table."""
    chosen = [registered().get(i) for i in ids] if ids is not None else claims_for(paper or "")
    rows = [c.evaluate(results).__dict__ for c in chosen]
    return pd.DataFrame(rows, columns=["claim_id", "paper", "source", "statement", "verdict", "interval", "evidence",
                                       "runs", "seeds", "max_seeds", "effect", "room", "replication"])


def notebook_path(name: str | None) -> str:
    """The claims record's notebook name as the notebook's path under ``notebooks/``, without
    ``.ipynb`` (``fedotp_01_label_shift`` -> ``fedotp/01_label_shift``, ``00_tour`` -> ``00_tour``): the
    notebooks save their claims under their path with ``/`` as ``_``; "" for none (NOT RUN)."""
    if not isinstance(name, str) or not name:  # NOT RUN: no notebook (None, or NaN from pandas)
        return ""
    for paper in PAPERS:
        if name.startswith(paper + "_"):
            return f"{paper}/{name[len(paper) + 1:]}"
    return name


def collect_claims(profile: str, root=None) -> pd.DataFrame:
    """Every claim of every paper, with the verdict recorded by the notebook that checked it (under
    the output root ``root``, default :func:`fedrepro.env.settings.output_root`).

    Registered claims that no notebook has checked yet at this profile appear as NOT RUN.
    """
    registered()
    checked = recorded_claims(claims_dir(profile, root))
    rows = []
    for name in CLAIMS.names():
        c = CLAIMS.get(name)
        rows.append(checked.get(name, {"claim_id": c.id, "paper": c.paper, "source": c.source,
                                       "statement": c.statement, "evidence": "no notebook has checked it yet",
                                       "verdict": "NOT RUN", "interval": "", "notebook": None, "runs": [],
                                       "seeds": [], "max_seeds": c.max_seeds, "effect": "", "room": "",
                                       "replication": None, "commit": None, "recorded": None}))
    cols = ["paper", "claim_id", "source", "statement", "verdict", "interval", "evidence", "notebook", "runs", "seeds",
            "max_seeds", "effect", "room", "replication", "commit", "recorded"]
    return pd.DataFrame(rows, columns=cols)


def by_round_papers() -> tuple[str, ...]:
    """The papers whose convergence notebooks judge claims by round (their packages declare ``BY_ROUND``)."""
    return tuple(name for name in PAPERS if hasattr(paper_package(name), "BY_ROUND"))


def stored_groups(name: str, profile: str) -> tuple[dict[tuple[str, ...], pd.DataFrame] | None, int]:
    """Paper ``name``'s ``BY_ROUND`` groups of runs at ``profile`` as stored
    (:func:`fedrepro.analysis.by_round.run_groups`), without training any: ``(groups, 0)``, or
    ``(None, n)`` while n of the runs or learning-rate searches they read are not stored."""
    pkg = paper_package(name)
    try:
        needed = [c for group in pkg.BY_ROUND for t in group
                  for c in pkg.TABLES[t].search_configs(profile) + pkg.TABLES[t].configs(profile)]
    except TuningPending as e:  # a search not stored yet: its rows are unknown
        return None, len(e.configs)
    missing = len(unfinished(needed))
    return (None, missing) if missing else (run_groups(pkg.TABLES, pkg.BY_ROUND, profile), 0)


def verdicts_by_round(table: pd.DataFrame, claim_ids: Sequence[str], rounds: Iterable[int],
                      rounds_of: RoundsOf = stored_rounds) -> pd.DataFrame:
    """One row per (round, claim): the verdict and evidence on :func:`at_round` of ``table``."""
    cache: dict = {}

    def cached(path):  # each run's rounds are read once for all the cuts
        if path not in cache:
            cache[path] = rounds_of(path)
        return cache[path]

    out = []
    for r in rounds:
        claims = evaluate_claims(at_round(table, r, cached), ids=list(claim_ids))
        out.append(claims.assign(round=r)[["round", "claim_id", "verdict", "interval", "evidence"]])
    return pd.concat(out, ignore_index=True)



def verdicts_by_group(groups: Mapping[tuple[str, ...], pd.DataFrame], by_round: Groups,
                      rounds_of: RoundsOf = stored_rounds) -> pd.DataFrame:
    """:func:`verdicts_by_round` of each group's claims on its runs, cut after every round up to its
    longest run's last."""
    frames = []
    for group, claim_ids in by_round.items():
        t = groups[group]
        last = max(int(RunResult(p).summary["rounds"]) for p in t["path"].unique())
        frames.append(verdicts_by_round(t, claim_ids, range(1, last + 1), rounds_of))
    return pd.concat(frames, ignore_index=True)


def verdicts_at_flat_stop(groups: Mapping[tuple[str, ...], pd.DataFrame], by_round: Groups,
                          rounds_of: RoundsOf = stored_rounds, window: int = FLAT_WINDOW,
                          first: int = 0) -> pd.DataFrame:
    """Each group's claims on its runs as trained (``full``) and as ``train.stop_when_flat`` (window
    ``window``, ``train.flat_from`` ``first``) would have left them (``flat``: every run cut at its own
    flat stop, :func:`at_flat_stop`): one row per
    claim with both verdicts, intervals and effects, whether the verdict changed, and the share of
    the group's trained rounds the option would not have trained (``rounds_saved``)."""
    rows = []
    for group, claim_ids in by_round.items():
        t = groups[group]
        cut = at_flat_stop(t, window, rounds_of, first)
        runs = cut.drop_duplicates("path")
        trained = sum(int(RunResult(p).summary["rounds"]) for p in runs["path"])
        saved = 1 - runs["stop_round"].sum() / trained if trained else float("nan")
        full, flat = (evaluate_claims(x, ids=list(claim_ids)).set_index("claim_id") for x in (t, cut))
        for cid in claim_ids:
            rows.append({"group": "+".join(group), "claim_id": cid,
                         "verdict full": full.at[cid, "verdict"], "verdict flat": flat.at[cid, "verdict"],
                         "changed": full.at[cid, "verdict"] != flat.at[cid, "verdict"],
                         "interval full": full.at[cid, "interval"], "interval flat": flat.at[cid, "interval"],
                         "effect full": full.at[cid, "effect"], "effect flat": flat.at[cid, "effect"],
                         "rounds_saved": saved})
    return pd.DataFrame(rows)
