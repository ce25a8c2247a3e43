"""One pool that trains a plan's runs, computes its cached analyses and renders its notebooks,
with every core busy.

There are ``workers`` slots. Runs and analyses go to spawned worker processes; a notebook render is
a call made from a thread here (it starts a process of its own). A task is ready once the tasks it
depends on are done (an analysis waits for its run, a notebook for its runs and analyses, the
claims summary for every notebook), and each free slot takes the ready task with the largest
estimated time: longest first, so that no long run starts at the end. Estimates start from a
config's size (:func:`estimate_cost`) and are calibrated as tasks finish, per kind of task, so that
the time left shown beside the progress bar (:mod:`fedrepro.execute.progress`, which counts tasks)
is right after the first minutes. Every run trains at the thread
count its config fixes (``RunConfig.threads``): the same numbers here as in a notebook cell or the
CLI. A task that fails is reported, with what depends on it; the rest go on.
"""
from __future__ import annotations

import dataclasses
import os
import statistics
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import ClassVar
from typing import Callable, Iterable, Mapping, Sequence

from ..env import allocator, settings
from ..config import RunConfig
from ..errors import ConfigError, FedreproError
from ..env.host import cpu_cores
from ..params import check_fields, hp
from ..env.lifetime import descendants, die_with_parent, end_children
from .executors import EXECUTORS, Executor, make_executor, pending
from .progress import PassProgress

# Per-image cost of a training step relative to ResNet-8 at width 16 on a CPU core (docs/config.md,
# "Profiles": about 6,300 img/s at width 16, 1,400 at 64, 730 for the tiny ViT). CLIP prompt
# methods train on cached frozen tokens: cheap per image after the first pass.
_MODEL_COST = {"resnet8": 1.0, "resnet10": 1.5, "resnet18": 3.0, "cnn": 0.6, "moon_cnn": 0.6, "mlp": 0.1,
               "tiny_vit": 8.0, "vit": 8.0, "clip": 1.0}


# What every run pays besides its images (process, data and model set-up), in estimate_cost's units.
SETUP_COST = 2000.0


def estimate_cost(cfg: RunConfig) -> float:
    """A run's cost in 'ResNet-8 image steps', from its config alone (no data is read): the
    training images × epochs × rounds, plus evaluation, times a per-model factor. Only the order of
    magnitude matters: the pool calibrates it against the runs that finish."""
    d, t = cfg.data, cfg.train
    pa = d.partition_args
    per_client = pa.get("train_per_client")
    if per_client is None and pa.get("shots") is not None:
        per_client = pa["shots"] * pa.get("classes_per_client", 10)
    if per_client is None:
        per_client = (d.max_train or 60000) / d.num_clients
    test = pa.get("test_per_client") or (d.max_test or 10000) / d.num_clients
    clients = d.num_clients * t.participation
    width = cfg.model.args.get("width")
    model = _MODEL_COST.get(cfg.model.name,
                            1.0) * ((width / 16) ** 1.1 if width and cfg.model.name.startswith("resnet") else 1.0)
    evals = t.rounds / t.eval_every
    train = t.rounds * clients * per_client * t.local_epochs
    finetune = evals * d.num_clients * per_client * t.eval_finetune_epochs
    return model * (train + finetune + evals * d.num_clients * test / 3) + SETUP_COST


def _kind(cfg: RunConfig) -> tuple:
    """Runs that differ only by seed (or a scalar hyperparameter) cost about the same."""
    return (cfg.method.name, cfg.model.name, cfg.data.dataset, cfg.data.num_clients, cfg.train.rounds,
            cfg.train.local_epochs, cfg.train.eval_finetune_epochs)


@dataclass
class Task:
    """A run (``cfg``), a cached analysis of a run (``cfg`` and ``analysis``) or a call made from a
    thread of this process (``call``: a notebook render), with the keys of the tasks it needs
    (``deps``: it fails if one fails) and of those it starts after, done or failed (``after``: a run
    that may be its stored prefix, :func:`fedrepro.runs.prefix.waits_for`)."""

    key: str
    cfg: RunConfig | None = None
    analysis: str | None = None                  # a name in fedrepro.analysis.grid.CACHED
    call: Callable[[], float] | None = None
    deps: frozenset[str] = frozenset()
    cost: float = 1.0
    after: frozenset[str] = frozenset()

    @property
    def kind(self) -> tuple:
        if self.call is not None:
            return ("call",)
        return ("analysis", self.analysis) if self.analysis else _kind(self.cfg)


