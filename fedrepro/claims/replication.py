"""How firm a verdict is: the chance that an independent re-run at as many seeds returns it again.

Training amplifies the float differences between CPUs until a run on another machine is about as
far from ours as a run of a fresh seed (issue 56: re-running pFedCSPC's notebook 02 on another CPU
changed all 5 of its verdicts). So a re-run of a claim, on another machine or with other seeds,
draws its per-seed effects anew, and a verdict is only as firm as the chance that the new draw is
judged the same. This module estimates that chance from a test's per-seed effects.

**One test.** Its ``n`` per-seed effects have mean ``m`` and standard deviation ``s``; the claim
judges the t interval ``m ± c·s`` with ``c = t(level, n − 1)/√n`` (:func:`fedrepro.claims.core.t_interval`).
A re-run draws ``n`` new effects, of mean ``m'`` and SD ``s'``, and is judged on ``m' ± c·s'``
by the same rule. We take the true mean effect as unknown with a flat prior, so that, were the
seeds' spread σ known, ``m' ~ N(m, σ²·(1/n + 1/n))``: the uncertainty of the true mean (σ²/n) plus
the new sample's own (σ²/n). σ is not known, only ``s``, and at 3 seeds plugging ``s`` in for σ
(and the re-run's half-width ``c·s`` for its own) makes verdicts look firmer than they are: in the
simulation of ``tests/test_replication.py`` the verdicts it puts between 0.65 and 0.9 held 0.73 of
the time against the 0.80 it gave them. So the estimate also averages over σ and over the re-run's
``s'``: ``(n − 1)·s'²/σ² ~ χ²(n − 1)``, and σ as it is distributed given ``s`` when the true
effects are spread evenly about the bound (``(n − 1)·s²/σ² ~ χ²(n)``: a small ``s`` is more often a
lucky draw than a small σ). In that simulation it is calibrated: its chances match how often an
independent draw kept the verdict, on average and within each strength. Where the true effects of a
set of claims crowd their bounds more than an even spread does, it is optimistic. The chance of each
re-run verdict is then

    P(V) = E over (σ, s') of P(m' falls where an interval m' ± c·s' is judged V),

a normal probability for each stretch of ``m'`` between the points where an end of the interval
meets a value the rule compares it with (the bound, its negative, zero, the limits), judged by the
claim's own rule (``judge``) and integrated over σ and ``s'`` on a grid of :data:`NODES` ×
:data:`NODES` quantiles: exact for the model up to the grid (within 0.001 of a 400 × 400 one). It
assumes that a run on another machine behaves as a fresh draw of seeds, and holds the room
of a test with a ceiling fixed (the control's mean is measured again in a re-run; we do not model
that).

**A claim.** A claim needs every test (:func:`fedrepro.claims.core.combined`): FAIL if one fails,
else UNTESTABLE if one has no room, PASS if all pass, else INCONCLUSIVE. With the tests' re-runs
taken as independent, the claim's chances follow exactly from theirs (:func:`claim_chances`):
P(FAIL) = 1 − Π(1 − Fᵢ), P(UNTESTABLE) = Π(1 − Fᵢ) − Π(1 − Fᵢ − Uᵢ), P(PASS) = Π Pᵢ, and
P(INCONCLUSIVE) the rest. Tests that compare distinct runs are independent; tests that share an arm
(A − B and A − C) are not, and there the product is an approximation (three seeds cannot measure
the correlation between two tests' effects).

**Edge cases.** One seed: the rule's interval is unbounded, so a re-run at one seed is judged as
this one was (chance 1). No spread (every seed the same effect, ``s = 0``): nothing varies between
draws under the model, chance 1. A quantity no seed changes (an exact test): chance 1. A
non-finite effect: no estimate (None).

**Strength.** A chance reads as firm, likely or fragile by the thresholds of :data:`STRENGTHS`, the one
place they are set (the pages print them from there).
"""
from __future__ import annotations

import math
from functools import lru_cache
from typing import Callable, Iterable, Mapping, Sequence

import numpy as np

# The verdicts a test's re-run can return (as fedrepro.claims.core names them) and how a claim
# combines them (core.combined): the names are repeated here so that this module needs nothing of
# core, which calls it; tests/test_replication.py checks claim_chances against core.combined.
PASS, INCONCLUSIVE, FAIL, UNTESTABLE = "PASS", "INCONCLUSIVE", "FAIL", "UNTESTABLE"
# The quantiles per dimension of the grid over σ and the re-run's SD (NODES² points, equal weights).
NODES = 64
# How firm a verdict is, by its chance of holding on a re-run: the first whose threshold it reaches.
# Firm: a re-run overturns it at most one time in ten. Fragile: no firmer than a verdict whose interval
# ends right on its bound, which holds on a re-run 0.62 of the time at 3 seeds, 0.56 at 5 and 0.52 at
# 12 (a re-run's interval tends to be narrower than one that just reached the bound, so such a
# verdict holds a little more often than a coin; tests/test_replication.py checks it is fragile).
STRENGTHS = ((0.9, "firm"), (0.65, "likely"), (0.0, "fragile"))
# What the pages say where a record holds no estimate (an older record, a non-finite effect).
NOT_ESTIMATED = "not estimated"


def strength(chance: float | None) -> str:
    """``"firm"``, ``"likely"`` or ``"fragile"`` (:data:`STRENGTHS`); :data:`NOT_ESTIMATED` for None or NaN."""
    if chance is None or not math.isfinite(chance):
        return NOT_ESTIMATED
    return next(name for floor, name in STRENGTHS if chance >= floor)


