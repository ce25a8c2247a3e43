"""Optional TensorBoard logging of a trained run's per-round metrics, for watching long runs.

Off by default. ``fedrepro.env.settings.configure(tensorboard=DIR)``, ``$FEDREPRO_TENSORBOARD=DIR`` or
``fedrepro run|reproduce --tensorboard DIR`` turn it on; then every run this process (or its pool's
workers) trains writes, after each round, every numeric column of that round's record (the
``rounds.jsonl`` line: ``acc_mean``, ``acc_weighted``, ``train_loss``, ``global_acc``, ...) as a
scalar whose step is the round, and a histogram of the clients' accuracies (``clients/acc``) in
evaluated rounds, to ``DIR/<method>-<dataset>-s<seed>-<config hash>/``. A stored run that is reused
writes nothing. The log is a side output: it is not in the run's folder nor its config hash, and
the run's numbers are the same with it or without it.

A process that trains a run writes a new event file whose first event purges the steps from 1 on
(``SummaryWriter(purge_step=1)``), then writes every round its state holds: a resumed run rewrites
the rounds of its checkpoint, and TensorBoard shows each round once, as stored, even where an
interrupted process had logged rounds past its last checkpoint.
"""
from __future__ import annotations

import importlib
import math
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ..errors import ConfigError
from ..env.settings import ENV_TENSORBOARD, ensure_writable, tensorboard_dir

TENSORBOARD_PIN = "2.21.0"  # requirements.txt's pin (tests/test_tensorboard.py checks they agree)


def run_dir_name(cfg) -> str:
    """The run's sub-folder of the log folder: readable first (TensorBoard lists runs by folder
    name), the config hash last (it tells runs of the same method, dataset and seed apart)."""
    return f"{cfg.method.name}-{cfg.data.dataset}-s{cfg.seed}-{cfg.hash()}"


def require() -> Path | None:
    """The log folder, created and checked (:func:`check`), or None when logging is off; nothing
    happens, and tensorboard is never imported, when it is off."""
    chosen = tensorboard_dir()
    return None if chosen is None else check(*chosen)


def check(root: Path, by: str) -> Path:
    """Create the log folder ``root``; a ConfigError naming ``by`` (the setting that chose it) when
    the tensorboard package is not installed or the folder cannot be written."""
    hint = f"set {by} to a writable folder, or unset it (and ${ENV_TENSORBOARD}) to log nothing"
    try:
        importlib.import_module("tensorboard")
    except ImportError:
        raise ConfigError(f"TensorBoard logging is on ({by} = {str(root)!r}) but the tensorboard package is not "
                          f"installed: pip install tensorboard=={TENSORBOARD_PIN}, or unset {by} to log "
                          f"nothing") from None
    return ensure_writable(root, by, what="TensorBoard logs", hint=hint)


class RoundLogger:
    """An ``on_round_end`` callback that writes each new round of a run's state to its log folder.
    The writer opens at the first round, so a run found finished after waiting for its lock leaves
    no empty log behind."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.writer = None
        self.logged = 0  # rounds of state.round_rows written so far

    def __call__(self, state) -> None:
        if self.writer is None:
            from torch.utils.tensorboard import SummaryWriter

            self.writer = SummaryWriter(log_dir=str(self.folder), purge_step=1)
        for row in state.round_rows[self.logged:]:
            step = int(row["round"])
            for key, value in row.items():
                if key != "round" and isinstance(value, (int, float)) and not isinstance(value, bool):
                    self.writer.add_scalar(key, value, step)
            accs = [r["acc"] for r in state.client_rows if r["round"] == step and not r["held_out"]
                    and r["n_test"] > 0 and not math.isnan(r["acc"])]
            if accs:
                self.writer.add_histogram("clients/acc", np.asarray(accs, dtype=np.float64), step)
        self.logged = len(state.round_rows)
        self.writer.flush()  # a long run is watched while it trains

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


def round_logger(cfg) -> RoundLogger | None:
    """The logger of the run of ``cfg``, or None when logging is off (see :func:`require`)."""
    root = require()
    return None if root is None else RoundLogger(root / run_dir_name(cfg))


def chain(*callbacks: Callable[[Any], Any] | None) -> Callable[[Any], None] | None:
    """One ``on_round_end`` callback that calls each given one in turn (None when none is given)."""
    given = [c for c in callbacks if c is not None]
    if not given:
        return None
    if len(given) == 1:
        return given[0]

    def both(state) -> None:
        for c in given:
            c(state)

    return both
