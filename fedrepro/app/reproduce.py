"""``make reproduce``: plan every numbered notebook's runs, train them once, render the notebooks.

1. **Plan.** Every selected notebook's runs and cached analyses are known before it executes
   (:mod:`fedrepro.papers.plan`); a run two notebooks share is planned once. Planning imports every
   paper, and torch with them, so it runs in a process of its own: the process that schedules
   the rest holds no torch.
2. **Train and render, in one pool** (:mod:`fedrepro.execute.local`) with as many slots as the runs'
   thread counts fit on the cores. Runs and analyses go to worker processes, longest first. A
   notebook renders (papermill, its own kernel at 1 thread) as soon as its runs and analyses are
   stored, so it only analyses and draws; ``99_*`` (the claims summary) after all the others.
   Executed copies go to ``output/<profile>/notebooks/`` under the output root
   (:mod:`fedrepro.env.settings`); the notebooks save their figures, and show them inline.

Each notebook's kernel logs the runs it read (:mod:`fedrepro.env.trace`); a run it had to train is
one the plan missed, and is named in the report. The report (``timings.json`` beside the executed
notebooks) has the wall time, each notebook's render time and the training time of its runs,
every task's time, the CPU time over wall time × cores, and the peak memory of the process tree.
"""
from __future__ import annotations

import json
import os
import re
import resource
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from ..env import allocator
from ..env.atomic import write_error
from ..config import check_profile
from ..errors import ConfigError, FedreproError
from ..env.host import cpu_cores, cpu_model, environ_set, git_commit, repo_root
from ..env.lifetime import die_with_parent, parent_bound
from ..env.host import ENV_ARCHIVE as ARCHIVE_ENV
from ..env.settings import ENV_OUTPUT, child_env, output_path, output_root, under_output_root
from ..env import trace
from ..papers import record_seed_stage
from ..papers.plan import plan, seed_stage
from ..errors import StaleRunError
from ..env.trace import notebook_file
from ..runs.fingerprint import STALE, UNKNOWN, staleness
from ..execute.local import default_workers
from ..execute.local import unfinished
from ..execute import make_executor
from ..execute.local import estimate_cost, gpus_of, run_pool
from ..execute.local import Task
from ..execute.progress import PassProgress
from ..config import REHEARSAL_CLIENTS, REHEARSAL_ROUNDS
from .rehearsal import (cost_path, cost_table, gpu_section, paper_profile_runs, read_cost, rehearsal_env, step_times,
                        write_cost)

if TYPE_CHECKING:
    from ..papers.plan import Plan


def numbered_notebooks(root: Path | None = None) -> list[Path]:
    """``notebooks/NN_*.ipynb`` and ``notebooks/<paper>/NN_*.ipynb`` in path order; ``99_*`` (the
    claims summary, which reads what the others wrote) comes last."""
    nb_root = (root or repo_root()) / "notebooks"
    found = [p for p in nb_root.rglob("[0-9][0-9]_*.ipynb") if ".ipynb_checkpoints" not in p.parts]
    return sorted(found, key=lambda p: (p.name.startswith("99_"), len(p.relative_to(nb_root).parts), str(p)))


def selected(rel: Path, only: str | None) -> bool:
    """Whether the notebook at ``rel`` (under ``notebooks/``) is among ``only``: None selects every
    notebook, otherwise one that any of its comma-separated parts begins: its path
    (``fedpft/13_``), or one of its folder or file names, with or without the file's number
    (``fedotp``, ``00_``, ``convergence``). So ``00_`` selects ``00_tour``, not
    ``fedpft/11_100_clients``, which a part met anywhere in the path would."""
    if only is None:
        return True
    path = rel.as_posix()
    names = [n for c in rel.parts for n in (c, re.sub(r"^\d+_", "", c))]
    return any(part and (path.startswith(part) or any(n.startswith(part) for n in names)) for part in only.split(","))


def _role(cmdline: list[str]) -> str:
    """What a process of the tree is: a pool worker, a notebook's kernel, papermill, or this one."""
    line = " ".join(cmdline)
    if "spawn_main" in line:
        return "worker"
    if "ipykernel" in line:
        return "kernel"
    if "papermill" in line:
        return "papermill"
    return "other"


