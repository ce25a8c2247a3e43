"""Analyses over a whole ``run_grid`` table, cached like runs.

A probe of a finished run is a pure function of the run and the probe config, so its result is
stored beside the runs (``<runs_dir>/_analysis/<kind>/<run-hash>-<config-hash>.json``) and reused;
run folders themselves stay immutable.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

import pandas as pd
from tqdm.auto import tqdm

from ..fl.device import torch_threads
from ..errors import FedreproError
from ..runs.store import RunResult, RunStore, atomic_write_json
from .probe import ProbeConfig, linear_probe, mismatch_probe, summarize_probe


def _key(run_path: Path, cfg: ProbeConfig) -> str:
    blob = json.dumps(dataclasses.asdict(cfg), sort_keys=True)
    return f"{run_path.name}-{hashlib.sha256(blob.encode()).hexdigest()[:12]}"


def _cached(result: RunResult, kind: str, cfg: ProbeConfig, compute) -> dict:
    cache = result.path.parent / "_analysis" / kind / f"{_key(result.path, cfg)}.json"
    if cache.is_file():
        try:
            return json.loads(cache.read_text())
        except json.JSONDecodeError:
            cache.unlink()  # a torn write from an interrupted session; recompute
    with torch_threads(result.config.threads):  # the run's own count: same numbers in any process
        summary = compute()
    cache.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(cache, summary)
    return summary


def probe_run(result: RunResult, cfg: ProbeConfig = ProbeConfig()) -> dict:
    """:func:`summarize_probe` of one run's mismatch probe, computed once and cached."""
    return _cached(result, "mismatch_probe", cfg, lambda: summarize_probe(mismatch_probe(result, cfg)))


def linear_probe_run(result: RunResult, on: str = "features", cfg: ProbeConfig = ProbeConfig()) -> dict:
    """Mean over participating clients of :func:`linear_probe` on ``on`` (and the weighted mean),
    computed once and cached."""
    def compute() -> dict:
        df = linear_probe(result, on, cfg)
        df = df[~df["held_out"]]
        return {"on": on, "probe": float(df["probe"].mean()),
                "probe_weighted": float((df["probe"] * df["n_test"]).sum() / df["n_test"].sum())}

    return _cached(result, f"linear_probe_{on}", cfg, compute)


def probe_grid(table: pd.DataFrame, cfg: ProbeConfig = ProbeConfig(), progress: bool = True) -> pd.DataFrame:
    """Add the mismatch probe's client means (``origin``, ``probe``, ``match``, ``mismatch``) to every
    row of a :func:`fedrepro.run_grid` table."""
    rows = []
    for _, row in tqdm(list(table.iterrows()), desc="probes", disable=not progress, leave=False):
        s = probe_run(RunResult(Path(row["path"])), cfg)
        rows.append({k: s[k] for k in ("origin", "probe", "match", "mismatch", "probe_minus_match")})
    return pd.concat([table.reset_index(drop=True), pd.DataFrame(rows)], axis=1)


def linear_probe_grid(table: pd.DataFrame, on: str = "phi", cfg: ProbeConfig = ProbeConfig(),
                      column: str | None = None, progress: bool = True) -> pd.DataFrame:
    """Add the mean linear-probe accuracy on representation ``on`` (``"phi"``, ``"features"``,
    ``"features_rho"``) as column ``column`` (default ``probe_<on>``) to a run table."""
    column = column or f"probe_{on}"
    vals = [linear_probe_run(RunResult(Path(p)), on, cfg)["probe"]
            for p in tqdm(list(table["path"]), desc=f"probes on {on}", disable=not progress, leave=False)]
    return table.reset_index(drop=True).assign(**{column: vals})


# The cached analyses a notebook's plan may name (``fedrepro.papers.plan.Need.analyses``): ``fedrepro
# reproduce`` computes them in its worker pool as soon as their run is stored, so that the notebook
# finds them cached and only draws.
CACHED = {
    "mismatch_probe": lambda result: probe_run(result),
    # FedPFT notebook 02's second recipe: a smaller step for longer, to show the probe has converged.
    "mismatch_probe:lr0.01x1000": lambda result: probe_run(result, ProbeConfig(lr=0.01, epochs=1000)),
    "linear_probe:phi": lambda result: linear_probe_run(result, "phi"),
    "linear_probe:features": lambda result: linear_probe_run(result, "features"),
    "linear_probe:features_rho": lambda result: linear_probe_run(result, "features_rho"),
}


def check_cached(names) -> None:
    """Fail, naming the valid ones, when a name is not one of :data:`CACHED`."""
    for name in names:
        if name not in CACHED:
            raise FedreproError(f"unknown analysis {name!r}; valid: {', '.join(CACHED)}")


def compute_cached(name: str, cfg) -> None:
    """Analysis ``name`` of :data:`CACHED` on the stored run of ``cfg`` (cached beside the run)."""
    CACHED[name](RunStore(cfg.runs_dir).load(cfg))
