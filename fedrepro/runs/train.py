"""One run through the store: loaded when it is finished, otherwise trained (or resumed from its last
checkpoint) under the run's lock and finished in its folder; and a finished run rebuilt for analysis.
"""
from __future__ import annotations

import functools
import contextlib
import logging
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

import torch

from ..config import RunConfig
from ..data import ImageDataset
from ..data.partition import Partition
from ..env import allocator, trace
from ..errors import ConfigError, CorruptCacheError, ResourceError, StaleRunError, TrainingDivergedError
from ..fl.client_data import ClientData
from ..fl.device import resolve_device, torch_threads
from ..fl.converge import simulate_until_flat
from ..fl.engine import SimState, simulate, summarize_run, unscored_summary
from ..fl.seeding import derive_seed, seeded_scope
from . import archive, fingerprint, prefix, represent, tensorboard
from .catalog import display_path
from .fingerprint import STALE, UNKNOWN, staleness
from .inputs import check_run_inputs
from .pipeline import clients_of, global_test_of, make_method, prepare_data
from .store import CheckpointWriter, RunResult, RunStore, check_on_busy

log = logging.getLogger("fedrepro")


def _map_tensors(obj: Any, fn) -> Any:
    """Apply ``fn`` to every tensor in nested dicts/lists (states and checkpoints)."""
    if isinstance(obj, torch.Tensor):
        return fn(obj)
    if isinstance(obj, dict):
        return {k: _map_tensors(v, fn) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_map_tensors(v, fn) for v in obj]
    return obj


def to_cpu(obj: Any) -> Any:
    return _map_tensors(obj, lambda t: t.detach().cpu())


def to_device(obj: Any, device: torch.device) -> Any:
    return _map_tensors(obj, lambda t: t.to(device))


def to_device_state(state: SimState, device: torch.device) -> SimState:
    return SimState(**to_device(dict(state.__dict__), device))


# What run() does with a stored run that today's code would not reproduce (fedrepro.runs.fingerprint):
# train it anew (the old folder moves to <runs>/.stale/), reuse it anyway, or stop with an error.
ON_STALE = ("retrain", "keep", "error")
ENV_STALE = "FEDREPRO_STALE"


def on_stale_policy(on_stale: str | None = None) -> str:
    value = on_stale if on_stale is not None else (os.environ.get(ENV_STALE) or "retrain")
    if value not in ON_STALE:
        src = "on_stale" if on_stale is not None else ENV_STALE
        raise ConfigError(f"{src}={value!r}; valid: {', '.join(ON_STALE)}")
    return value


def is_stale(store: RunStore, cfg: RunConfig, policy: str) -> bool:
    """Whether the stored run of ``cfg`` must be trained anew under ``policy`` (``error`` raises); a run
    restored from the reference archive must be when it does not stand for a trained run
    (:func:`fedrepro.runs.archive.stands_for_trained`: the archive off), or is stale in a resumed pass."""
    if archive.is_archived(store.path(cfg)):
        if not archive.stands_for_trained(store.path(cfg)):
            return True
        st = staleness(cfg, store.meta(cfg))
        if st.state == STALE and archive.policy() == "resume":
            return True  # a pass continued on today's code retrains what today's code changed
        # issue 56: an archived run that today's code would train differently is still read from the
        # archive (there is nothing else to read without training), and said to be stale.
        if st.state == STALE:
            log.warning("fedrepro: run %s is from the reference archive and stale (%s); shown as archived until "
                        "it is trained again (FEDREPRO_ARCHIVE=off)", store.path(cfg), st.why)
        return False
    st = staleness(cfg, store.meta(cfg))
    if st.state == UNKNOWN:
        log.warning("fedrepro: run %s: %s", store.path(cfg), st.why)
    if st.state != STALE or policy == "keep":
        return False
    if policy == "error":
        raise StaleRunError(f"run {store.path(cfg)} was trained by other code than today's ({st.why}; changed: "
                            f"{', '.join(st.changed)}). {ENV_STALE}=retrain (the default) trains it anew; "
                            f"{ENV_STALE}=keep reuses it as it is")
    return True