class _Monitor:
    """Peak memory of this process and all its descendants, two ways:

    - ``peak_pss``: the sum of their proportional set sizes, what the tree holds (a page that n
      processes share counts 1/n in each); sampled every ``pss_every`` s, as reading it costs
      about 5 ms per torch process; kept with its split by role (:func:`_role`) at the peak;
    - ``peak_rss``: the sum of their resident sets, every ``every`` s, an upper bound that counts
      torch's shared libraries once per process.
    """

    def __init__(self, every: float = 1.0, pss_every: float = 3.0):
        import psutil

        self._proc = psutil.Process()
        self._every = every
        self._pss_every = max(1, round(pss_every / every))
        self._stop = threading.Event()
        self.peak_rss = self.peak_pss = 0
        self.at_peak: dict[str, list[int]] = {}
        self._largest: tuple[int, str] = (0, "")
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _sample(self, pss: bool) -> None:
        import psutil

        rss = pss_total = 0
        roles: dict[str, list[int]] = {}
        for p in [self._proc, *self._proc.children(recursive=True)]:
            try:
                r = p.memory_info().rss
                rss += r
                cmd = p.cmdline()
                if r > self._largest[0]:
                    self._largest = (r, " ".join(cmd[1:4]))
                if pss:
                    one = p.memory_full_info().pss
                    pss_total += one
                    role = "scheduler" if p.pid == self._proc.pid else _role(cmd)
                    roles.setdefault(role, []).append(round(one / 2**20))
            except (psutil.NoSuchProcess, psutil.AccessDenied, AttributeError):
                pass
        self.peak_rss = max(self.peak_rss, rss)
        if pss_total > self.peak_pss:
            self.peak_pss, self.at_peak = pss_total, roles

    def _loop(self) -> None:
        n = 0
        while not self._stop.wait(self._every):
            self._sample(pss=n % self._pss_every == 0)
            n += 1

    def to_dict(self) -> dict:
        return {"pss_sum_mib": round(self.peak_pss / 2**20), "rss_sum_mib": round(self.peak_rss / 2**20),
                "largest_process_rss_mib": round(self._largest[0] / 2**20), "largest_process": self._largest[1],
                "pss_mib_at_peak_by_role": self.at_peak}

    def __enter__(self) -> "_Monitor":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def analyze(name: str, cfg) -> None:
    """A plan's cached analysis of a stored run, in a pool worker (the scheduling process never
    imports the analyses, nor torch with them)."""
    from ..analysis.grid import compute_cached

    compute_cached(name, cfg)


def _cpu_seconds() -> float:
    """User + system CPU time of this process and its waited-for descendants."""
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


def _new_file(path: Path):
    """``path`` opened for writing as a new regular file (what was there removed first), created
    without following a link: a link planted there, even in between, is an error, not a file written
    elsewhere. A path that cannot be written is a one-line ResourceError."""
    try:
        path.unlink(missing_ok=True)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
        return os.fdopen(os.open(path, flags, 0o666), "w")
    except OSError as e:
        raise write_error(e, path, "point FEDREPRO_OUTPUT elsewhere") from e


def _render(nb: Path, target: Path, profile: str, kernel: str, trace_file: Path, log: Path) -> float:
    """Execute one notebook with papermill in a process of its own, whose kernel inherits the
    trace file and 1 thread; its output goes to ``log`` (shown when it fails)."""
    import subprocess



    # The kernel writes where this process does, whichever setting chose the output root.
    env = allocator.child_env({**child_env(), trace.ENV: str(trace_file)})
    # The kernel's analyses run at 1 thread: the same numbers at every render, and one core each.
    env.update({var: "1" for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")})
    trace_file.unlink(missing_ok=True)
    # The log and the executed copy go where the pass writes, which whoever shares the output root can
    # write too: a link planted in place of either is removed, never written through (issue 53).
    if target.is_symlink():
        target.unlink()
    t0 = time.perf_counter()
    with _new_file(log) as out:
        # papermill gets SIGTERM if this process dies; its kernel exits when papermill is gone.
        done = subprocess.run(parent_bound(["-m", "papermill", str(nb), str(target), "-p", "PROFILE", profile,
                                            "-k", kernel, "--cwd", str(nb.parent), "--no-progress-bar"]),
                              stdout=out, stderr=subprocess.STDOUT, env=env)
    if done.returncode:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-40:])
        raise FedreproError(f"notebook {nb.name} failed (papermill exit {done.returncode}); its executed copy is "
                            f"{target}, the full log {log}:\n{tail}")
    return time.perf_counter() - t0


