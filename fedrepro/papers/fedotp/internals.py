"""FedOTP's internals measured on trained runs: the local-prompt clusters behind Fig. A5 and the
plans' foreground mass behind Figs. 2 and A4, as the tidy tables the claims read."""
from __future__ import annotations

import pandas as pd

from ...analysis.ot_maps import run_foreground_mass
from ...analysis.prompt_clusters import run_prompt_clusters
from ...store import RunResult


def cluster_table(results: pd.DataFrame, by: str = "domain", learnt_only: bool = False) -> pd.DataFrame:
    """One row per run of ``results`` (a table's tidy results): the clustering statistic of its
    clients' local prompts grouped ``by`` (:func:`fedrepro.analysis.prompt_clusters.clustering_stat`);
    ``cluster_gap`` is the mean within-group minus across-group cosine similarity."""
    rows = []
    for _, r in results.iterrows():
        pc = run_prompt_clusters(RunResult(r["path"]), by=by, seed=int(r["seed"]), learnt_only=learnt_only)
        rows.append({"seed": int(r["seed"]), "row": r.get("row"), "cluster_gap": pc.stats["gap"], **pc.stats})
    return pd.DataFrame(rows)


def foreground_table(results: pd.DataFrame, gammas=(1.0, 0.9, 0.8, 0.65, 0.5), **kw) -> pd.DataFrame:
    """The plan mass on Fashion-MNIST foreground patches per (run seed, client, γ), with the trained
    prompts of each run in ``results`` (:func:`fedrepro.analysis.ot_maps.run_foreground_mass`)."""
    parts = [run_foreground_mass(RunResult(r["path"]), gammas, **kw).assign(seed=int(r["seed"]))
             for _, r in results.iterrows()]
    return pd.concat(parts, ignore_index=True)
