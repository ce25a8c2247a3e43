"""Grids of runs: every point of a grid × seeds, the pending ones trained by an executor, and one
tidy table of their results.
"""
from __future__ import annotations

import itertools
from typing import Any, Callable, Iterable, Mapping, Sequence

import pandas as pd
from tqdm.auto import tqdm

from ..config import RunConfig, check_seeds
from ..errors import ConfigError
from .executors import make_executor
from ..runs.archive import ENV as ARCHIVE_ENV, archived_source
from .run import run


def grid_points(grid: Mapping[str, Sequence[Any]] | Sequence[Mapping[str, Sequence[Any]]] | None,
                seeds: Iterable[int] = (0,)) -> list[tuple[dict[str, Any], int]]:
    """``(point, seed)`` pairs of a grid: the Cartesian product of each mapping's values × seeds.

    ``grid`` may be one mapping (dotted config keys -> values) or a list of them, whose points are
    concatenated (like scikit-learn's ``ParameterGrid``); a mapping may carry its own ``"seed"``
    list, e.g. 3 seeds for the methods a claim rests on and 1 for the rest of a table.
    """
    subgrids = [dict(grid or {})] if grid is None or isinstance(grid, Mapping) else [dict(g) for g in grid]
    if not subgrids:
        raise ConfigError(f"invalid grid={grid!r}; valid: None (the base config alone), a mapping of config keys to "
                          "lists of values, or a non-empty list of such mappings")
    points = []
    for g in subgrids:
        name = "grid['seed']" if "seed" in g else "seeds"
        sub_seeds = check_seeds(g.pop("seed") if "seed" in g else seeds, name)
        if not sub_seeds:  # no seed is no run: an empty table would read as a grid with nothing to show
            raise ConfigError(f"invalid {name}=[]; valid: a non-empty list of distinct integers in [0, 2**63), "
                              "e.g. [0, 1, 2]")
        keys = list(g)
        for k in keys:  # one axis's values: a list (a lone value or an empty list would be a silent mistake)
            given = g[k]
            g[k] = [] if isinstance(given, (str, bytes, Mapping)) or not isinstance(given, Iterable) else list(given)
            if not g[k]:
                raise ConfigError(f"invalid grid[{k!r}]={given!r}; valid: a non-empty list of values, e.g. "
                                  f"{{{k!r}: [...]}}")
        for values in itertools.product(*(g[k] for k in keys)):
            points += [(dict(zip(keys, values)), seed) for seed in sub_seeds]
    return points


# Summary entries every grid table has (acc_mean's best and final are "best" and "final").
_SUMMARY_COLUMNS = ("best_acc_mean", "final_acc_mean", "best_acc_weighted", "final_acc_weighted", "final_acc_std",
                    "best_round")


def _number(v: Any) -> float:
    """A summary value as a float: NaN (stored as null) and absent keys read as NaN."""
    return float("nan") if v is None else float(v)


def _point_label(variant: str | None, point: Mapping[str, Any], seed: int) -> str:
    """``"fedper α=0.1 s0"``: a grid point as the progress bar shows it (the last part of each key)."""
    parts = [variant] if variant is not None else []
    for key, value in point.items():
        short = key.rsplit(".", 1)[-1]
        parts.append(str(value) if short == "name" else f"{'α' if short == 'alpha' else short}={value}")
    return " ".join(parts + [f"s{seed}"])


