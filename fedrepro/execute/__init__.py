"""Where runs train: one run (:mod:`.run`), grids of runs (:mod:`.grid`), and the executors that train
a grid's pending runs, chosen by name with typed and validated options.

- ``local`` (the default): worker processes on this machine (:mod:`fedrepro.execute.local`);
- ``ray``: tasks on a Ray cluster, local or remote (:mod:`fedrepro.execute.ray`).

Whichever trains a run, it is stored the same way: the same folder (its config hash), the same
files, the same numbers (each run at the thread count its config fixes). ``run_grid``,
``TableDef.run`` and ``fedrepro reproduce`` take ``executor=`` (a name, or an executor object with
its options); the CLI takes ``--executor ray --ray-address ... --cpus-per-run N --gpus-per-run N``.
"""
from __future__ import annotations

from .executors import EXECUTORS, Executor, RunOutcome, make_executor
from .local import LocalExecutor
from .ray import RayExecutor

__all__ = ["EXECUTORS", "Executor", "LocalExecutor", "RayExecutor", "RunOutcome", "make_executor"]
