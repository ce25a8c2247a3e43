"""One pool that trains a plan's runs and computes its cached analyses with every core busy.

Tasks go to ``workers`` spawned processes, longest first: each free worker takes the pending task
with the largest estimated cost. Estimates start from a config's size (:func:`estimate_cost`) and
are calibrated as runs finish, per kind of run, so that the one progress bar's time left is
right after the first few minutes. Every run trains at the thread count its config fixes
(``RunConfig.threads``), so a run gives the same numbers here as in a notebook cell or the CLI.
An analysis waits for its run. A task that fails is reported with the others' results kept.
"""
from __future__ import annotations

import statistics
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Sequence

from tqdm.auto import tqdm

from .config import RunConfig
from .errors import FedreproError

# Per-image cost of a training step relative to ResNet-8 at width 16 on a CPU core (README,
# "Measured here": about 6,300 img/s at width 16, 1,400 at 64, 730 for the tiny ViT). CLIP prompt
# methods train on cached frozen tokens: cheap per image after the first pass.
_MODEL_COST = {"resnet8": 1.0, "resnet10": 1.5, "resnet18": 3.0, "cnn": 0.6, "moon_cnn": 0.6, "mlp": 0.1,
               "tiny_vit": 8.0, "vit": 8.0, "clip": 1.0}


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
    model = _MODEL_COST.get(cfg.model.name, 1.0) * ((width / 16) ** 1.1 if width and cfg.model.name.startswith("resnet") else 1.0)
    evals = t.rounds / t.eval_every
    train = t.rounds * clients * per_client * t.local_epochs
    finetune = evals * d.num_clients * per_client * t.eval_finetune_epochs
    return model * (train + finetune + evals * d.num_clients * test / 3) + 2000.0  # + set-up


def _kind(cfg: RunConfig) -> tuple:
    """Runs that differ only by seed (or a scalar hyperparameter) cost about the same."""
    return (cfg.method.name, cfg.model.name, cfg.data.dataset, cfg.data.num_clients, cfg.train.rounds,
            cfg.train.local_epochs, cfg.train.eval_finetune_epochs)


@dataclass
class Task:
    key: str                      # run hash, or "<analysis>:<run hash>"
    cfg: RunConfig
    analysis: str | None = None   # a name in fedrepro.analysis.grid.CACHED
    cost: float = 0.0

    @property
    def kind(self) -> tuple:
        return ("analysis", self.analysis) if self.analysis else _kind(self.cfg)


@dataclass
class PoolReport:
    workers: int
    seconds: float = 0.0
    done: dict[str, float] = field(default_factory=dict)    # task key -> seconds in the worker
    failed: dict[str, str] = field(default_factory=dict)    # task key -> error
    skipped: int = 0                                        # found finished in the store

    def to_dict(self) -> dict:
        return {"workers": self.workers, "seconds": round(self.seconds, 1), "tasks_done": len(self.done),
                "task_seconds": round(sum(self.done.values()), 1), "already_stored": self.skipped,
                "failed": self.failed}


def _work(cfg: RunConfig, analysis: str | None) -> float:
    """One task in a worker process; returns its seconds."""
    t0 = time.perf_counter()
    if analysis is None:
        from .experiment import run

        run(cfg.replace(progress=False))
    else:
        from .analysis.grid import CACHED
        from .store import RunStore

        store = RunStore(cfg.runs_dir)
        CACHED[analysis](store.load(cfg))
    return time.perf_counter() - t0


