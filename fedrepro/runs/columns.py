"""How stored runs' tables are shown: round columns in a fixed order, per-client scores of clients
without test data left empty, and fractions as percentages. The store and the catalog both use them."""
from __future__ import annotations

import math
from typing import Any

import pandas as pd

# The per-round columns shown first, in this order; the rest follow alphabetically.
ROUND_COLUMNS_FIRST = ("round", "acc_mean", "acc_weighted", "acc_std", "acc_min", "acc_max", "f1_mean",
                       "global_acc", "heldout_acc_mean", "loss_mean", "train_loss", "n_sampled",
                       "time_train_s", "time_eval_s")


# The columns a run's tables always have, even with no row (a run that diverged in its first round
# stores none): readers select on them without checking first.
ROUND_COLUMNS_ALWAYS = ("round", "acc_mean", "time_train_s", "time_eval_s")
CLIENT_COLUMNS_ALWAYS = ("round", "client", "held_out", "acc", "loss", "n_test")


def with_columns(frame: pd.DataFrame, columns) -> pd.DataFrame:
    """``frame`` with each of ``columns`` it lacks added, empty (only an empty frame lacks them)."""
    missing = [c for c in columns if c not in frame.columns]
    return frame.assign(**{c: pd.Series(dtype=float) for c in missing}) if missing and frame.empty else frame


def order_round_columns(frame: pd.DataFrame) -> pd.DataFrame:
    """``round`` and the main metrics first (:data:`ROUND_COLUMNS_FIRST`), the rest alphabetically."""
    first = [c for c in ROUND_COLUMNS_FIRST if c in frame.columns]
    return frame[first + sorted(c for c in frame.columns if c not in first)]


def blank_untested(clients: pd.DataFrame) -> pd.DataFrame:
    """Per-client rows with the scores of clients without test data (``n_test`` 0) empty (NaN): runs
    stored before such rows were written empty hold 0.0 there, which would read as 0% accuracy."""
    if clients.empty or "n_test" not in clients:
        return clients
    untested = pd.to_numeric(clients["n_test"], errors="coerce") == 0
    if not untested.any():
        return clients
    clients = clients.copy()
    for col in ("acc", "loss", "f1"):
        if col in clients:
            clients[col] = clients[col].astype(float).mask(untested)
    return clients


def percent(x: Any, digits: int = 2) -> str:
    """A fraction as a percentage for display (``"-"`` when missing)."""
    try:
        v = float(x)
    except (TypeError, ValueError):
        return "-"
    return "-" if math.isnan(v) else f"{100 * v:.{digits}f}"