def retire_for_training(store: RunStore, cfg: RunConfig) -> Path:
    """Move aside a stored run :func:`is_stale` sends back to training and log why: a run restored from
    the reference archive was not trained by other code, it has no model weights and does not count
    as trained under the archive policy in force. Returns where the old folder went."""
    if archive.is_archived(store.path(cfg)):
        why = (f"came from the reference archive (FEDREPRO_ARCHIVE={archive.policy()}: not counted as "
               "trained here, and it keeps no model weights)")
    else:
        why = "was trained by other code"
    moved = store.retire(cfg, datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S"))
    log.warning("fedrepro: run %s %s; moved to %s, training it anew", store.path(cfg), why, moved)
    return moved


def train_or_load(cfg: RunConfig, trainer: Callable[..., RunResult], *, force_progress: bool | None = None,
                  on_round_end=None, on_busy: str = "wait", on_stale: str | None = None,
                  store: RunStore | None = None) -> RunResult:
    """The stored run of ``cfg``, or, when it is not finished (or stale), the run ``trainer`` trains
    (or resumes) under the run's lock (:func:`fedrepro.execute.run.run` documents the options)."""
    check_on_busy(on_busy)
    policy = on_stale_policy(on_stale)
    # A device this machine lacks is bad input whether or not the run is stored: a stored run read
    # back on it would be restored onto it later.
    device = resolve_device(cfg.device)
    store = RunStore(cfg.runs_dir) if store is None else store
    archive.restore_missing([cfg])  # a run the reference archive holds is read from it (FEDREPRO_ARCHIVE)
    # The common case, read without the lock: finished runs never change.
    if store.status(cfg) == "done" and not is_stale(store, cfg, policy):
        res = store.load(cfg)  # checked before it is said to be reused
        trace.record("run", hash=cfg.hash(), trained=False)
        log.info("fedrepro: reused %s (its config's stored run; nothing trained)", display_path(store.path(cfg)))
        return res
    copied = _copy_representative(cfg, store, policy, on_busy)
    if copied is not None:
        return copied
    trace.record("run", hash=cfg.hash(), trained=True)
    with memory_errors(cfg):
        res = _build_and_train(cfg, store, trainer, policy, on_busy, device, force_progress, on_round_end)
    represent.record(store, cfg, lambda c: is_stale(store, c, policy))  # a rehearsal run: its path key's representative
    return res


def _copy_representative(cfg: RunConfig, store: RunStore, policy: str, on_busy: str) -> RunResult | None:
    """A rehearsal run stored as a copy of its path key's representative (:mod:`fedrepro.runs.represent`),
    or None when it has none, or when ``cfg``'s own data differs from the representative's in what a
    run's state is indexed by (then it trains). Never for a real run."""
    rep = represent.representative(store, cfg, lambda c: is_stale(store, c, policy))
    if rep is None:
        return None
    check_run_inputs(cfg)
    ds, part = prepare_data(cfg)
    own = {"seed": cfg.seed, "partition_hash": part.hash(), "num_clients": part.num_clients,
           "held_out": list(part.held_out), "num_classes": ds.num_classes, "dataset": ds.name}
    differs = [k for k in represent.INDEXED_BY if rep.meta.get(k) != own[k]]
    if differs:
        log.info("fedrepro: rehearsal run %s trains: its %s differ from its representative %s's", cfg.hash(),
                 ", ".join(differs), rep.path.name)
        return None
    trace.record("run", hash=cfg.hash(), trained=False, represented_by=rep.path.name)
    with store.claim(cfg, on_busy) as status:
        if status == "done" and not is_stale(store, cfg, policy):  # another launcher stored it meanwhile
            return store.load(cfg)
        if status != "missing":  # a stale copy, or a run begun before it had a representative
            store.retire(cfg, datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S"))
        return represent.copy_run(store, cfg, rep, own)


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


def _build_and_train(cfg: RunConfig, store: RunStore, trainer, policy: str, on_busy: str, device: torch.device,
                     force_progress: bool | None, on_round_end) -> RunResult:
    """Build ``cfg``'s data, clients and method, then train it under its lock (or reuse what another
    launcher finished meanwhile)."""
    # Everything that can fail on bad input happens before the first write to the runs folder; the
    # files the run reads are checked before any is (issue 53: a planted huge or inflating file is a
    # one-line error naming it, not an out-of-memory error or a killed process).
    check_run_inputs(cfg)
    board = tensorboard.round_logger(cfg)  # None unless TensorBoard logging is on (fedrepro.runs.tensorboard)
    with torch_threads(cfg.threads):  # whoever launches it: the config fixes the float sums' order
        ds, part = prepare_data(cfg)
        clients = clients_of(cfg, ds, part, device)
        method = make_method(cfg, ds, device)
        with store.claim(cfg, on_busy) as status:
            if status != "missing" and is_stale(store, cfg, policy):  # a stale checkpoint is not resumed either
                retire_for_training(store, cfg)
                status = "missing"
            if status == "done":  # another launcher finished it while this one waited
                return store.load(cfg)
            try:
                return trainer(cfg, store, status, ds, part, clients, method, device, force_progress,
                               tensorboard.chain(board, on_round_end))
            finally:
                if board is not None:
                    board.close()


def train_inprocess(cfg: RunConfig, store: RunStore, status: str, ds: ImageDataset, part: Partition,
           clients: list[ClientData], method, device: torch.device, force_progress: bool | None,
           on_round_end) -> RunResult:
    """Train (or resume) a run whose lock this process holds, and finish it in the store."""
    # FEDREPRO_SHARE_PREFIX: a new run starts from a stored run of its config with fewer rounds
    # (fedrepro.runs.prefix: bit for bit the rounds it would have trained).
    # The donor is checked and its state read before the run's folder is published, so that a damaged
    # one leaves a run from round 0 whose meta.json does not name it (prefix.donor passes it over).
    policy = on_stale_policy()
    found = prefix.donor(cfg, store, method, part.hash(), lambda c: is_stale(store, c, policy)) \
        if status == "missing" and prefix.sharing() else None
    prior, start = found if found is not None else (None, None)
    started = {"started_from": {"run": prior.summary["config_hash"], "round": int(prior.summary["rounds"])}} \
        if prior is not None else {}
    path = begin_run(cfg, store, status, ds, part, device, **started)
    # A run another engine began (Flower's records itself in meta.json) is finished by this one: say so.
    meta_update = {"engine": {"name": "inprocess"}} if status == "partial" and "engine" in store.meta(cfg) else None
    state = None
    ckpt = store.load_checkpoint(path) if status == "partial" else None
    if ckpt is not None:
        if ckpt.get("partition_hash") != part.hash():
            raise CorruptCacheError(f"checkpoint in {path} was made on partition {ckpt.get('partition_hash')}, "
                                    f"not {part.hash()}; delete the folder to restart")
        check_resumed_shared(path / "checkpoint.pt", ckpt["state"]["shared"], method, cfg.seed)
        state = SimState(**to_device(ckpt["state"], device))
    elif start is not None:
        state = to_device_state(start, device)

    t = cfg.train
    progress = cfg.progress if force_progress is None else force_progress
    diverged = None
    try:
        # train.stop_when_flat: the same engine, driven one evaluated round at a time until the
        # curve is flat (fedrepro.fl.converge); off, the engine runs every round in one call. A
        # method whose schedule reads train.rounds (a late phase, a schedule over all rounds) trains
        # them all: stopping it early would cut its schedule, not a flat tail.
        flat = flat_rule_applies(cfg, method)
        engine = functools.partial(simulate_until_flat, window=t.flat_window, first=t.flat_from) if flat else simulate
        with CheckpointWriter(path) as writer:  # written while the next round trains
            state = engine(method, clients, seed=cfg.seed, rounds=t.rounds, participation=t.participation,
                           eval_every=t.eval_every, state=state,
                           checkpoint=lambda s: writer.save({"partition_hash": part.hash(),
                                                             "state": to_cpu(s.__dict__)}),
                           checkpoint_every=t.checkpoint_every, progress=progress,
                           desc=f"{cfg.method.name} s{cfg.seed}", on_round_end=on_round_end,
                           global_test=global_test_of(cfg, ds, device) if t.global_eval else None)
    except TrainingDivergedError as err:
        # A method that diverges at this config is a result, not a crash: the run is stored (and
        # reused) with the rounds before, its final metrics NaN and the round it diverged at.
        state = getattr(err, "state", None)
        if state is None:
            raise
        diverged = {"diverged_round": err.round, "diverged": str(err)}  # the engine sets the round
    return finish_run(cfg, store, path, part, state, diverged, meta_update, flat)


def _tensors(obj: Any, where: str) -> dict[str, Any]:
    """``{where[key]...: leaf}`` of the leaves in nested dicts (a tensor, or whatever else is there)."""
    if isinstance(obj, dict):
        return {p: v for k, sub in obj.items() for p, v in _tensors(sub, f"{where}[{k!r}]").items()}
    return {where: obj}


def _kind(t: torch.Tensor) -> str:
    return f"shape {list(t.shape)} ({str(t.dtype).removeprefix('torch.')})"


def shared_mismatch(stored: dict, fresh: dict) -> str | None:
    """What keeps the ``stored`` shared state from being ``fresh``'s (the method's own, as it starts
    a run) at a later round: a tensor of ``fresh`` that ``stored`` lacks, or holds with another shape
    or dtype; None when nothing. Entries that ``stored`` adds (a pool a method fills round by round:
    FedFomo's models, FedAMP's clouds) and values that are not tensors are not compared."""
    got = _tensors(stored, "shared")
    for key, want in _tensors(fresh, "shared").items():
        if not isinstance(want, torch.Tensor):
            continue
        have = got.get(key)
        if not isinstance(have, torch.Tensor):
            return f"has no tensor {key} (this run's method starts it at {_kind(want)})"
        if have.shape != want.shape or have.dtype != want.dtype:
            return f"holds {key} of {_kind(have)}, not the {_kind(want)} this run's method has"
    return None


def check_resumed_shared(file: Path, shared: dict, method, seed: int) -> None:
    """A one-line :class:`CorruptCacheError` naming the checkpoint ``file`` when its ``shared`` state
    does not fit ``method`` (:func:`shared_mismatch`): written by another model or another version of
    the method, it would otherwise stop the resume with a ``size mismatch`` traceback deep in training.

    The method's starting state is built as :func:`fedrepro.fl.engine.init_state` builds it (the same
    seed, in the same seeded scope, which restores torch's RNG after), only to be compared and
    dropped: the resumed run's numbers are those it has without the check. Its cost is one
    ``init_server`` (the model built once), which a run started from round 0 pays too."""
    init_seed = derive_seed(seed, "init")
    with seeded_scope(init_seed):
        fresh, _ = method.init_server(init_seed)
    problem = shared_mismatch(shared, fresh)
    del fresh
    if problem is not None:
        raise CorruptCacheError(f"checkpoint {file} {problem}; delete it to restart this run from round 0")


def flat_rule_can_stop(method) -> bool:
    """Whether ``train.stop_when_flat`` may stop a run of ``method`` (an instance or its class): only
    when its rounds do not depend on their number (:func:`fedrepro.runs.prefix.reads_total_rounds`)."""
    return not prefix.reads_total_rounds(method)


def flat_rule_applies(cfg: RunConfig, method) -> bool:
    """Whether ``train.stop_when_flat`` may stop ``cfg``'s run: the option is on and
    :func:`flat_rule_can_stop`."""
    return bool(cfg.train.stop_when_flat) and flat_rule_can_stop(method)


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
               diverged: dict | None = None, meta_update: dict | None = None,
               flat_rule: bool | None = None) -> RunResult:
    """Store a trained (or diverged) run's rounds, clients, summary and final state (``meta_update``:
    entries to add to ``meta.json``, e.g. what a Flower engine learnt of its nodes; ``flat_rule``:
    whether ``train.stop_when_flat`` could stop the run, :func:`flat_rule_applies`)."""
    # A run that diverged before its first evaluated round is stored too, unscored (every accuracy
    # NaN): a learning-rate search reads it as the rate that failed.
    scored = any("acc_mean" in r for r in state.round_rows)
    summary = summarize_run(state.round_rows) if scored else unscored_summary(state.round_rows)
    summary.update(method=cfg.method.name, seed=cfg.seed, config_hash=cfg.hash(), partition_hash=part.hash())
    if diverged:
        summary.update({k: float("nan") for k in summary if k.startswith("final_")}, **diverged)
    if cfg.train.stop_when_flat:  # recorded only with the option, so that other summaries stay as they were
        summary.update(max_rounds=cfg.train.rounds, stopped_early=state.next_round < cfg.train.rounds,
                       flat_rule_applied=bool(flat_rule))
    final = to_cpu({"shared": state.shared, "server_state": state.server_state,
                     "client_states": state.client_states})
    return store.finish(path, state.round_rows, state.client_rows, summary, final_state=final,
                        meta_update=meta_update)


def restore(result: RunResult | str | Path, device: str | torch.device = "auto"):
    """Rebuild a finished run (a :class:`RunResult` or its folder) for analysis:
    ``(method, clients, final_state)`` on ``device``.

    The data and partition are re-derived from the stored config (and checked against the stored
    partition hash); the method gets the trained shared and per-client state.
    """
    result = result if isinstance(result, RunResult) else RunResult(result)
    cfg = result.config
    dev = resolve_device(device if isinstance(device, str) else str(device))
    check_run_inputs(cfg)  # as before training: a planted file is named, not read (issue 53)
    ds, part = prepare_data(cfg)
    if part.hash() != result.meta["partition_hash"]:
        raise CorruptCacheError(f"{result.path}: the partition re-derived from its config hashes to {part.hash()}, "
                                f"not the stored {result.meta['partition_hash']} (data files changed?)")
    clients = clients_of(cfg, ds, part, dev)
    method = make_method(cfg, ds, dev)
    return method, clients, to_device(result.final_state(), dev)