class _Calibration:
    """Seconds per unit of estimated cost, per kind of task, from the tasks that finished."""

    def __init__(self) -> None:
        self.by_kind: dict[tuple, list[float]] = defaultdict(list)

    def add(self, task: Task, seconds: float) -> None:
        self.by_kind[task.kind].append(seconds / task.cost)

    def seconds(self, task: Task) -> float:
        ratios = self.by_kind.get(task.kind)
        if ratios:
            return task.cost * statistics.median(ratios)
        # A kind not seen yet: the median of its sort (runs or analyses), else a first guess of
        # about 5,000 ResNet-8 images/s per core, and 5 s per analysis.
        same = [r for k, v in self.by_kind.items() if (k[0] == "analysis") == bool(task.analysis) for r in v]
        return task.cost * (statistics.median(same) if same else (5.0 if task.analysis else 2e-4))


def run_pool(runs: Sequence[RunConfig], analyses: Sequence[tuple[str, RunConfig]] = (), workers: int = 2,
             progress: bool = True) -> PoolReport:
    """Train ``runs`` that are not finished and compute ``analyses`` (``(name, run config)``), in
    ``workers`` processes; returns what was done and how long it took."""
    import multiprocessing as mp
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

    from .analysis.grid import CACHED
    from .store import RunStore

    t0 = time.perf_counter()
    report = PoolReport(workers=workers)
    pending_runs: list[Task] = []
    for cfg in {c.hash(): c for c in runs}.values():
        if RunStore(cfg.runs_dir).status(cfg) == "done":
            report.skipped += 1
        else:
            pending_runs.append(Task(cfg.hash(), cfg, cost=estimate_cost(cfg)))
    waiting: dict[str, list[Task]] = defaultdict(list)   # run hash -> analyses waiting for it
    ready: list[Task] = list(pending_runs)
    todo_runs = {t.key for t in pending_runs}
    for name, cfg in analyses:
        if name not in CACHED:
            raise FedreproError(f"unknown analysis {name!r}; valid: {', '.join(CACHED)}")
        task = Task(f"{name}:{cfg.hash()}", cfg, analysis=name, cost=1.0)
        (waiting[cfg.hash()] if cfg.hash() in todo_runs else ready).append(task)
    total = len(ready) + sum(len(v) for v in waiting.values())
    if total == 0:
        report.seconds = time.perf_counter() - t0
        return report

    calib = _Calibration()
    bar = tqdm(total=1.0, desc=f"pool ({workers} workers)", unit="s", disable=not progress, mininterval=2.0,
               bar_format="{desc}: {percentage:3.0f}%|{bar}| {postfix} [{elapsed}<{remaining}, {rate_fmt}]")

    def remaining() -> float:
        queued = ready + [t for v in waiting.values() for t in v] + list(running.values())
        return sum(calib.seconds(t) for t in queued)

    def refresh() -> None:
        done_s = sum(report.done.values())
        bar.total = max(done_s + remaining(), 1e-9)
        bar.n = done_s
        bar.set_postfix_str(f"{len(report.done) + len(report.failed)}/{total} tasks", refresh=False)
        bar.refresh()

    running: dict = {}
    ctx = mp.get_context("spawn")  # forking a process whose OpenMP pool runs can deadlock
    with ProcessPoolExecutor(workers, mp_context=ctx) as pool:
        try:
            while ready or running:
                while ready and len(running) < workers:
                    ready.sort(key=calib.seconds)
                    task = ready.pop()  # the longest first
                    running[pool.submit(_work, task.cfg, task.analysis)] = task
                refresh()
                finished, _ = wait(list(running), return_when=FIRST_COMPLETED)
                for fut in finished:
                    task = running.pop(fut)
                    try:
                        seconds = fut.result()
                    except Exception as e:  # noqa: BLE001  (reported with the rest; others go on)
                        report.failed[task.key] = f"{type(e).__name__}: {e}"
                        for dep in waiting.pop(task.key, []):
                            report.failed[dep.key] = f"its run {task.key} failed"
                        continue
                    report.done[task.key] = seconds
                    calib.add(task, seconds)
                    ready.extend(waiting.pop(task.key, []))
        except BaseException:
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        finally:
            refresh()
            bar.close()
    report.seconds = time.perf_counter() - t0
    return report
