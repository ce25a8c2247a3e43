"""``fedrepro.run(cfg)``: data, partition, method and simulator wired together, through the store.

A finished config is loaded, not re-run; a started one resumes from its last checkpoint.
"""
from __future__ import annotations

import contextlib
import functools
import itertools
import logging
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

import pandas as pd
import torch
from tqdm.auto import tqdm

from .config import RunConfig, make_config
from .data import ImageDataset
from .data.partition import Partition
from .errors import ConfigError, ResourceError, TrainingDivergedError
from .fl.client_data import ClientData
from .fl.device import resolve_device, torch_threads
from .fl.engine import SimState, simulate, summarize_run, unscored_summary
from . import allocator, fingerprint, tensorboard, trace
from .host import cpu_cores, cpu_model  # noqa: F401  (part of this module's API)
from .catalog import display_path
from .executors import make_executor
from .store import CheckpointWriter, RunResult, RunStore, check_on_busy

log = logging.getLogger("fedrepro")


# Re-exported: notebooks and analyses build data and methods through this module.
from .pipeline import (_load_cached, build_clients, global_test_split, make_method, make_method_for,  # noqa: E402,F401
                       prepare_data)


def _map_tensors(obj: Any, fn) -> Any:
    """Apply ``fn`` to every tensor in nested dicts/lists (states and checkpoints)."""
    if isinstance(obj, torch.Tensor):
        return fn(obj)
    if isinstance(obj, dict):
        return {k: _map_tensors(v, fn) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_map_tensors(v, fn) for v in obj]
    return obj


def _to_cpu(obj: Any) -> Any:
    return _map_tensors(obj, lambda t: t.detach().cpu())


def _to_device(obj: Any, device: torch.device) -> Any:
    return _map_tensors(obj, lambda t: t.to(device))


# What run() does with a stored run that today's code would not reproduce (fedrepro.fingerprint):
# train it anew (the old folder moves to <runs>/.stale/), reuse it anyway, or stop with an error.
ON_STALE = ("retrain", "keep", "error")
ENV_STALE = "FEDREPRO_STALE"


def on_stale_policy(on_stale: str | None = None) -> str:
    value = on_stale if on_stale is not None else (os.environ.get(ENV_STALE) or "retrain")
    if value not in ON_STALE:
        src = "on_stale" if on_stale is not None else ENV_STALE
        raise ConfigError(f"{src}={value!r}; valid: {', '.join(ON_STALE)}")
    return value


def _is_stale(store: RunStore, cfg: RunConfig, policy: str) -> bool:
    """Whether the stored run of ``cfg`` must be trained anew under ``policy`` (``error`` raises)."""
    from .fingerprint import STALE, UNKNOWN, staleness

    st = staleness(cfg, store.meta(cfg))
    if st.state == UNKNOWN:
        log.warning("fedrepro: run %s: %s", store.path(cfg), st.why)
    if st.state != STALE or policy == "keep":
        return False
    if policy == "error":
        from .errors import StaleRunError

        raise StaleRunError(f"run {store.path(cfg)} was trained by other code than today's ({st.why}; changed: "
                            f"{', '.join(st.changed)}). {ENV_STALE}=retrain (the default) trains it anew; "
                            f"{ENV_STALE}=keep reuses it as it is")
    return True


