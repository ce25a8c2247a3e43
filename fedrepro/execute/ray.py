"""The ``ray`` executor: each run a Ray task on a local or remote cluster.

The driver (this process) holds each run's lock in its store while the run is away, ships a
started run's checkpoint to the worker that takes it, stores every checkpoint the worker sends
back (through :class:`~fedrepro.runs.store.RunReceiver`, the store's atomic writes) and, at the end,
the finished run's files: the store never learns where a run trained. What happens on the worker
is in :mod:`fedrepro.execute.ray_worker`.
"""
from __future__ import annotations

import contextlib
import logging
import threading
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, ClassVar

from ..errors import ConfigError, RunBusyError
from .executors import EXECUTORS, Executor, RunOutcome, pending
from .local import estimate_cost
from .ray_worker import Relay, train_run
from ..runs import fingerprint
from ..env.host import cpu_cores
from ..env.localray import LOOPBACK, check_bind, init_local_ray, is_loopback
from ..params import check_fields, hp

log = logging.getLogger("fedrepro")

RAY_PIN = "ray==2.55.1"


def import_ray():
    """Ray, or a ConfigError that says how to install it."""
    try:
        import ray
    except ImportError as e:
        raise ConfigError(f"executor 'ray' needs the ray package, which is not installed here ({e}); install it "
                          f"with `pip install {RAY_PIN}` (requirements.txt pins it; `make setup` installs it)") from e
    return ray


@EXECUTORS.register("ray")
@dataclass(frozen=True)
class RayExecutor(Executor):
    """Runs as Ray tasks.

    ``address``: None starts a Ray instance on this machine for the session (or uses the one this
    process already started with ``ray.init``); ``"auto"`` joins the cluster this machine is a node
    of (``ray start``); ``"HOST:PORT"`` the cluster whose head is there.
    ``num_cpus``: CPUs Ray reserves per run (default: the run's ``threads``, the count it trains at
    either way). ``num_gpus``: GPUs per run (a fraction shares one; with 0 the workers see no GPU and
    a ``device="auto"`` run trains on CPU). ``max_retries``: how often Ray retries a run whose worker
    or node died. ``checkpoint_every_s``: how often a worker sends its newest checkpoint back.
    ``max_in_flight``: runs handed to Ray at once (each holds its lock and its shipped checkpoint
    meanwhile); default twice what the cluster's CPUs and GPUs fit.
    ``bind``: the address of the Ray instance started here (``address`` null). The default,
    ``127.0.0.1``, keeps every socket of it on loopback: Ray has no authentication, so anyone who
    reaches one of its ports can run code as this user. Another address of this machine makes it a
    head other nodes can join, and Ray then listens on all interfaces (docs/scale-out-ray.md, 7).
    """

    name: ClassVar[str] = "ray"
    remote: ClassVar[bool] = True
    address: str | None = hp(None, check=lambda a: isinstance(a, str) and bool(a.strip()),
                             valid="null (a Ray instance on this machine), 'auto' (the cluster this machine "
                                   "joined) or 'HOST:PORT' of a head node")
    num_cpus: float | None = hp(None, gt=0)
    num_gpus: float = hp(0.0, ge=0)
    max_retries: int = hp(3, ge=0)
    checkpoint_every_s: float = hp(10.0, gt=0)
    max_in_flight: int | None = hp(None, ge=1)
    bind: str = hp(LOOPBACK, check=lambda b: isinstance(b, str) and check_bind(b) is None,
                   valid="'127.0.0.1' (loopback only) or an IP address of this machine that other nodes reach")

    def __post_init__(self) -> None:
        check_fields(self)

    def resources(self, cfg) -> dict[str, float]:
        """What Ray reserves for ``cfg``'s run; a ConfigError when its device needs a GPU it would not get."""
        if cfg.device.startswith("cuda") and self.num_gpus <= 0:
            raise ConfigError(f"run {cfg.hash()} has device={cfg.device!r}, but executor 'ray' gives each run "
                              "num_gpus=0 (its workers then see no GPU); set num_gpus (--gpus-per-run) or "
                              "device='auto'")
        return {"num_cpus": float(cfg.threads if self.num_cpus is None else self.num_cpus),
                "num_gpus": float(self.num_gpus)}

    def train(self, cfgs, progress: bool = True) -> int:
        """Train the pending runs as tasks on the cluster; their files come back to this store."""
        todo = pending(cfgs)
        if todo:
            run_remote(self, todo, progress=progress, desc="grid")
        return len(todo)

    def session(self, progress: bool = True, desc: str = "runs") -> "RaySession":
        if self.address is not None and self.bind != LOOPBACK:
            raise ConfigError(f"bind={self.bind!r} with address={self.address!r}; valid: bind applies only to the "
                              "Ray instance started here (address null); a cluster's nodes bind where `ray start "
                              "--node-ip-address` says")
        import_ray()
        return RaySession(self, progress, desc)