def said(chance: float | None) -> str:
    """A chance as the pages print it: ``"firm, 0.97"``; :data:`NOT_ESTIMATED` without one. Two
    decimals, rounded down near 1 so that a chance below 1 never reads as a certainty."""
    if chance is None or not math.isfinite(chance):
        return NOT_ESTIMATED
    shown = math.floor(chance * 100) / 100 if chance > 0.995 else round(chance, 2)
    return f"{strength(chance)}, {shown:.2f}"


@lru_cache(maxsize=64)
def _grid(n: int) -> tuple[np.ndarray, np.ndarray]:
    """``(σ/s, s'/s)`` at the NODES² grid points for ``n`` seeds (module doc): σ/s = √((n−1)/Q) with Q
    at the midpoint quantiles of χ²(n), and s'/s = σ/s · √(Q'/(n−1)) with Q' those of χ²(n − 1)."""
    from scipy import stats

    u = (np.arange(NODES) + 0.5) / NODES
    sigma = np.sqrt((n - 1) / stats.chi2.ppf(u, n))
    new = np.sqrt(stats.chi2.ppf(u, n - 1) / (n - 1))
    return np.repeat(sigma, NODES), np.repeat(sigma, NODES) * np.tile(new, NODES)


def _certain(verdict: str) -> dict[str, float]:
    return {verdict: 1.0}


def rerun_chances(mean: float, sd: float, n: int, factor: float, judge: Callable[[float, float], str],
                 edges: Iterable[float]) -> dict[str, float] | None:
    """The chance of each verdict of a re-run of one test at ``n`` seeds (module doc), by verdict
    (those with chance 0 left out); None where ``mean`` (or, from 2 seeds, ``sd``) is not finite.

    ``mean``, ``sd``: the mean and SD (ddof 1) of its per-seed effects; ``factor``: the rule's
    half-width per SD at ``n`` seeds (t/√n at the test's level); ``judge(low, high)``: the verdict
    the claim gives an interval (:meth:`fedrepro.claims.core.Test.judge`); ``edges``: every value an
    end of the interval is compared with there (:attr:`fedrepro.claims.core.Test.edges`): the
    verdict of ``m' ± h`` changes only where ``m' = e ± h`` for an edge ``e``."""
    if n < 1 or not math.isfinite(mean):
        return None
    if n == 1:  # the rule's interval is unbounded at one seed, and so is the re-run's
        return _certain(judge(-math.inf, math.inf))
    if not math.isfinite(sd):
        return None
    if sd == 0:
        return _certain(judge(mean, mean))
    from scipy.special import ndtr

    edges = np.unique([float(e) for e in edges if math.isfinite(e)])
    sigma, new = _grid(n)
    half = factor * sd * new              # the re-run's half-width at each grid point
    spread = sd * sigma * math.sqrt(2.0 / n)   # SD of the re-run's mean about ours
    # Between two consecutive crossings h = (e_j − e_i)/2 the points e ± h keep their order, so the
    # verdict of each stretch between them is one: judged once per range, at a half-width inside it.
    cuts = np.unique(np.concatenate([[0.0], [(b - a) / 2 for i, a in enumerate(edges) for b in edges[i + 1:]]]))
    tops = np.append(cuts[1:], np.inf)
    out: dict[str, float] = {}
    for low, top in zip(cuts, tops):
        inside = (half >= low) & (half < top)
        if not inside.any():
            continue
        h = (low + top) / 2 if math.isfinite(top) else low + 1.0
        signs = np.concatenate([edges - h, edges + h])
        order = np.argsort(signs, kind="stable")
        points = signs[order]
        mids = np.concatenate([[points[0] - 1.0], (points[1:] + points[:-1]) / 2, [points[-1] + 1.0]])
        verdicts = [judge(x - h, x + h) for x in mids]
        # The same points at each grid half-width in the range, in the same order.
        hs = half[inside][:, None]
        at = np.concatenate([edges[None, :] - hs, edges[None, :] + hs], axis=1)[:, order]
        cdf = ndtr((at - mean) / spread[inside][:, None])
        mass = np.diff(np.concatenate([np.zeros((len(hs), 1)), cdf, np.ones((len(hs), 1))], axis=1), axis=1)
        for k, verdict in enumerate(verdicts):
            out[verdict] = out.get(verdict, 0.0) + float(mass[:, k].sum()) / half.size
    return {v: p for v, p in out.items() if p > 0}


def claim_chances(tests: Sequence[Mapping[str, float] | None]) -> dict[str, float] | None:
    """The chance of each verdict of a re-run of a claim that needs every test (module doc), from each
    test's (:func:`rerun_chances`), the tests' re-runs independent; None where one test has none."""
    if not tests or any(t is None for t in tests):
        return None
    fail = [t.get(FAIL, 0.0) for t in tests]
    untestable = [t.get(UNTESTABLE, 0.0) for t in tests]
    no_fail = math.prod(1.0 - f for f in fail)
    neither = math.prod(max(0.0, 1.0 - f - u) for f, u in zip(fail, untestable))
    passes = math.prod(t.get(PASS, 0.0) for t in tests)
    out = {FAIL: 1.0 - no_fail, UNTESTABLE: no_fail - neither, PASS: passes, INCONCLUSIVE: neither - passes}
    return {v: min(1.0, max(0.0, p)) for v, p in out.items() if p > 1e-12}


def same_verdict(chances: Mapping[str, float] | None, verdict: str) -> float | None:
    """The chance that a re-run returns ``verdict`` (0 where it cannot); None without ``chances``."""
    return None if chances is None else float(chances.get(verdict, 0.0))