def _stale_runs(runs: list, pending: set[str]) -> dict[str, list[str]]:
    """The stored runs of ``runs`` (not in ``pending``) that today's code would not reproduce
    (``stale``) or whose code cannot be checked (``unknown``), by hash (:mod:`fedrepro.runs.fingerprint`)."""
    from ..runs.store import RunStore

    out: dict[str, list[str]] = {STALE: [], UNKNOWN: []}
    for cfg in runs:
        h = cfg.hash()
        if h not in pending:
            state = staleness(cfg, RunStore(cfg.runs_dir).meta(cfg)).state
            if state in out:
                out[state].append(h)
    return out


# Plans made before the last: a table whose search rows depend on another search would need more.
MAX_SEARCH_STAGES = 3


def _planned(profile: str, only: str | None, workers: int | None,
             runs_dir: str) -> tuple[list[Path], Plan, int, set[str], dict, list[str], dict[str, list[str]]]:
    """The selected notebooks, their plan, the pool's slots, the runs still to train (stale ones
    included, unless ``FEDREPRO_STALE=keep``), the stale and unknown ones, the GPUs the runs
    train on (:func:`fedrepro.execute.local.gpus_of`; the pool's workers take them in turn), and in a
    rehearsal the runs to train that are copied from a representative
    (:func:`fedrepro.runs.represent.representatives`: representative -> its stand-ins, which wait
    for it in the pool). Called in a process of its own: planning imports every paper (and torch),
    which the scheduling process would otherwise hold for the whole reproduction."""
    root = repo_root()
    nb_root = root / "notebooks"
    notebooks = [p for p in numbered_notebooks(root) if selected(p.relative_to(nb_root), only)]
    if not notebooks:
        raise ConfigError(f"no numbered notebook matches {only!r} under {nb_root}")
    the_plan = plan(notebooks, nb_root, profile, runs_dir=runs_dir)
    from ..analysis.grid import check_cached  # defers torch, which planning loads anyway in this process

    check_cached([name for name, _ in the_plan.analyses])
    runs = list(the_plan.runs.values())
    if workers is None:
        workers = default_workers(runs[0]) if runs else 1
        if profile == "smoke" and workers == 1 and runs:  # the pool pays off even for second-long runs here
            workers = max(1, cpu_cores() // max(c.threads for c in runs))
    from ..runs.train import ENV_STALE, is_stale, on_stale_policy

    gpus = gpus_of(runs)
    pending = unfinished(runs)
    stale = _stale_runs(runs, pending)
    policy = on_stale_policy()
    if stale["stale"] and policy == "error":
        raise StaleRunError(f"{len(stale['stale'])} stored runs were trained by other code than today's (e.g. "
                            f"{', '.join(stale['stale'][:3])}); {ENV_STALE}=retrain trains them anew, "
                            f"{ENV_STALE}=keep reuses them")
    if policy == "retrain":
        pending |= set(stale["stale"])
    from ..runs.prefix import waits_for  # defers torch, which planning loads anyway in this process
    from ..runs.represent import representatives
    from ..runs.store import RunStore

    to_train = {h: c for h, c in the_plan.runs.items() if h in pending}
    the_plan.waits = waits_for(to_train)
    # A rehearsal's stand-ins start after their representative, whose stored run they copy.
    store = RunStore(runs_dir)
    represented = representatives(to_train, lambda c: c.hash() in pending or is_stale(store, c, policy))
    for rep, others in represented.items():
        for h in others:
            the_plan.waits[h] = the_plan.waits.get(h, frozenset()) | {rep}
    return notebooks, the_plan, workers, pending, stale, gpus, represented


# Stages of sequential claims after the first pass (fedrepro.claims.core.STAGES: 3 -> 5 -> 8 -> 12).
MAX_SEED_STAGES = 3


def _predicted(profile: str, only: str | None, runs_dir: str, output: str, timings: str | None = None) -> dict | None:
    """The pass's predicted cost (:func:`fedrepro.app.compute.predict`), in a process of its own (as
    :func:`_planned`), calibrated on ``timings`` (a pass's report), by default the committed report
    of the last whole laptop pass; None without it."""
    from .compute import BENCH_TIMINGS, predict  # defers torch and every paper, as _planned does

    os.environ[ENV_OUTPUT] = output  # where the notebooks recorded their claims, if a pass has run
    root = repo_root()
    report = Path(timings) if timings is not None else root / BENCH_TIMINGS
    if not report.is_file():
        return None
    nb_root = root / "notebooks"
    notebooks = [p for p in numbered_notebooks(root) if selected(p.relative_to(nb_root), only)]
    return predict(notebooks, nb_root, profile, report, root / "docs" / "results" / profile, runs_dir)


def _seed_stage(profile: str, only: str | None, workers: int | None, runs_dir: str, output: str):
    """The next stage of the sequential claims, in a process of its own (as :func:`_planned`): reads
    the claims the rendered notebooks recorded, records the tables whose claim rows need more seeds
    (:func:`fedrepro.papers.plan.seed_stage`), and plans again; None when no claim asks for more.
    Returns ``(notebooks to render again, what _planned returns)``."""
    import os

    from ..claims.core import claims_dir, recorded_claims  # defers pandas to this process

    os.environ[ENV_OUTPUT] = output  # the root the notebooks recorded their claims under
    nb_root = repo_root() / "notebooks"
    notebooks = [p for p in numbered_notebooks(repo_root()) if selected(p.relative_to(nb_root), only)]
    grow, again = seed_stage(notebooks, nb_root, profile, recorded_claims(claims_dir(profile)))
    if not grow:
        return None
    for table, n in grow.items():
        record_seed_stage(profile, table, n)
    print("[reproduce] sequential claims: " + ", ".join(f"{t} to {n} seeds" for t, n in grow.items()), flush=True)
    return again, _planned(profile, only, workers, runs_dir)


def reproduce(profile: str = "laptop", only: str | None = None, kernel: str = "python3", workers: int | None = None,
              plan_only: bool = False, progress: bool = True, executor=None, rehearse: bool = False,
              rehearsal_data: str | None = None, predict: bool = False, render: bool = True,
              timings: str | Path | None = None) -> dict:
    """Plan, train and render the numbered notebooks (those ``only`` selects, :func:`selected`; a
    comma-separated list names several); returns the report that is also written to
    ``output/<profile>/notebooks/timings.json`` under the output root
    (:func:`fedrepro.env.settings.output_root`). ``executor`` (:mod:`fedrepro.execute`): where the
    runs train, ``"local"`` (default) or a Ray cluster; analyses and renders stay on this machine,
    beside the store. ``predict`` (with ``plan_only``): also print the pass's predicted CPU time
    (:mod:`fedrepro.app.compute`), which plans every run again (minutes at the laptop profile),
    calibrated on ``timings`` (a pass's report; default ``bench/timings.json``).
    ``render=False``: train the runs and analyses the notebooks read and render none (then nbval, or
    a reader, executes the notebooks on the stored runs); no later seed stages, which read rendered
    claims.

    ``rehearse`` (the paper profile only): every notebook on the papers' full-size models with the
    budgets cut, under an output root of its own (:mod:`fedrepro.app.rehearsal`); its report adds each
    model's time per client step, and the predicted time of each notebook at the paper profile is
    written where the paper profile's results pages read it. ``rehearsal_data``: the data root the
    rehearsal reads instead of its synthetic images."""
    if timings is not None and not Path(timings).is_file():
        raise ConfigError(f"--timings {timings}: no such file; valid: a timings.json that `fedrepro reproduce` wrote "
                          "(output/<profile>/notebooks/timings.json)")
    if rehearse and profile != "paper":
        raise ConfigError(f"--rehearse rehearses the paper profile; got --profile {profile} (valid: --profile paper)")
    if not rehearse:
        # A pass trains: the reference archive (fedrepro.runs.archive) is off unless the caller set
        # FEDREPRO_ARCHIVE=read (make figures: render every notebook from the archive, training nothing
        # it holds). Set for the pass's workers and kernels too.
        with environ_set({ARCHIVE_ENV: os.environ.get(ARCHIVE_ENV) or "off"}):
            return _reproduce(profile, only, kernel, workers, plan_only, progress, executor, predict, render,
                              timings)
    cost_file = cost_path()  # under the output root the pass was started with
    with rehearsal_env(rehearsal_data) as root:
        print(f"[reproduce] rehearsal of the paper profile under {root}: full-size models, "
              f"{REHEARSAL_ROUNDS} rounds of one local step, at most {REHEARSAL_CLIENTS} clients a round, "
              "one seed; verdicts are REHEARSAL", flush=True)
        report = _reproduce(profile, only, kernel, workers, plan_only, progress, executor, predict, render, timings)
        if not plan_only:
            _rehearsal_cost(report, profile, only, cost_file)
    return report


def _cost_of_plan(profile: str, only: str | None, runs_dir: str, gpu: dict | None) -> tuple[dict, list]:
    """The rehearsal's time per client step on each model and each notebook's predicted cost
    (:mod:`fedrepro.app.rehearsal`; ``gpu``: step times a GPU measured), from its plan, in a process
    of its own (as :func:`_planned`)."""
    notebooks, the_plan, *_ = _planned(profile, only, 1, runs_dir)
    steps = step_times(the_plan.runs.values())
    # The rehearsal's runs give the step times; the paper profile's own runs (every seed) the table.
    readers, runs = paper_profile_runs(notebooks, repo_root() / "notebooks")
    return steps, cost_table(readers, runs, steps, gpu)


def _rehearsal_cost(report: dict, profile: str, only: str | None, cost_file: Path) -> None:
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor

    gpu = gpu_section(read_cost(cost_file)) or gpu_section(read_cost(cost_path()))  # what a GPU measured stays
    with ProcessPoolExecutor(1, mp_context=mp.get_context("spawn")) as planner:
        steps, table = planner.submit(_cost_of_plan, profile, only, str(output_path("runs")), gpu).result()
    report["rehearsal"] = {"step_times": steps, "cost": table, "cost_file": str(cost_file)}
    # Beside the rehearsal's own pages too (fedrepro results --profile paper under its output root).
    for path in dict.fromkeys((cost_file, cost_path())):
        write_cost(path, steps, table, report, gpu)
    from ..runs.store import atomic_write_bytes

    atomic_write_bytes(output_path("notebooks", profile) / "timings.json", json.dumps(report, indent=2).encode())
    for model, v in steps.items():
        print(f"[reproduce] rehearsal: one client step of {model}: {v['step_s']:.2f} s (median of {v['runs']} runs)")
    print(f"[reproduce] predicted cost at the paper profile in {cost_file}", flush=True)


def _reproduce(profile: str, only: str | None, kernel: str, workers: int | None, plan_only: bool, progress: bool,
               executor, predict: bool = False, render: bool = True, timings: str | Path | None = None) -> dict:
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor

    check_profile(profile)
    executor = make_executor(executor)
    if workers is None:
        workers = getattr(executor, "workers", None)
    root = repo_root()
    nb_root = root / "notebooks"
    # Named here, not in the planner or the workers: they are other processes, which would not see
    # an output root set with fedrepro.env.settings.configure (the notebooks' kernels get it by child_env).
    runs_dir = str(output_path("runs"))

    def planned(workers: int | None):
        with ProcessPoolExecutor(1, mp_context=mp.get_context("spawn"), initializer=die_with_parent,
                                 initargs=(os.getpid(),)) as planner:
            return planner.submit(_planned, profile, only, workers, runs_dir).result()

    notebooks, the_plan, workers, pending_hashes, stale, gpus, represented = planned(workers)
    # Keyed by the hashes the planner computed: hashing here would import torch (plan_tasks).
    runs, analyses = the_plan.runs, the_plan.analyses
    # Every run this pass trains, once, by hash: a later stage's plan lists again what an earlier
    # one planned and has not trained yet.
    pending = {h: c for h, c in runs.items() if h in pending_hashes}
    later = len(the_plan.after_searches)
    print(f"[reproduce] outputs under {output_root()} (runs in {runs_dir}; see docs/outputs.md)", flush=True)
    print(f"[reproduce] plan: {_count(len(notebooks), 'notebook')}, {len(runs)} runs ({len(pending)} to train)"
          + (f" + about {later} more once their learning-rate searches choose the rates" if later else "")
          + f", {len(analyses)} cached analyses, {_count(len(notebooks) if render else 0, 'render')}; {workers} workers"
          + (f"; runs train on executor {executor.name!r}" if executor.remote else "")
          + (f"; {_count(len(the_plan.incomplete), 'notebook')} wait for learning-rate searches: "
             f"{', '.join(the_plan.incomplete)}" if the_plan.incomplete else ""),
          flush=True)
    if any(c.rehearsal for c in pending.values()):
        copied = sum(map(len, represented.values()))
        print(f"[reproduce] rehearsal: {len(runs)} planned runs ({len(pending)} to train), "
              f"{len(pending) - copied} distinct paths trained, the rest ({copied}) copied from them "
              "(fedrepro.runs.represent)", flush=True)
    if gpus and profile != "paper":
        # Measured on an H100 beside its 16 cores (docs/speed.md, "A GPU"): the stand-in models are
        # too small for a card, whose kernel launches and time-slicing between processes cost more
        # than the arithmetic they save.
        print(f"[reproduce] the {profile} profile's runs train on the GPU, where they are slower than on CPU cores "
              "(an H100 trained 15 runs in 2 min, its machine's 16 cores 108); CUDA_VISIBLE_DEVICES= trains them "
              "on the cores", flush=True)
    if stale["stale"]:
        print(f"[reproduce] {len(stale['stale'])} stored runs were trained by other code than today's: "
              + ("they are trained anew" if stale["stale"][0] in pending_hashes else "kept (FEDREPRO_STALE=keep)"),
              flush=True)
    if stale["unknown"]:
        print(f"[reproduce] warning: {len(stale['unknown'])} stored runs have no code fingerprint and no clean "
              f"commit to check them against; they are reused and listed in the report (stale_check)", flush=True)
    if plan_only:
        for nb, hashes in the_plan.readers.items():
            print(f"    {nb}: {len(hashes)} runs")
        predicted = None
        if predict:
            with ProcessPoolExecutor(1, mp_context=mp.get_context("spawn"), initializer=die_with_parent,
                                     initargs=(os.getpid(),)) as planner:
                predicted = planner.submit(_predicted, profile, only, runs_dir, str(output_root()),
                                           None if timings is None else str(timings)).result()
            if predicted is None:
                print("[reproduce] no cost prediction: bench/timings.json (the report it is calibrated on) is "
                      "missing; name another with --timings", flush=True)
            else:
                from .compute import text  # defers torch, which the planner's process loaded instead of this one

                print(text(predicted, workers), flush=True)
        return {"profile": profile, "notebooks": {nb: len(h) for nb, h in the_plan.readers.items()},
                "runs": len(runs), "to_train": len(pending), "stale": stale, "analyses": len(analyses),
                "waiting_for_searches": list(the_plan.incomplete), "runs_after_searches": later,
                "estimated_cost": sum(estimate_cost(c) for c in pending.values()), "predicted": predicted,
                "rehearsal_representatives": represented}

    out_dir = output_path("notebooks", profile, create=True)
    trace_dir = output_path("trace", profile, create=True)
    commit = git_commit(root, ("fedrepro", "notebooks"))  # -dirty when the code run differs from it
    t_start, cpu_start = time.perf_counter(), _cpu_seconds()
    searched: dict[str, float] = {}
    searched_memory: dict[str, dict] = {}
    searched_trained: set[str] = set()
    # One bar for the whole pass: what plan 1 knows (runs, analyses, renders, the tuned rows to
    # come); each stage grows it by what it names beyond that.
    bar = PassProgress(f"reproduce {profile} ({workers} workers)", enabled=progress)
    bar.expect(len(pending) + later + len(analyses) + (len(notebooks) if render else 0))
    with _Monitor() as monitor, bar:
        for _ in range(MAX_SEARCH_STAGES):
            if not the_plan.incomplete:
                break
            # A tuned table's rows are known once its learning-rate search is stored: the runs of
            # the notebooks that wait (their searches) train first, then the plan is made again and
            # everything else trains while the notebooks render.
            waiting = {h for nb in the_plan.incomplete for h in the_plan.readers.get(nb, [])}
            first = run_pool({h: c for h, c in runs.items() if h in waiting}, (), workers=workers,
                             progress=progress, pending=pending_hashes & waiting, executor=executor, bar=bar,
                             gpus=gpus, after=the_plan.waits)
            if first.failed:
                lines = "\n".join(f"  {k}: {v}" for k, v in list(first.failed.items())[:20])
                raise FedreproError(f"{len(first.failed)} tasks failed before the learning-rate searches finished "
                                    f"(what finished is stored; run again to retry the rest):\n{lines}")
            searched.update(first.done)
            searched_memory.update(first.memory)
            searched_trained |= first.trained
            notebooks, the_plan, workers, pending_hashes, stale, gpus, _ = planned(workers)
            runs, analyses = the_plan.runs, the_plan.analyses
            pending.update((h, c) for h, c in runs.items() if h in pending_hashes)
        else:
            raise FedreproError(f"{', '.join(the_plan.incomplete)} still wait for learning-rate searches after "
                                f"{MAX_SEARCH_STAGES} stages of training them; see fedrepro.execute.tuning")
        renders = _render_tasks(notebooks, nb_root, out_dir, trace_dir, profile, kernel, the_plan,
                                pending_hashes) if render else []
        pool = run_pool(runs, analyses, workers=workers, progress=progress, calls=renders,
                        calls_at_once=renders_at_once(profile, workers), pending=pending_hashes,
                        executor=executor, analyze=analyze, bar=bar, gpus=gpus, after=the_plan.waits)
        pool.done, pool.memory = {**searched, **pool.done}, {**searched_memory, **pool.memory}
        pool.trained |= searched_trained
        # Reading the reference archive (make figures) renders the stages its pass reached
        # (fedrepro.papers.claim_seeds plans them) and starts none beyond: a later stage would train
        # runs the archive's pages never rested on.
        for _ in range(MAX_SEED_STAGES if render and os.environ.get(ARCHIVE_ENV) != "read" else 0):
            if pool.failed:
                break
            # Sequential claims: once a stage is stored and its notebooks rendered, a claim still
            # INCONCLUSIVE below its max_seeds gets its next stage's seeds; those runs train and its
            # notebooks (and the claims summary) render again.
            with ProcessPoolExecutor(1, mp_context=mp.get_context("spawn")) as planner:
                staged = planner.submit(_seed_stage, profile, only, workers, runs_dir, str(output_root())).result()
            if staged is None:
                break
            again, (notebooks, the_plan, workers, stage_pending, stale, gpus, _) = staged
            runs, analyses = the_plan.runs, the_plan.analyses
            pending.update((h, c) for h, c in runs.items() if h in stage_pending)
            pending_hashes |= stage_pending
            rerender = [nb for nb in notebooks if str(nb.relative_to(nb_root)) in again or nb.name.startswith("99_")]
            stage = run_pool(runs, analyses, workers=workers, progress=progress,
                             calls_at_once=renders_at_once(profile, workers),
                             calls=_render_tasks(rerender, nb_root, out_dir, trace_dir, profile, kernel, the_plan,
                                                 stage_pending),
                             pending=stage_pending, executor=executor, analyze=analyze, bar=bar, gpus=gpus,
                             after=the_plan.waits)
            pool.done, pool.memory = {**pool.done, **stage.done}, {**pool.memory, **stage.memory}
            pool.trained |= stage.trained
            pool.failed = {**pool.failed, **stage.failed}
    wall = time.perf_counter() - t_start
    cpu = _cpu_seconds() - cpu_start
    cores = cpu_cores()
    if pool.failed:
        lines = "\n".join(f"  {k}: {v}" for k, v in list(pool.failed.items())[:20])
        raise FedreproError(f"{len(pool.failed)} tasks failed (what finished is stored; run again to retry the "
                            f"rest):\n{lines}")


    # What this process trained: the runs its pools' workers (or its executor) trained, not those
    # that were unfinished when the pass was planned (another pass over the same store may have
    # trained some of them meanwhile; their tasks here only waited for that pass's lock).
    own = pool.own()
    # A rehearsal's stand-ins, as stored: the plan's guess may have met a representative trained meanwhile.
    # (A real run is never a copy: a pass without rehearsal runs reads no run's meta.json for it.)
    represented = _copies(runs_dir, pending) if any(c.rehearsal for c in pending.values()) else {}
    copies = {h for others in represented.values() for h in others}
    # Copied, not trained, by the pool's workers: not trained elsewhere either.
    elsewhere = sorted(h for h in pool.done if h in pending and h not in pool.trained and h not in copies)
    report_nbs = []
    for nb in notebooks:
        rel = str(nb.relative_to(nb_root))
        events = trace.read(trace_dir / trace.notebook_file(rel))
        read = [e["hash"] for e in events if e["event"] == "run"]
        unplanned = sorted({e["hash"] for e in events if e["event"] == "run" and e["trained"]})
        hashes = the_plan.readers.get(rel, [])
        report_nbs.append({
            "notebook": rel, "render_s": round(pool.done.get(f"render:{rel}", 0.0), 1), "runs": len(hashes),
            "runs_read": len(set(read)), "unplanned_runs": unplanned,
            "train_s_of_its_runs": round(sum(own.get(h, 0.0) for h in hashes), 1),
            "analyses_s": round(sum(pool.done.get(f"{name}:{h}", 0.0) for name, h in the_plan.computes.get(rel, [])),
                                1),
            "figures": sorted({under_output_root(e["path"]) or e["path"] for e in events if e["event"] == "figure"})})
    by_sort = {"run": 0.0, "analysis": 0.0, "render": 0.0}
    for key, sec in own.items():
        by_sort["render" if key.startswith("render:") else "analysis" if ":" in key else "run"] += sec
    report = {
        "profile": profile, "only": only, "cores": cores, "workers": workers, "executor": executor.name,
        "wall_s": round(wall, 1), "cpu_s": round(cpu, 1), "cpu_use": round(cpu / (wall * cores), 3),
        "cpu": cpu_model(), "allocator": allocator.library() or "system", "commit": commit,
        # What the process tree held at its peak (PSS) and the upper bound that counts shared pages
        # once per process (RSS); see _Monitor.
        "peak_memory_mib": round(monitor.peak_pss / 2**20), "memory": monitor.to_dict(),
        "task_seconds": {k: round(v, 1) for k, v in by_sort.items()},
        "runs_planned": len(runs), "runs_trained": len(pool.trained),
        # Unfinished when planned, then trained by another process over the same store (not counted above).
        "runs_trained_elsewhere": elsewhere, "analyses_planned": len(analyses),
        # Stored runs found trained by other code (retrained unless FEDREPRO_STALE=keep) or not checkable.
        "stale_check": stale,
        "unplanned_runs": sum(len(n["unplanned_runs"]) for n in report_nbs),
        # A rehearsal's runs copied from the one run of their path key that trained (fedrepro.runs.represent).
        "rehearsal_representatives": represented,
        "notebooks": report_nbs,
        "tasks": {k: round(v, 2) for k, v in own.items()},
        "task_memory_mib": pool.memory,
    }
    from ..runs.store import atomic_write_bytes

    # A pass that renders nothing leaves the last full pass's report (the results pages read it) as it is.
    timings = out_dir / ("timings.json" if render else "timings-no-render.json")
    atomic_write_bytes(timings, json.dumps(report, indent=2).encode())
    print(f"[reproduce] {_count(len(notebooks), 'notebook') + ('' if render else ' (not rendered)')} in {wall:.0f} s "
          f"({len(pool.trained)} runs trained"
          + (f", {len(elsewhere)} more by another process over the same store" if elsewhere else "") + ", "
          f"{len(analyses)} analyses); CPU use {100 * report['cpu_use']:.0f}% of {cores} cores; peak memory "
          f"{report['peak_memory_mib']} MiB; timings in {under_output_root(timings) or timings}")
    if report["unplanned_runs"]:
        names = [f"{n['notebook']} ({len(n['unplanned_runs'])})" for n in report_nbs if n["unplanned_runs"]]
        print(f"[reproduce] warning: the plan missed {report['unplanned_runs']} runs that notebooks trained "
              f"themselves: {', '.join(names)}; add them to the paper's NOTEBOOKS")
    return report


def renders_at_once(profile: str, workers: int) -> int:
    """How many notebooks render at once. One, so that the other slots train meanwhile: a notebook's
    kernel is as large as a worker, and renders are a small share of a laptop or paper pass. At smoke
    they are most of it (a kernel's start and imports take longer than the notebook's runs), and
    its kernels are small: every slot may render."""
    return workers if profile == "smoke" else 1


def reused_runs(report: dict | None) -> int:
    """How many of a pass's planned runs it found stored and did not train (its report, the
    ``timings.json`` of :func:`reproduce`); 0 without a report."""
    report = report or {}
    return max(0, report.get("runs_planned", 0) - report.get("runs_trained", 0))


def _render_tasks(notebooks: list[Path], nb_root: Path, out_dir: Path, trace_dir: Path, profile: str, kernel: str,
                  the_plan, pending: set[str]) -> list:
    """One pool task per notebook, after its runs and analyses; ``99_*`` after all the others."""
    def render(nb: Path, rel: str):
        def call() -> float:
            target = out_dir / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            file = trace_dir / notebook_file(rel)
            seconds = _render(nb, target, profile, kernel, file, file.with_suffix(".log"))
            print(f"[reproduce] {rel}: {seconds:.1f} s", flush=True)
            return seconds
        return call

    tasks, others = [], []
    for nb in notebooks:
        rel = str(nb.relative_to(nb_root))
        if nb.name.startswith("99_"):
            continue
        deps = {h for h in the_plan.readers.get(rel, []) if h in pending}
        deps |= {f"{name}:{h}" for name, h in the_plan.computes.get(rel, [])}
        tasks.append(Task(f"render:{rel}", call=render(nb, rel), deps=frozenset(deps)))
        others.append(f"render:{rel}")
    for nb in notebooks:
        rel = str(nb.relative_to(nb_root))
        if nb.name.startswith("99_"):
            tasks.append(Task(f"render:{rel}", call=render(nb, rel), deps=frozenset(others)))
    return tasks


def _copies(runs_dir: str, hashes) -> dict[str, list[str]]:
    """The stored runs among ``hashes`` that a rehearsal copied from a representative, by it:
    ``{representative hash: [hashes]}`` (:mod:`fedrepro.runs.represent`)."""
    from ..runs.represent import represented_by  # defers pandas (the store), as the report's other reads do

    out: dict[str, list[str]] = {}
    for h in sorted(hashes):
        rep = represented_by(Path(runs_dir) / h)
        if rep is not None:
            out.setdefault(rep, []).append(h)
    return out


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")