@dataclass
class _Flight:
    """A run handed to Ray: its config, lock, task and the newest checkpoint stored here."""

    cfg: Any
    future: Future
    store: Any
    lock: contextlib.ExitStack
    ref: Any = None
    version: int = 0
    rounds: int = 0


@dataclass
class _Queued:
    cfg: Any
    future: Future


class RaySession:
    """A connection to the cluster for the runs of one grid (a context manager). :meth:`submit`
    hands it a config and returns a future of its :class:`~fedrepro.execute.RunOutcome`; one
    thread here drives every run in flight, and one progress bar counts the rounds of them all."""

    poll_s = 0.5

    def __init__(self, executor: RayExecutor, progress: bool, desc: str):
        self.ex = executor
        self.progress = progress
        self.desc = desc
        self._queue: list[_Queued] = []
        self._flights: dict[str, _Flight] = {}
        self._cv = threading.Condition()
        self._closing = False
        self._owns_ray = False
        self._done_rounds = 0
        self._total_rounds = 0
        self.outcomes: dict[str, RunOutcome] = {}
        self._fits: set[tuple[float, float]] = set()  # resource requests some node was seen to hold

    # -- connection ----------------------------------------------------------------------------
    def __enter__(self) -> "RaySession":
        ray = import_ray()
        from ..runs.train import on_stale_policy

        self.policy = on_stale_policy()
        if not ray.is_initialized():
            kw = {"log_to_driver": False, "logging_level": logging.WARNING}
            try:
                if self.ex.address is None:
                    init_local_ray(self.ex.bind, num_cpus=cpu_cores(), include_dashboard=False, **kw)
                    if not is_loopback(self.ex.bind):
                        log.warning("fedrepro: this Ray instance listens on every interface of this machine, with "
                                    "no authentication unless RAY_AUTH_MODE=token; other nodes join it with "
                                    "`ray start --address %s` (docs/scale-out-ray.md, section 7)",
                                    ray.get_runtime_context().gcs_address)
                else:
                    ray.init(address=self.ex.address, **kw)
            except ConnectionError as e:
                raise ConfigError(f"executor 'ray': cannot connect to address={self.ex.address!r} ({e}); start the "
                                  "cluster with `ray start --head` first, or leave address unset for a Ray "
                                  "instance on this machine") from e
            self._owns_ray = True
        self._ray = ray
        self._task = ray.remote(train_run)
        strategy = None
        with contextlib.suppress(Exception):  # the relay lives beside the driver, when Ray can say where that is
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

            strategy = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=True)
        self.relay = ray.remote(Relay).options(num_cpus=0, scheduling_strategy=strategy).remote()
        from tqdm.auto import tqdm

        self._bar = tqdm(total=0, desc=f"{self.desc} (ray)", unit="round", disable=not self.progress,
                         mininterval=1.0)
        self._thread = threading.Thread(target=self._drive, name="fedrepro-ray-driver", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        with self._cv:
            self._closing = True
            if exc_type is not None:  # the caller gives up: runs in flight stop (their checkpoints stay)
                for q in self._queue:
                    q.future.cancel()
                self._queue.clear()
                for fl in list(self._flights.values()):
                    with contextlib.suppress(Exception):
                        self._ray.cancel(fl.ref, force=True)
            self._cv.notify_all()
        self._thread.join()
        self._bar.close()
        with contextlib.suppress(Exception):
            self._ray.kill(self.relay)
        if self._owns_ray:
            self._ray.shutdown()

    def _check_fits(self, cfg) -> None:
        """A ConfigError when no node of the cluster has what a run asks for: Ray would queue it forever."""
        need = self.ex.resources(cfg)
        if (need["num_cpus"], need["num_gpus"]) in self._fits:
            return
        nodes = [n.get("Resources", {}) for n in self._ray.nodes() if n.get("Alive")]
        if any(r.get("CPU", 0) >= need["num_cpus"] and r.get("GPU", 0) >= need["num_gpus"] for r in nodes):
            self._fits.add((need["num_cpus"], need["num_gpus"]))
            return
        have = ", ".join(sorted({f"{r.get('CPU', 0):g} CPU + {r.get('GPU', 0):g} GPU" for r in nodes})) or "no node"
        raise ConfigError(f"executor 'ray': each run asks for {need['num_cpus']:g} CPU + {need['num_gpus']:g} GPU "
                          f"(num_cpus, num_gpus), but no node of the cluster has that (nodes: {have}); lower "
                          "--cpus-per-run / --gpus-per-run or add such a node")

    def submit(self, cfg) -> Future:
        """Hand ``cfg``'s run to the cluster; the future's result is its :class:`RunOutcome`."""
        self._check_fits(cfg)  # a bad resource request fails here, not in the driver thread
        fut: Future = Future()
        with self._cv:
            if self._closing:
                raise RuntimeError("this Ray session is closed")
            self._queue.append(_Queued(cfg, fut))
            self._total_rounds += cfg.train.rounds
            self._cv.notify_all()
        return fut

    def status(self) -> dict[str, dict]:
        """Per run in flight: ``attempts``, ``pid`` and ``host`` of its current worker, ``rounds`` done,
        ``version`` (checkpoints received), ``resumed_from`` (each attempt's first round)."""
        return self._ray.get(self.relay.status.remote())

    # -- the driver thread -------------------------------------------------------------------------
    def _capacity(self) -> int:
        if self.ex.max_in_flight is not None:
            return self.ex.max_in_flight
        res = self._ray.cluster_resources()
        cpus = self.ex.num_cpus or max((q.cfg.threads for q in self._queue[:1]), default=1)
        fit = res.get("CPU", 1.0) / cpus
        if self.ex.num_gpus > 0:
            fit = min(fit, res.get("GPU", 0.0) / self.ex.num_gpus)
        return max(1, 2 * int(fit))

    def _drive(self) -> None:
        try:
            while True:
                with self._cv:
                    if not self._queue and not self._flights:
                        if self._closing:
                            return
                        self._cv.wait(self.poll_s)
                        continue
                    capacity = self._capacity() if self._queue else 0
                    starting = []
                    while self._queue and len(self._flights) + len(starting) < capacity:
                        starting.append(self._queue.pop(0))
                for q in starting:
                    self._start(q)
                if self._flights:
                    self._wait_and_store()
                self._refresh()
        except BaseException as e:  # never leave a caller waiting on a run nobody drives
            log.exception("fedrepro: the Ray driver thread failed")
            with self._cv:
                pending = [q.future for q in self._queue] + [f.future for f in self._flights.values()]
                self._queue.clear()
            for fl in list(self._flights.values()):
                fl.lock.close()
            self._flights.clear()
            for fut in pending:
                if not fut.done():
                    fut.set_exception(e)

    def _settle(self, cfg, fut: Future, outcome: RunOutcome | None = None, error: BaseException | None = None) -> None:
        if outcome is not None:
            self.outcomes[cfg.hash()] = outcome
        self._done_rounds += cfg.train.rounds
        if error is not None:
            fut.set_exception(error)
        else:
            fut.set_result(outcome)

    def _start(self, q: _Queued) -> None:
        """Claim the run; skip it when stored (or held by another process); else ship it to Ray."""
        from ..runs.train import is_stale as _is_stale, retire_for_training
        from ..runs.store import PARTIAL_FILES, RunStore, read_files

        cfg, fut = q.cfg, q.future
        if not fut.set_running_or_notify_cancel():
            return
        store = RunStore(cfg.runs_dir)
        lock = contextlib.ExitStack()
        try:
            try:
                status = lock.enter_context(store.claim(cfg, on_busy="error"))
            except RunBusyError as e:
                log.warning("fedrepro: %s; left to that process", e)
                self._settle(cfg, fut, RunOutcome("busy"))
                return
            if status != "missing" and _is_stale(store, cfg, self.policy):
                retire_for_training(store, cfg)
                status = "missing"
            if status == "done":
                lock.close()
                self._settle(cfg, fut, RunOutcome("stored"))
                return
            key = cfg.hash()
            shipped = read_files(store.path(cfg), PARTIAL_FILES) if status == "partial" else None
            ray = self._ray
            ray.get(self.relay.seed.remote(key, shipped))
            ref = self._task.options(max_retries=self.ex.max_retries, **self.ex.resources(cfg)).remote(
                cfg, self.relay, key, self.policy, self.ex.checkpoint_every_s,
                fingerprint.record(cfg)["code_fingerprint"])
            self._flights[key] = _Flight(cfg, fut, store, lock, ref)
        except BaseException as e:
            lock.close()
            self._settle(cfg, fut, error=e)

    def _wait_and_store(self) -> None:
        ray = self._ray
        by_ref = {fl.ref: fl for fl in self._flights.values()}
        refs = list(by_ref)
        ray.wait(refs, num_returns=1, timeout=self.poll_s)
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
        self._store_checkpoints()
        for ref in ready:
            self._land(by_ref[ref])

    def _store_checkpoints(self, only: str | None = None) -> None:
        from ..runs.store import RunReceiver

        status = self.status()
        for key, fl in list(self._flights.items()):
            info = status.get(key)
            if info is None or (only is not None and key != only):
                continue
            fl.rounds = info["rounds"]
            if info["version"] > fl.version:
                files, version = self._ray.get(self.relay.files.remote(key))
                if files and "checkpoint.pt" in files:
                    RunReceiver(fl.store).checkpoint(fl.cfg, files)
                fl.version = version

    def _land(self, fl: _Flight) -> None:
        """Store a finished run's files, or keep the newest checkpoint of one that failed."""
        from ..runs.store import RunReceiver

        key = fl.cfg.hash()
        attempts = self.status().get(key, {}).get("attempts", 0)
        try:
            out = self._ray.get(fl.ref)
            RunReceiver(fl.store).finished(fl.cfg, out["files"])
        except Exception as e:  # noqa: BLE001  (the caller gets it; the other runs go on)
            with contextlib.suppress(Exception):
                self._store_checkpoints(only=key)
            self._close(fl)
            self._settle(fl.cfg, fl.future, error=e)
        else:
            self._close(fl)
            self._settle(fl.cfg, fl.future, RunOutcome("trained", out["seconds"], attempts))

    def _close(self, fl: _Flight) -> None:
        key = fl.cfg.hash()
        fl.lock.close()
        self._flights.pop(key, None)
        with contextlib.suppress(Exception):
            self.relay.forget.remote(key)

    def _refresh(self) -> None:
        bar = self._bar
        bar.total = self._total_rounds
        bar.n = self._done_rounds + sum(fl.rounds for fl in self._flights.values())
        bar.set_postfix_str(f"{len(self.outcomes)} runs done, {len(self._flights)} in flight", refresh=False)
        bar.refresh()


def run_remote(executor: RayExecutor, cfgs, progress: bool = True, desc: str = "runs") -> dict[str, RunOutcome]:
    """Train ``cfgs`` on the cluster, longest first; returns each run's outcome by hash. The other runs
    finish (and are stored) when one fails; then the first failure is raised."""
    unique = {c.hash(): c for c in cfgs}
    order = sorted(unique.values(), key=estimate_cost, reverse=True)
    with executor.session(progress=progress, desc=desc) as session:
        futures = {c.hash(): session.submit(c) for c in order}
        errors = []
        for key, fut in futures.items():
            try:
                fut.result()
            except Exception as e:  # noqa: BLE001
                errors.append(e)
        outcomes = dict(session.outcomes)
    if errors:
        raise errors[0]
    return outcomes