def run(cfg: RunConfig | Mapping[str, Any] | None = None, *, force_progress: bool | None = None,
        on_round_end=None, on_busy: str = "wait", on_stale: str | None = None, store: RunStore | None = None,
        engine: str = "inprocess", engine_options: Mapping[str, Any] | None = None,
        **overrides: Any) -> RunResult:
    """Run one config (or load it when already finished) and return its :class:`RunResult`.

    ``cfg`` may be a :class:`RunConfig`, a dict of overrides, or None; keyword overrides use ``__``
    for nesting: ``run(profile="smoke", method__name="fedper", train__rounds=3)``.

    ``on_busy`` is what happens when another process is writing the same run (same config and
    runs folder): ``"wait"`` for it, then reuse its result (or resume the run if it stopped
    unfinished); ``"reuse"``: wait for its result but never train here (RunBusyError if it stopped
    unfinished); ``"error"``: raise :class:`~fedrepro.errors.RunBusyError` at once.

    ``on_stale`` (default ``$FEDREPRO_STALE``, else ``"retrain"``) is what happens to a stored run
    whose code fingerprint differs from today's code (:mod:`fedrepro.fingerprint`): ``"retrain"``
    moves it to ``<runs>/.stale/`` and trains the config anew, ``"keep"`` reuses it, ``"error"``
    raises :class:`~fedrepro.errors.StaleRunError`.

    ``store``: the store to train into instead of ``RunStore(cfg.runs_dir)`` (a Ray worker trains
    into a private one and sends the files to the driver's; the config records ``runs_dir`` as given).
    ``engine`` (:data:`ENGINES`) trains a run that is not stored yet: ``"inprocess"`` (this process's
    simulator) or ``"flower"`` (Flower's simulation engine, :mod:`fedrepro.flower.simulation`). Both
    give the same numbers, so the engine is not part of the config hash; ``meta.json`` records it.
    ``engine_options`` go to the engine (Flower's: ``nodes``, ``cpus``, ``timeout``).
    """
    check_on_busy(on_busy)
    trainer = engine_trainer(engine, engine_options)
    policy = on_stale_policy(on_stale)
    if not isinstance(cfg, RunConfig):
        profile = overrides.pop("profile", None)
        cfg = make_config(profile, overrides=dict(cfg or {}), **overrides)
    elif overrides:
        cfg = cfg.replace(**{k.replace("__", "."): v for k, v in overrides.items()})
    store = RunStore(cfg.runs_dir) if store is None else store
    # The common case, read without the lock: finished runs never change.
    if store.status(cfg) == "done" and not _is_stale(store, cfg, policy):
        res = store.load(cfg)  # checked before it is said to be reused
        trace.record("run", hash=cfg.hash(), trained=False)
        log.info("fedrepro: reused %s (its config's stored run; nothing trained)", display_path(store.path(cfg)))
        return res
    trace.record("run", hash=cfg.hash(), trained=True)
    with memory_errors(cfg):
        return _build_and_train(cfg, store, trainer, policy, on_busy, force_progress, on_round_end)


def is_out_of_memory(e: BaseException) -> bool:
    """Whether ``e`` says an allocation failed (torch raises RuntimeError subclasses for it on CPU and GPU)."""
    if isinstance(e, MemoryError):
        return True
    text = str(e).lower()
    return isinstance(e, RuntimeError) and any(s in text for s in (
        "can't allocate memory", "out of memory", "not enough memory", "failed to allocate", "cannot allocate"))