# A kind not seen yet: seconds per unit of cost before any task of its sort has finished (about
# 5,000 ResNet-8 images/s per core for a run; 5 s for an analysis, 15 s for a notebook render).
_FIRST_GUESS = {"run": 2e-4, "analysis": 5.0, "call": 15.0}


def _sort(kind: tuple) -> str:
    return kind[0] if kind[0] in ("analysis", "call") else "run"


@dataclass
class PoolReport:
    workers: int
    seconds: float = 0.0
    done: dict[str, float] = field(default_factory=dict)    # task key -> seconds it took
    failed: dict[str, str] = field(default_factory=dict)    # task key -> error
    errors: dict[str, BaseException] = field(default_factory=dict, repr=False)  # task key -> its exception
    skipped: int = 0                                        # runs found finished in the store
    memory: dict[str, dict] = field(default_factory=dict)   # task key -> its worker's memory (see _work)
    # The runs this pool trained itself. A run task whose run another process stored meanwhile (it
    # was unfinished when the pool was planned, then waited for that process's lock) is done, but
    # not trained here: counting it would report the other process's work as this one's.
    trained: set[str] = field(default_factory=set)

    def to_dict(self) -> dict:
        return {"workers": self.workers, "seconds": round(self.seconds, 1), "tasks_done": len(self.done),
                "task_seconds": round(sum(self.done.values()), 1), "already_stored": self.skipped,
                "runs_trained": len(self.trained), "failed": self.failed}

    def own(self) -> dict[str, float]:
        """The seconds of the tasks this pool did itself: :attr:`done` without the runs another
        process trained (a wait for its lock, not a training time)."""
        # A run task's key is its hash; an analysis's and a call's have a colon ("name:hash", "render:...").
        return {k: v for k, v in self.done.items() if k in self.trained or ":" in k}


