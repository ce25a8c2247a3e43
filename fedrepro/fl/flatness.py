"""The flatness rule: has a run's curve of evaluated accuracies stopped moving?

One definition, read by the engine's early stop (:mod:`fedrepro.fl.converge`, ``train.stop_when_flat``)
and by the convergence analyses (:mod:`fedrepro.analysis.by_round`, which re-exports it). It lives at
the engine's layer so that the engine may apply it; it needs nothing but numpy.

The rule (:func:`is_flat`): the mean over the last ``window`` evaluated rounds against the mean over
the ``window`` before (:func:`window_change`) has moved by less than half a point
(:data:`FLAT_TOLERANCE`) or by less than twice its own round-to-round noise (:func:`window_noise`,
:data:`FLAT_Z`), whichever is larger. The noise allowance matters for methods whose evaluated
accuracy jumps by a point or more from round to round without a trend: their window means never
agree to half a point, however long they train.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

FLAT_WINDOW = 5
FLAT_TOLERANCE = 0.005  # half a point of mean client accuracy
FLAT_Z = 2.0  # a change within two standard errors of the noise is not evidence of movement


def window_change(acc, window: int = FLAT_WINDOW) -> float:
    """The mean of the last ``window`` values of ``acc`` (a run's evaluated accuracies, in round
    order) minus the mean of the ``window`` before; NaN when there are fewer than ``2 * window``."""
    if len(acc) < 2 * window:
        return float("nan")
    return float(acc[-window:].mean() - acc[-2 * window:-window].mean())


def window_noise(acc, window: int = FLAT_WINDOW) -> float:
    """The standard error of :func:`window_change` that round-to-round noise alone would give.

    The noise σ of one evaluation is read off the first differences of the last ``2 * window``
    values (std of the differences / √2: a slow trend barely moves them); the difference of two
    means of ``window`` values then has standard error σ·√(2 / window). NaN when there are fewer
    than ``2 * window`` values."""
    if len(acc) < 2 * window:
        return float("nan")
    sigma = float(np.std(np.diff(np.asarray(acc[-2 * window:], dtype=float)), ddof=1)) / np.sqrt(2)
    return sigma * float(np.sqrt(2 / window))


def is_flat(change: float, noise: float, tol: float = FLAT_TOLERANCE, z: float = FLAT_Z) -> bool:
    """The flatness rule: ``|change|`` < max(``tol``, ``z`` · ``noise``); False when ``change`` is NaN
    (too few rounds to judge)."""
    if np.isnan(change):
        return False
    allowance = tol if np.isnan(noise) else max(tol, z * noise)
    return bool(abs(change) < allowance)


def judge(acc, window: int = FLAT_WINDOW, tol: float = FLAT_TOLERANCE,
          z: float = FLAT_Z) -> tuple[float, float, bool]:
    """One run's evaluated accuracies (in round order) under the rule: ``(last_change, noise,
    flat)`` (:func:`window_change`, :func:`window_noise`, :func:`is_flat`)."""
    change, noise = window_change(acc, window), window_noise(acc, window)
    return change, noise, is_flat(change, noise, tol, z)


def evaluated_acc(round_rows: Sequence[dict]) -> np.ndarray:
    """The engine's round rows' ``acc_mean`` over the evaluated rounds, in round order (the curve the
    rule reads; a round that was not evaluated has no ``acc_mean``)."""
    return np.asarray([r["acc_mean"] for r in round_rows if "acc_mean" in r], dtype=float)


def stops_at(round_: int, acc, window: int = FLAT_WINDOW, first: int = 0) -> bool:
    """The early stop's test (``train.stop_when_flat``) after evaluated round ``round_``, whose
    evaluated accuracies so far are ``acc``: the rule is met over ``window`` evaluated rounds and
    ``round_`` is ``first`` (``train.flat_from``) or later. The engine stops by it, and the
    analyses replay it on stored curves."""
    return round_ >= first and judge(acc, window)[2]