@contextlib.contextmanager
def memory_errors(cfg: RunConfig):
    """Turn an allocation failure while ``cfg`` is built or trained into a one-line ResourceError
    that says what to change (the store stays as it was: an unfinished run resumes later)."""
    try:
        yield
    except Exception as e:
        if not is_out_of_memory(e):
            raise
        cause = (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
        raise ResourceError(
            f"out of memory for model {cfg.model.name} with model.args={cfg.model.args}, train.batch_size="
            f"{cfg.train.batch_size} on device {cfg.device} ({type(e).__name__}: {cause}); lower model.args "
            "(e.g. width), train.batch_size or the data sizes, or use a machine or device with more memory") from e


def _build_and_train(cfg: RunConfig, store: RunStore, trainer, policy: str, on_busy: str,
                     force_progress: bool | None, on_round_end) -> RunResult:
    """Build ``cfg``'s data, clients and method, then train it under its lock (or reuse what another
    launcher finished meanwhile)."""
    # Everything that can fail on bad input happens before the first write to the runs folder.
    device = resolve_device(cfg.device)
    board = tensorboard.round_logger(cfg)  # None unless TensorBoard logging is on (fedrepro.tensorboard)
    with torch_threads(cfg.threads):  # whoever launches it: the config fixes the float sums' order
        ds, part = prepare_data(cfg)
        clients = build_clients(ds, part, device, cfg.train.augment)
        method = make_method(cfg, ds, device)
        with store.claim(cfg, on_busy) as status:
            if status != "missing" and _is_stale(store, cfg, policy):  # a stale checkpoint is not resumed either
                log.warning("fedrepro: run %s was trained by other code; moved to %s, training it anew",
                            store.path(cfg), store.retire(cfg, datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S")))
                status = "missing"
            if status == "done":  # another launcher finished it while this one waited
                return store.load(cfg)
            try:
                return trainer(cfg, store, status, ds, part, clients, method, device, force_progress,
                               tensorboard.chain(board, on_round_end))
            finally:
                if board is not None:
                    board.close()


def _train(cfg: RunConfig, store: RunStore, status: str, ds: ImageDataset, part: Partition,
           clients: list[ClientData], method, device: torch.device, force_progress: bool | None,
           on_round_end) -> RunResult:
    """Train (or resume) a run whose lock this process holds, and finish it in the store."""
    path = begin_run(cfg, store, status, ds, part, device)
    # A run another engine began (Flower's records itself in meta.json) is finished by this one: say so.
    meta_update = {"engine": {"name": "inprocess"}} if status == "partial" and "engine" in store.meta(cfg) else None
    state = None
    ckpt = store.load_checkpoint(path) if status == "partial" else None
    if ckpt is not None:
        if ckpt.get("partition_hash") != part.hash():
            from .errors import CorruptCacheError

            raise CorruptCacheError(f"checkpoint in {path} was made on partition {ckpt.get('partition_hash')}, "
                                    f"not {part.hash()}; delete the folder to restart")
        state = SimState(**_to_device(ckpt["state"], device))

    t = cfg.train
    progress = cfg.progress if force_progress is None else force_progress
    diverged = None
    try:
        with CheckpointWriter(path) as writer:  # written while the next round trains
            state = simulate(method, clients, seed=cfg.seed, rounds=t.rounds, participation=t.participation,
                             eval_every=t.eval_every, state=state,
                             checkpoint=lambda s: writer.save({"partition_hash": part.hash(),
                                                               "state": _to_cpu(s.__dict__)}),
                             checkpoint_every=t.checkpoint_every, progress=progress,
                             desc=f"{cfg.method.name} s{cfg.seed}", on_round_end=on_round_end,
                             global_test=global_test_split(ds, device) if t.global_eval else None)
    except TrainingDivergedError as err:
        # A method that diverges at this config is a result, not a crash: the run is stored (and
        # reused) with the rounds before, its final metrics NaN and the round it diverged at.
        state = getattr(err, "state", None)
        if state is None:
            raise
        diverged = {"diverged_round": err.round, "diverged": str(err)}  # the engine sets the round
    return finish_run(cfg, store, path, part, state, diverged, meta_update)


def begin_run(cfg: RunConfig, store: RunStore, status: str, ds: ImageDataset, part: Partition,
              device: torch.device, **meta: Any) -> Path:
    """The run's folder: the started one (``status == "partial"``), or a new one whose ``meta.json``
    records how it is trained (``meta``: what an engine adds, e.g. Flower's)."""
    if status == "partial":
        return store.path(cfg)
    return store.begin(cfg, {"seed": cfg.seed, "partition_hash": part.hash(), "device": str(device),
                             "num_clients": part.num_clients, "held_out": list(part.held_out),
                             "num_classes": ds.num_classes, "dataset": ds.name,
                             "torch_threads": torch.get_num_threads(), "allocator": allocator.in_use(),
                             **fingerprint.record(cfg), **meta})


def finish_run(cfg: RunConfig, store: RunStore, path: Path, part: Partition, state: SimState,
               diverged: dict | None = None, meta_update: dict | None = None) -> RunResult:
    """Store a trained (or diverged) run's rounds, clients, summary and final state (``meta_update``:
    entries to add to ``meta.json``, e.g. what a Flower engine learnt of its nodes)."""
    # A run that diverged before its first evaluated round is stored too, unscored (every accuracy
    # NaN): a learning-rate search reads it as the rate that failed.
    scored = any("acc_mean" in r for r in state.round_rows)
    summary = summarize_run(state.round_rows) if scored else unscored_summary(state.round_rows)
    summary.update(method=cfg.method.name, seed=cfg.seed, config_hash=cfg.hash(), partition_hash=part.hash())
    if diverged:
        summary.update({k: float("nan") for k in summary if k.startswith("final_")}, **diverged)
    final = _to_cpu({"shared": state.shared, "server_state": state.server_state,
                     "client_states": state.client_states})
    return store.finish(path, state.round_rows, state.client_rows, summary, final_state=final,
                        meta_update=meta_update)


def _flower_trainer(*args: Any, **options: Any) -> RunResult:
    from .flower.simulation import train

    return train(*args, **options)


# Who trains a run that is not stored yet (``run(engine=...)``, ``fedrepro run --engine``).
ENGINES: dict[str, Callable[..., RunResult]] = {"inprocess": _train, "flower": _flower_trainer}


def engine_trainer(engine: str, options: Mapping[str, Any] | None = None) -> Callable[..., RunResult]:
    """The trainer of ``engine`` with its ``options`` bound (the in-process engine takes none)."""
    try:
        trainer = ENGINES[engine]
    except (KeyError, TypeError):
        raise ConfigError(f"engine={engine!r}; valid: {', '.join(ENGINES)}") from None
    if engine == "flower":  # before anything is written: a missing package is bad input, not a half-made run
        from .flower import require_flwr

        require_flwr(simulation="grid" not in (options or {}))
    if not options:
        return trainer
    if engine == "inprocess":
        raise ConfigError(f"engine_options={dict(options)!r}: the in-process engine takes none")
    return functools.partial(trainer, **options)


def restore(result: RunResult | str | Path, device: str | torch.device = "auto"):
    """Rebuild a finished run (a :class:`RunResult` or its folder) for analysis:
    ``(method, clients, final_state)`` on ``device``.

    The data and partition are re-derived from the stored config (and checked against the stored
    partition hash); the method gets the trained shared and per-client state.
    """
    from .errors import CorruptCacheError

    result = result if isinstance(result, RunResult) else RunResult(result)
    cfg = result.config
    dev = resolve_device(device if isinstance(device, str) else str(device))
    ds, part = prepare_data(cfg)
    if part.hash() != result.meta["partition_hash"]:
        raise CorruptCacheError(f"{result.path}: the partition re-derived from its config hashes to {part.hash()}, "
                                f"not the stored {result.meta['partition_hash']} (data files changed?)")
    clients = build_clients(ds, part, dev, cfg.train.augment)
    method = make_method(cfg, ds, dev)
    return method, clients, _to_device(result.final_state(), dev)


def run_seeds(cfg: RunConfig, seeds: Iterable[int], **kw: Any) -> list[RunResult]:
    return [run(cfg.replace(seed=int(s)), **kw) for s in seeds]


def default_workers(base: RunConfig) -> int:
    """How many runs :func:`run_grid` trains at once: ``FEDREPRO_WORKERS`` if set, else the cores
    divided by the run's ``threads`` on a CPU device (small models leave cores idle: two 1-thread
    runs train about 1.6x the images per second of one 2-thread run on a 2-core machine) and 1 on a
    GPU or at the smoke profile. Worker processes are spawned, so a script calling this needs the usual
    ``if __name__ == "__main__":`` guard (notebooks do not)."""
    env = os.environ.get("FEDREPRO_WORKERS")
    if env:
        try:
            n = int(env)
        except ValueError:
            n = 0
        if n < 1:
            raise ConfigError(f"FEDREPRO_WORKERS={env!r}; valid: a positive integer")
        return n
    if base.profile == "smoke" or resolve_device(base.device).type != "cpu":
        return 1  # smoke runs take about a second: starting processes would cost more than it saves
    return max(1, cpu_cores() // base.threads)


def grid_points(grid: Mapping[str, Sequence[Any]] | Sequence[Mapping[str, Sequence[Any]]] | None,
                seeds: Iterable[int] = (0,)) -> list[tuple[dict[str, Any], int]]:
    """``(point, seed)`` pairs of a grid: the Cartesian product of each mapping's values × seeds.

    ``grid`` may be one mapping (dotted config keys -> values) or a list of them, whose points are
    concatenated (like scikit-learn's ``ParameterGrid``); a mapping may carry its own ``"seed"``
    list, e.g. 3 seeds for the methods a claim rests on and 1 for the rest of a table.
    """
    subgrids = [dict(grid or {})] if grid is None or isinstance(grid, Mapping) else [dict(g) for g in grid]
    points = []
    for g in subgrids:
        sub_seeds = [int(s) for s in g.pop("seed", seeds)]
        keys = list(g)
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
    :mod:`fedrepro.tuning`); the table then has an ``lr`` column with each run's rate.

    Runs not yet finished are trained ``workers`` at a time in separate processes (default:
    :func:`default_workers`); each run is seeded on its own, so the order does not matter. A
    worker that fails re-raises its error here; finished runs stay in the store.

    ``executor``: where they train (:mod:`fedrepro.executors`): ``"local"`` (the default, the
    processes above) or ``"ray"`` / a :class:`~fedrepro.executors.RayExecutor` with its cluster
    address and per-run CPUs and GPUs. Either way each run is stored the same (folder, files, numbers).
    """
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
    return pd.DataFrame(rows)


def train_pending(cfgs: Sequence[RunConfig], workers: int | None = None, progress: bool = True,
                  executor: Any = None) -> int:
    """Train the configs not yet finished, ``workers`` at a time in separate processes (default:
    :func:`default_workers`), and return how many were pending. With one worker (or one pending run)
    nothing is trained here: :func:`run` then trains each in this process when it is asked for.
    ``executor``: see :func:`run_grid`; a remote one trains every pending run there."""
    ex = make_executor(executor)
    if not cfgs:
        return 0
    if ex.remote:
        from .executors.ray_cluster import run_remote

        pending = [c for c in {c.hash(): c for c in cfgs}.values() if RunStore(c.runs_dir).status(c) != "done"]
        if pending:
            run_remote(ex, pending, progress=progress, desc="grid")
        return len(pending)
    if workers is None:
        workers = getattr(ex, "workers", None)
    workers = default_workers(cfgs[0]) if workers is None else int(workers)
    if workers < 1:
        raise ConfigError(f"workers={workers}; valid: a positive integer")
    unique = {c.hash(): c for c in cfgs}.values()
    pending = [c for c in unique if RunStore(c.runs_dir).status(c) != "done"]
    if workers > 1 and len(pending) > 1:
        from .pool import run_pool

        report = run_pool(pending, workers=min(workers, len(pending)), progress=progress)
        if report.errors:  # the others finished and are stored; the first failure is the caller's
            raise next(iter(report.errors.values()))
    return len(pending)


def pivot_mean_std(table: pd.DataFrame, index: str, columns: str | None = None, metric: str = "best",
                   scale: float = 100.0, label=None) -> pd.DataFrame:
    """A paper-style table of ``"mean ± std"`` strings (accuracy in %): rows ``index`` (e.g. methods),
    columns ``columns`` (e.g. α), each cell over seeds; a cell from one seed shows no ± and a
    ``¹`` mark, so it is never mistaken for a 3-seed mean. ``label`` maps column values to text
    (e.g. ``lambda a: f"α={a}"``, the paper tables' column names)."""
    keys = [index] if columns is None else [index, columns]
    ms = mean_std(table, keys, [metric])
    # A run that diverged has no final value: its cell says so instead of showing a number (or the
    # mean of the seeds that did not diverge, with how many did).
    flags = pd.DataFrame({"lost": table[metric].isna(),
                          "gone": table["diverged_round"].notna() if "diverged_round" in table else False})
    counts = flags.groupby([table[k] for k in keys], sort=False).sum()

    def cell(m, sd, n, lost, gone):
        if lost == n:
            return "diverged" if gone else "n/a"
        text = f"{scale * m:.2f} ± {scale * sd:.2f}" if n - lost > 1 else f"{scale * m:.2f}¹"
        return text + (f" ({lost} of {n} {'diverged' if gone else 'n/a'})" if lost else "")

    text = [cell(m, sd, n, int(lost), int(gone)) for m, sd, n, lost, gone in
            zip(ms[f"{metric}_mean"], ms[f"{metric}_std"], ms["seeds"], counts["lost"], counts["gone"])]
    if columns is None:
        return pd.DataFrame({metric: text}, index=pd.Index(ms[index], name=index))
    cells = dict(zip(zip(ms[index], ms[columns]), text))
    rows = list(dict.fromkeys(table[index]))
    cols = list(dict.fromkeys(table[columns]))
    return pd.DataFrame([[cells.get((r, c), "") for c in cols] for r in rows],
                        index=pd.Index(rows, name=index), columns=[label(c) if label else c for c in cols])


def results_by(table: pd.DataFrame, by: str | Sequence[str]) -> dict[Any, list[RunResult]]:
    """Group the finished runs listed in a :func:`run_grid` table: ``{group value: [RunResult, ...]}``."""
    from pathlib import Path

    return {key: [RunResult(Path(p)) for p in group["path"]]
            for key, group in table.groupby(by if isinstance(by, str) else list(by), sort=False)}


def mean_std(table: pd.DataFrame, by: Sequence[str], cols: Sequence[str] = ("best", "final")) -> pd.DataFrame:
    """Mean ± std over seeds (sample std, ddof=1; 0 for a single seed), one row per group; NaN values
    (a diverged run's) are left out of both, and a group without any value has a NaN mean."""
    g = table.groupby(list(by), sort=False)
    out = g[list(cols)].agg(["mean", "std"])
    # One seed has no spread (std 0); a group with no value at all (its runs diverged) keeps a NaN mean.
    stds = [c for c in out.columns if c[1] == "std"]
    out[stds] = out[stds].fillna(0.0)
    out.columns = [f"{c}_{s}" for c, s in out.columns]
    out["seeds"] = g.size()
    return out.reset_index()


def format_mean_std(table: pd.DataFrame, by: Sequence[str], cols: Sequence[str] = ("best", "final"),
                    scale: float = 100.0) -> pd.DataFrame:
    """The same as :func:`mean_std` with ``"81.2 ± 0.4"`` strings (accuracy in %), for display."""
    ms = mean_std(table, by, cols)
    for c in cols:
        ms[c] = [f"{m * scale:.2f} ± {s * scale:.2f}" for m, s in zip(ms[f"{c}_mean"], ms[f"{c}_std"])]
    return ms[list(by) + list(cols) + ["seeds"]]
