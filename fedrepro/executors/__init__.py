"""Where a grid's runs train: an executor, chosen by name, with typed and validated options.

- ``local`` (the default): worker processes on this machine (:mod:`fedrepro.pool`);
- ``ray``: tasks on a Ray cluster, local or remote (:mod:`fedrepro.executors.ray_cluster`).

Whichever trains a run, it is stored the same way: the same folder (its config hash), the same
files, the same numbers (each run at the thread count its config fixes). ``run_grid``,
``TableDef.run`` and ``fedrepro reproduce`` take ``executor=`` (a name, or an executor object with
its options); the CLI takes ``--executor ray --ray-address ... --cpus-per-run N --gpus-per-run N``.
"""
from __future__ import annotations

from .base import EXECUTORS, Executor, LocalExecutor, RunOutcome, make_executor
from . import ray_cluster  # noqa: F401  (registers "ray"; ray itself is imported only when used)
from .ray_cluster import RayExecutor

__all__ = ["EXECUTORS", "Executor", "LocalExecutor", "RayExecutor", "RunOutcome", "make_executor"]