def _work(cfg: RunConfig, analysis: str | None, analyze: Analyze | None = None) -> tuple[float, dict, bool]:
    """One run or analysis in a worker process; returns its seconds, the worker's memory (its
    resident set after the task and the largest it has had, ``ru_maxrss``) and whether this worker
    trained the run (False when another process stored it first, and for an analysis). Between tasks the
    worker gives its free pages back to the OS, so that one waiting for work (while a notebook
    renders in its slot) holds what it uses rather than its last task's high-water mark."""
    import gc
    import resource

    t0 = time.perf_counter()
    trained = False
    if analysis is None:
        from ..runs.train import train_or_load
        from .run import engine_trainer

        inprocess = engine_trainer("inprocess")

        def trainer(*args, **kwargs):
            # Called only under the run's lock for a run not finished in the store: this worker
            # trains (or resumes) it. A run another process finished is loaded without a call.
            nonlocal trained
            trained = True
            return inprocess(*args, **kwargs)

        train_or_load(cfg.replace(progress=False), trainer)  # what fedrepro.run(cfg) does, with its trainer seen
    else:
        analyze(analysis, cfg)
    seconds = time.perf_counter() - t0
    gc.collect()
    allocator.release_free_memory()
    import psutil

    rss = psutil.Process().memory_info().rss / 2**20
    # The kernel's high-water mark is updated lazily and can trail the current RSS by a page or two.
    peak = max(rss, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    return seconds, {"rss_mib": round(rss), "max_rss_mib": round(peak)}, trained


class _Calibration:
    """Seconds per unit of estimated cost, per kind of task, from the tasks that finished."""

    def __init__(self) -> None:
        self.by_kind: dict[tuple, list[float]] = defaultdict(list)

    def add(self, task: Task, seconds: float) -> None:
        self.by_kind[task.kind].append(seconds / task.cost)

    def seconds(self, task: Task) -> float:
        # The nearest finished kind: the same kind; else, for a run, the same method (its cost per
        # image is mostly the method's: FedPFT+Con's contrastive branch costs several FedAvg steps,
        # which the config's size cannot see); else the same sort; else the first guess.
        kind = task.kind
        ratios = self.by_kind.get(kind)
        if not ratios and _sort(kind) == "run":
            ratios = [r for k, v in self.by_kind.items() if _sort(k) == "run" and k[0] == kind[0] for r in v]
        if not ratios:
            ratios = [r for k, v in self.by_kind.items() if _sort(k) == _sort(kind) for r in v]
        return task.cost * (statistics.median(ratios) if ratios else _FIRST_GUESS[_sort(kind)])


# Configs as a list, or keyed by their hashes (a plan's ``runs``); analyses as ``(name, config)``
# pairs, or keyed by ``(name, run hash)`` (a plan's ``analyses``).
Runs = Sequence[RunConfig] | Mapping[str, RunConfig]
Analyses = Sequence[tuple[str, RunConfig]] | Mapping[tuple[str, str], RunConfig]
# Computes the analysis of a name on a stored run, in a worker process (so a module-level function).
Analyze = Callable[[str, RunConfig], object]


def unfinished(runs: Sequence[RunConfig]) -> set[str]:
    """The hashes of ``runs`` that are not finished in their store."""
    return {c.hash() for c in pending(runs)}


def plan_tasks(runs: Runs, analyses: Analyses = (), pending: set[str] | None = None,
               after: Mapping[str, frozenset[str]] | None = None) -> tuple[list[Task], int]:
    """Tasks for the runs not yet stored and for ``analyses`` (``(name, run config)``), and how many
    runs were found stored. ``pending``: the hashes known to be unfinished, from a caller that
    looked them up in a process of its own; without it, this
    process looks them up. Runs and analyses may come keyed by their hashes, as a
    :class:`fedrepro.papers.plan.Plan` holds them: hashing a config reads its method's defaults, which
    imports torch, and a process that only schedules need not. ``after``: run hash -> the runs it
    starts after (those among the tasks)."""
    unique = dict(runs) if isinstance(runs, Mapping) else {c.hash(): c for c in runs}
    keyed = (list(analyses.items()) if isinstance(analyses, Mapping)
             else [((name, cfg.hash()), cfg) for name, cfg in analyses])
    if pending is None:
        pending = unfinished(list(unique.values()))
    tasks = [Task(h, cfg, cost=estimate_cost(cfg)) for h, cfg in unique.items() if h in pending]
    stored = len(unique) - len(tasks)
    pending = {t.key for t in tasks}
    if after:
        tasks = [dataclasses.replace(t, after=frozenset(after.get(t.key, ())) & pending) for t in tasks]
    for (name, h), cfg in keyed:
        tasks.append(Task(f"{name}:{h}", cfg, analysis=name, deps=frozenset({h} & pending)))
    return tasks, stored


def _remote_seconds(fut):
    """A remote run's future as the pool's: its training seconds, no worker memory here, and whether
    the executor trained it (not found stored, nor left to another process that held its lock)."""
    from concurrent.futures import Future

    out: Future = Future()

    def done(f) -> None:
        if f.cancelled():
            out.cancel()
        elif f.exception() is not None:
            out.set_exception(f.exception())
        else:
            outcome = f.result()
            out.set_result((outcome.seconds, {}, outcome.status == "trained"))

    fut.add_done_callback(done)
    return out


def run_pool(runs: Runs, analyses: Analyses = (), workers: int = 2,
             progress: bool = True, calls: Sequence[Task] = (), calls_at_once: int | None = None,
             pending: set[str] | None = None, executor=None, analyze: Analyze | None = None,
             bar: PassProgress | None = None, gpus: Sequence[str] | None = None,
             after: Mapping[str, frozenset[str]] | None = None) -> PoolReport:
    """Train ``runs`` that are not finished, compute ``analyses`` (``(name, run config)``) and make
    ``calls`` (tasks with ``call`` and ``deps``), ``workers`` at a time and at most
    ``calls_at_once`` calls at a time (each notebook render starts a kernel as large as a worker);
    returns what was done and how long each task took. ``pending``: see :func:`plan_tasks`.

    ``executor`` (:mod:`fedrepro.execute`): a remote one (Ray) takes every run as soon as it is
    ready, longest first, beside the ``workers`` slots that analyses and calls keep using here
    (they read the store, which stays on this machine).

    ``bar``: the pass's progress bar, when this pool is one stage of a longer pass (its tasks grow
    the bar's total); without it the pool draws its own.

    ``gpus``: the cards the workers take in turn (:func:`start_worker`), as a planner in another
    process found them; None: :func:`gpus_of` the runs, which loads torch here unless every run is
    on the CPU.

    ``after``: run hash -> the runs it starts after (see :func:`plan_tasks`), so that a run whose
    stored prefix another run of the pool trains starts from it (:mod:`fedrepro.runs.prefix`)."""
    import contextlib
    import multiprocessing as mp
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, ThreadPoolExecutor, wait

    ex = make_executor(executor)

    if analyses and analyze is None:
        raise FedreproError("run_pool(analyses=...) needs analyze=: the function that computes an analysis "
                            "of a stored run (fedrepro.app.reproduce.analyze)")
    t0 = time.perf_counter()
    tasks, stored = plan_tasks(runs, analyses, pending, after)
    tasks += list(calls)
    report = PoolReport(workers=workers, skipped=stored)
    if not tasks:
        return report
    keys = {t.key for t in tasks}
    for t in tasks:
        if not t.deps <= keys:
            raise FedreproError(f"task {t.key} depends on {sorted(t.deps - keys)[:3]}, which are not tasks here")
    blocked = [t for t in tasks if t.deps or t.after]
    ready = [t for t in tasks if not (t.deps or t.after)]
    calib = _Calibration()
    running: dict = {}
    own_bar = bar is None
    if own_bar:
        bar = PassProgress(f"pool ({workers} workers)", enabled=progress)
    bar.expect(len(tasks))
    counted = 0

    def refresh() -> None:
        nonlocal counted
        finished = len(report.done) + len(report.failed)
        bar.advance(finished - counted)
        counted = finished
        # Wall time: the work left spread over the slots (a remote executor's runs not counted apart),
        # with the pass's tasks that later stages will name at the mean time of a task done here.
        here = [*ready, *blocked, *running.values()]
        left = sum(calib.seconds(t) for t in here)
        later = max(0, bar.total - bar.done - len(here))
        if later and report.done:
            left += later * sum(report.done.values()) / len(report.done)
        bar.estimate(left / max(1, workers))

    def settle(task: Task, seconds: float | None, error: BaseException | None, trained: bool = False) -> None:
        """Record a finished task; release what waited only for done tasks, and fail (in a
        chain) what needs a failed one."""
        nonlocal blocked
        if error is None:
            report.done[task.key] = seconds
            if trained:
                report.trained.add(task.key)
            if trained or task.cfg is None or task.analysis is not None:  # a wait for another's run times nothing
                calib.add(task, seconds)
        else:
            report.failed[task.key] = f"{type(error).__name__}: {error}"
            report.errors[task.key] = error
        changed = True
        while changed:
            changed, still = False, []
            for t in blocked:
                bad = t.deps & report.failed.keys()
                if bad:
                    report.failed[t.key] = f"needs {min(bad)}, which failed"
                    changed = True
                elif t.deps <= report.done.keys() and t.after <= report.done.keys() | report.failed.keys():
                    ready.append(t)
                else:
                    still.append(t)
            blocked = still

    def elsewhere(t: Task) -> bool:
        return ex.remote and t.call is None and t.analysis is None

    before = descendants()  # what this pool did not start is not its to end
    ctx = mp.get_context("spawn")  # forking a process whose OpenMP pool runs can deadlock
    if gpus is None:
        gpus = gpus_of(t.cfg for t in tasks if t.cfg is not None and t.analysis is None)
    # A worker dies with this process (lifetime.die_with_parent): a killed driver leaves no run training on.
    with allocator.for_children(), settings.for_children(), ProcessPoolExecutor(
            workers, mp_context=ctx, initializer=start_worker,
            initargs=(os.getpid(), ctx.Value("i", 0), list(gpus))) as procs, \
            ThreadPoolExecutor(workers) as threads, \
            (ex.session(progress=False) if ex.remote else contextlib.nullcontext()) as remote:
        try:
            while ready or running:
                while ready:
                    ready.sort(key=calib.seconds)
                    here = [t for t in running.values() if not elsewhere(t)]
                    calls_running = sum(t.call is not None for t in here)
                    takeable = [i for i, t in enumerate(ready) if elsewhere(t) or (
                        len(here) < workers
                        and (t.call is None or calls_at_once is None or calls_running < calls_at_once))]
                    if not takeable:
                        break
                    task = ready.pop(takeable[-1])  # the longest first
                    if elsewhere(task):
                        fut = _remote_seconds(remote.submit(task.cfg))
                    elif task.call is not None:
                        fut = threads.submit(task.call)
                    else:
                        fut = procs.submit(_work, task.cfg, task.analysis, analyze)
                    running[fut] = task
                refresh()
                finished, _ = wait(list(running), return_when=FIRST_COMPLETED)
                for fut in finished:
                    task = running.pop(fut)
                    trained = False
                    try:
                        seconds = fut.result()
                        if isinstance(seconds, tuple):  # a worker's or executor's task: (seconds, memory, trained)
                            seconds, report.memory[task.key], trained = seconds
                    except Exception as e:  # noqa: BLE001  (reported with the rest; others go on)
                        settle(task, None, e)
                    else:
                        settle(task, seconds, None, trained)
        except BaseException as e:
            if not isinstance(e, Exception):  # Ctrl-C, SIGTERM: stop the workers and renders now, not after their task
                end_children(keep=before)
            procs.shutdown(wait=False, cancel_futures=True)
            threads.shutdown(wait=False, cancel_futures=True)
            raise
        finally:
            refresh()
            if own_bar:
                bar.close()
    report.seconds = time.perf_counter() - t0
    return report


ENV_WORKERS = "FEDREPRO_WORKERS"
ENV_RUNS_PER_GPU = "FEDREPRO_RUNS_PER_GPU"


def positive_env(name: str) -> int | None:
    """The positive integer in environment variable ``name``; None when it is unset or empty."""
    env = os.environ.get(name)
    if not env:
        return None
    try:
        n = int(env)
    except ValueError:
        n = 0
    if n < 1:
        raise ConfigError(f"{name}={env!r}; valid: a positive integer")
    return n


def runs_per_gpu(base: RunConfig, gpus: int) -> int:
    """How many runs share one GPU: ``FEDREPRO_RUNS_PER_GPU`` if set, else one at the paper profile
    (a full-size model fills the card) and otherwise the cores over the runs' threads, spread over
    the GPUs. A laptop-profile run launches small kernels: its own Python work, not the card, limits
    it, so one run leaves a GPU mostly idle and several processes time-share it (or run side by side
    under CUDA MPS, where its daemon runs)."""
    n = positive_env(ENV_RUNS_PER_GPU)
    if n is not None:
        return n
    return 1 if base.profile == "paper" else max(1, cpu_cores() // base.threads // max(1, gpus))


def default_workers(base: RunConfig) -> int:
    """How many runs :func:`run_grid` trains at once: ``FEDREPRO_WORKERS`` if set; else 1 at the
    smoke profile (a run takes about a second: starting processes would cost more than it saves);
    on CUDA, :func:`runs_per_gpu` times the GPUs, at most the cores over the run's ``threads``; on
    a CPU, the cores over the run's ``threads`` (small models leave cores idle: two 1-thread runs
    train about 1.6x the images per second of one 2-thread run on a 2-core machine); 1 on other
    devices (MPS). Worker processes are spawned, so a script calling this needs the usual
    ``if __name__ == "__main__":`` guard (notebooks do not)."""
    n = positive_env(ENV_WORKERS)
    if n is not None:
        return n
    if base.profile == "smoke":
        return 1
    from ..fl.device import resolve_device, visible_gpus  # defers torch: a CPU-only plan never loads it

    cores = max(1, cpu_cores() // base.threads)
    gpus = visible_gpus(base.device)
    if gpus:
        return max(1, min(cores, runs_per_gpu(base, len(gpus)) * len(gpus)))
    return cores if resolve_device(base.device).type == "cpu" else 1


def gpus_of(cfgs: Iterable[RunConfig]) -> list[str]:
    """The GPUs runs ``cfgs`` train on (:func:`fedrepro.fl.device.visible_gpus` of their device
    other than ``cpu``, the first by name where they differ); torch is loaded only when a run may
    train off the CPU."""
    devices = {c.device for c in cfgs} - {"cpu"}
    if not devices:
        return []
    from ..fl.device import visible_gpus

    return visible_gpus(min(devices))


def start_worker(parent: int, started, gpus: Sequence[str]) -> None:
    """A pool worker's start: it dies with ``parent``, and with several GPUs it takes the next one
    in turn (``started`` counts the workers started so far), so that the workers spread over the
    cards; the variable is read when the worker first touches CUDA."""
    die_with_parent(parent)
    if len(gpus) > 1:
        with started.get_lock():
            i = started.value
            started.value += 1
        os.environ["CUDA_VISIBLE_DEVICES"] = gpus[i % len(gpus)]


@EXECUTORS.register("local")
@dataclass(frozen=True)
class LocalExecutor(Executor):
    """Worker processes on this machine; ``workers``: how many (default: the cores over the runs'
    thread counts, ``FEDREPRO_WORKERS`` if set)."""

    name: ClassVar[str] = "local"
    workers: int | None = hp(None, ge=1)

    def __post_init__(self) -> None:
        check_fields(self)

    def train(self, cfgs: Sequence[RunConfig], progress: bool = True) -> int:
        """Train the pending runs ``workers`` at a time in worker processes. With one worker (or one
        pending run) nothing is trained here: :func:`fedrepro.run` then trains each in the calling
        process when it is asked for."""
        todo = pending(cfgs)
        workers = default_workers(cfgs[0]) if self.workers is None and cfgs else self.workers or 1
        if workers > 1 and len(todo) > 1:
            report = run_pool(todo, workers=min(workers, len(todo)), progress=progress)
            if report.errors:  # the others finished and are stored; the first failure is the caller's
                raise next(iter(report.errors.values()))
        return len(todo)