def run_grid(base: RunConfig, grid: Mapping[str, Sequence[Any]] | Sequence[Mapping[str, Sequence[Any]]] | None = None,
             seeds: Iterable[int] = (0,), progress: bool = True, workers: int | None = None,
             variants: Mapping[str, Mapping[str, Any]] | None = None, variant_col: str = "variant",
             transform: Callable[[RunConfig], RunConfig] | None = None, executor: Any = None,
             **kw: Any) -> pd.DataFrame:
    """Run every point of ``grid`` (see :func:`grid_points`) × ``seeds``.

    ``variants`` names whole config overrides applied before the grid (e.g. Table 4's settings:
    ``{"II": {"method.name": "fedpft", "method.args": {"alternate": False}}, ...}``); the table then
    has a ``variant_col`` column with the name, and the grid runs once per variant.

    Returns a tidy table: one row per run with the grid values, ``seed``, the summary's best and
    final numbers, and ``path`` to the run folder.

    ``transform`` maps each point's config to the one that runs (a table's tuned learning rate,
    :mod:`fedrepro.execute.tuning`); the table then has an ``lr`` column with each run's rate.

    Runs not yet finished are trained ``workers`` at a time in separate processes (default:
    :func:`fedrepro.execute.local.default_workers`); each run is seeded on its own, so the order does not matter. A
    worker that fails re-raises its error here; finished runs stay in the store.

    ``executor``: where they train (:mod:`fedrepro.execute`): ``"local"`` (the default, the
    processes above) or ``"ray"`` / a :class:`~fedrepro.execute.RayExecutor` with its cluster
    address and per-run CPUs and GPUs. Either way each run is stored the same (folder, files, numbers).
    """
    if variants is not None and not variants:
        raise ConfigError("invalid variants={}; valid: None (the base config alone) or a non-empty mapping of "
                          "variant names to config overrides")
    bases = {None: base} if variants is None else {name: base.replace(**dict(ov)) for name, ov in variants.items()}
    points = [(name, point, seed) for name in bases for point, seed in grid_points(grid, seeds)]
    cfgs = [bases[name].replace(**point, seed=int(seed)) for name, point, seed in points]
    if transform is not None:
        cfgs = [transform(c) for c in cfgs]
    if kw and executor is not None and make_executor(executor).remote:
        raise ConfigError(f"run_grid(executor={executor!r}) trains elsewhere, where {', '.join(sorted(kw))} "
                          "cannot reach; leave those keywords out or use the local executor")
    if not kw:
        train_pending(cfgs, workers, progress, executor=executor)
    rows = []
    # One bar for the whole grid, labelled with the point it is at; the runs' own per-round bars
    # stay off (nested bars garble outside a terminal and say nothing of the point).
    bar = tqdm(total=len(points), desc="grid", disable=not progress, leave=False)
    for (name, point, seed), cfg in zip(points, cfgs):
        bar.set_postfix_str(_point_label(name, point, seed))  # drawn now: a stored run passes in microseconds
        res = run(cfg, **{"force_progress": False, **kw})
        bar.update()
        s = res.summary
        label = {} if variants is None else {variant_col: name}
        if transform is not None:
            label["lr"] = float(cfg.train.lr)
        # Every other metric the run logged (global_acc, f1_mean, a method's own), best and final.
        extra = {k: s[k] for k in s if k.startswith(("best_", "final_")) and k not in _SUMMARY_COLUMNS
                 and not k.startswith(("best_acc", "final_acc", "best_heldout", "final_heldout"))}
        if "diverged_round" in s:
            extra["diverged_round"] = s["diverged_round"]
        rows.append({**label, **point, "seed": int(seed), "best": s["best_acc_mean"], "final": s["final_acc_mean"],
                     "best_weighted": s["best_acc_weighted"], "final_weighted": s["final_acc_weighted"],
                     "final_std_clients": s["final_acc_std"], "best_round": s["best_round"],
                     # the worst participating client and the held-out clients' mean, at the last round
                     "final_worst": _number(s.get("final_acc_min")),
                     "final_heldout": _number(s.get("final_heldout_acc_mean")), **extra,
                     "time_train_s": s["time_train_s"], "path": str(res.path)})
    bar.close()
    _say_archived([r["path"] for r in rows])
    return pd.DataFrame(rows)


def _say_archived(paths: Sequence[str]) -> None:
    """One line when some of a grid's runs were read from the reference archive: how many, and the
    pass they come from (:mod:`fedrepro.runs.archive`)."""
    sources = [s for s in (archived_source(p) for p in paths) if s is not None]
    if not sources:
        return
    passes = sorted({f"commit {s.get('commit', '?')}, {s.get('cpu', '?')}, {s.get('date', '?')}" for s in sources})
    print(f"{len(sources)} of {len(paths)} runs read from the reference archive ({'; '.join(passes)}), not trained "
          f"here; {ARCHIVE_ENV}=off trains them", flush=True)


def train_pending(cfgs: Sequence[RunConfig], workers: int | None = None, progress: bool = True,
                  executor: Any = None) -> int:
    """Train the configs not yet finished with ``executor`` (:mod:`fedrepro.execute`; default: local
    worker processes, ``workers`` of them, default :func:`fedrepro.execute.local.default_workers`),
    and return how many were pending (the local executor checks ``workers``)."""
    ex = make_executor(executor) if workers is None else make_executor(executor or "local", workers=workers)
    return ex.train(cfgs, progress=progress) if cfgs else 0
