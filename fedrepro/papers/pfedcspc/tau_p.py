"""PMI's temperature τ_p chosen per row of a table, on that row's own validation objective.

pFedCSPC (TNNLS) Eq. 4 weighs client k''s encoder in client k's initial model by
softmax(−L_sup(U_k; M_k') / τ_p) and gives no τ_p. A τ_p chosen for one row does not carry over to
another: the full method's (notebook 07, on its validation I_local) concentrated the FedAvg chain's
weights of Table V on 2.7-4.2 effective clients of 10, each round restarting from a near-single-client
encoder, and cost that row 3.5 points of I_local (4.7 of global accuracy) at 15 rounds against
τ_p = 1 (fail-audit E2, 3 seeds). So every row that uses
PMI in Tables V and VI searches its own τ_p, as Tables II and III search every row's learning rate:

- the same grid (:func:`fedrepro.papers.pfedcspc.tables.tau_p_grid`) and the same budget for every
  row: the row's own config and rounds, at the tuning seed (:data:`~fedrepro.execute.tuning.TUNING_SEED`,
  which no claim reads), with a fifth of each client's training split held out as its test split
  (``data.validation``; the global test split is their union), so no test image is read;
- scored by the row's own objective: I_local for Table V (its table scores I_local), the global
  model's accuracy for Table VI (its table scores ACC_global);
- chosen by the learning-rate searches' rule (:mod:`fedrepro.execute.tuning`), which decides only
  what the validation data can tell apart, with the neutral τ_p = 1 where it cannot
  (:data:`TAU_P_SEARCH_RULE`).

:class:`TauPSearch` is :class:`~fedrepro.execute.tuning.LrSearch` with τ_p as the searched value
(its runs are ordinary stored runs; :class:`~fedrepro.execute.tuning.TuningPending` until they are
stored). Its decision is a :class:`~fedrepro.execute.tuning.SearchDecision`, shown beside each row by
:meth:`TauPSearch.table`: every candidate's validation score, the winner's margin over the
runner-up with its standard error, the rule that chose, and how many clients the chosen candidate's
weights effectively draw on.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from ...config import RunConfig
from ...execute.tuning import (MIN_VALIDATION_IMAGES, LrSearch, SearchDecision,
                               TuningPending, decide, decision_columns)
from ...methods.pfedcspc import PFedCSPCParams
from ...params import hp
from ...runs.store import RunResult, RunStore
from ...runs.train import is_stale, on_stale_policy
from .metrics import by_seed_and_client, local_units, paired_se, run_scores
from .pmi import NEUTRAL_TAU_P, RULE_NEUTRAL, SPREAD, pmi_spread

TAU_P = "method.args.tau_p"
LOCAL, GLOBAL = "final_i_local_mean", "final_global_acc"
# The neutral τ_p: the method's default, the least selective value of every grid (at τ_p = 1 the
# laptop's weights are close to uniform, fail-audit E2).
NEUTRAL = NEUTRAL_TAU_P

TAU_P_SEARCH_RULE = (
    "Each PMI row's τ_p: every τ_p of the grid trains the row's own config for its own rounds at the tuning seed "
    "(which no claim reads), with a fifth of each client's training images held out as validation data, and is "
    "scored by the row's own objective (Table V: I_local; Table VI: the global model's accuracy). As in the "
    "learning-rate searches, the best τ_p wins outright only if it was scored on at least "
    f"{MIN_VALIDATION_IMAGES} validation images and beats every other τ_p by more than the standard error of "
    "their difference (over the clients, paired by client, for I_local; binomial over the validation images, as "
    "if unpaired, for the global accuracy). Otherwise the τ_p the data cannot tell from the best are the "
    f"candidates: τ_p = {NEUTRAL:g} (the method's default, the least selective, the neutral value; the paper gives "
    "none) if it is among them, else the median candidate. The standard error is the noise of the tuning seed's "
    "evaluation, not the seed-to-seed noise, which one seed cannot measure.")


def _taus(grid) -> bool:
    try:
        return (len(grid) >= 2 and len(set(grid)) == len(grid)
                and all(isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 for v in grid))
    except TypeError:
        return False


def decide_tau_p(scores: Mapping[float, float], ranked: Sequence[float], n_images: int,
                 se: Callable[[float, float], float], neutral: float = NEUTRAL, n_pairs: int = 0,
                 seeds: Sequence[int] = ()) -> SearchDecision:
    """The learning-rate searches' rule (:func:`fedrepro.execute.tuning.decide`) with ``se(a, b)``
    the standard error of ``scores[a] − scores[b]`` and the neutral τ_p where the paper's rate would
    be: ``ranked`` best first (ties already broken), ``n_images`` validation images in all."""
    return decide(scores, ranked, n_images, se, neutral, RULE_NEUTRAL, n_pairs, seeds)


@dataclass(frozen=True)
class TauPSearch(LrSearch):
    """``method.args.tau_p`` per row, from ``grid``, on validation data at the tuning seed(s), by the
    row's ``metric`` (:data:`LOCAL` or :data:`GLOBAL`) and :func:`decide_tau_p` (``neutral``);
    ``row_name`` names a row in :meth:`table` (default: the caller's label). The other fields are
    :class:`~fedrepro.execute.tuning.LrSearch`'s; ``halving`` and ``paper_rate`` are not supported (the
    paper gives no τ_p)."""

    grid: tuple[float, ...] = hp(check=_taus, valid="two or more distinct temperatures > 0")
    metric: str = hp(LOCAL, choices=(LOCAL, GLOBAL))
    key: str = hp(TAU_P, choices=(TAU_P,))
    neutral: float = hp(NEUTRAL, gt=0)
    row_name: Callable[[RunConfig], str] | None = hp(None)
    # Every τ_p trains the row's rounds, and the paper gives no τ_p to fall back on.
    halving: float = hp(0.0, choices=(0.0,))
    paper_rate: float | None = hp(None, check=lambda v: v is None, valid="None (the paper gives no τ_p)")

    def rate(self, cfg: RunConfig) -> float:
        """``cfg``'s τ_p (the method's default where its config sets none)."""
        return float(cfg.method.args.get("tau_p", NEUTRAL))

    def results(self, cfg: RunConfig) -> dict[tuple[float, int], RunResult]:
        """Each of the row's stored search runs by (τ_p, seed); raises
        :class:`~fedrepro.execute.tuning.TuningPending` naming those not stored (or stale under the
        stale policy, so they will be trained anew)."""
        runs, policy = self.full_configs(cfg), on_stale_policy()
        missing = [c for c in runs if RunStore(c.runs_dir).status(c) != "done"
                   or is_stale(RunStore(c.runs_dir), c, policy)]
        if missing:
            raise TuningPending(missing)
        return {(self.rate(c), c.seed): RunStore(c.runs_dir).load(c) for c in runs}

    def _score(self, res: RunResult) -> float:
        v = run_scores(res).get(LOCAL) if self.metric == LOCAL else res.summary.get(GLOBAL)
        return float("-inf") if v is None or v != v else float(v)

    def scores(self, cfg: RunConfig) -> dict[float, float]:
        """Validation score per τ_p, the mean over the tuning seeds (−inf where a run diverged)."""
        per: dict[float, list[float]] = {}
        for (tau, _), res in self.results(cfg).items():
            per.setdefault(tau, []).append(self._score(res))
        return {tau: float(np.mean(v)) if all(math.isfinite(x) for x in v) else float("-inf")
                for tau, v in per.items()}

    def units(self, cfg: RunConfig) -> tuple[dict[float, pd.Series], int]:
        """``(values by τ_p, n_images)``: per τ_p, the per-client I_local over the tuning seeds, indexed by
        (seed, client) (for the global accuracy, one value per seed); and the validation images one
        τ_p's runs were scored on, summed over the seeds."""
        parts: dict[float, list[pd.Series]] = {}
        images: dict[float, int] = {}
        for (tau, seed), res in self.results(cfg).items():
            if self.metric == LOCAL:
                values, n = local_units(res)
            else:
                values, n = pd.Series([self._score(res)], index=[-1]), local_units(res)[1]
            parts.setdefault(tau, []).append(by_seed_and_client(values, seed))
            images[tau] = images.get(tau, 0) + n
        return {tau: pd.concat(p) for tau, p in parts.items()}, max(images.values(), default=0)

    def decide(self, cfg: RunConfig) -> SearchDecision:
        """:data:`TAU_P_SEARCH_RULE` for ``cfg``'s row from its stored search runs; raises
        :class:`~fedrepro.execute.tuning.TuningPending` until they are stored. The standard error of
        two τ_p's difference: over their paired (seed, client) I_local values, or for the global
        accuracy binomial over the validation images (the two taken as independent, which overstates
        it: they are scored on the same images)."""
        scores = self.scores(cfg)
        units, n_images = self.units(cfg)
        ranked = self.ranked(scores, self.neutral)  # a tie goes to the τ_p nearest the neutral one

        def se(a: float, b: float) -> float:
            if self.metric == GLOBAL:
                pa, pb = scores[a], scores[b]
                ok = n_images > 0 and math.isfinite(pa) and math.isfinite(pb)
                return math.sqrt((pa * (1 - pa) + pb * (1 - pb)) / n_images) if ok else math.inf
            return paired_se(units[a], units[b])

        n_pairs = len(units[ranked[0]]) if self.metric == LOCAL else 0
        return decide_tau_p(scores, ranked, n_images, se, self.neutral, n_pairs, self.seeds)

    def table(self, cfgs: Sequence[RunConfig], label: Callable[[RunConfig], str]) -> pd.DataFrame:
        """One row per searched row of ``cfgs``: its objective, each τ_p's validation score, the τ_p
        chosen and the decision (:func:`~fedrepro.execute.tuning.decision_columns`: the best τ_p's
        margin over the runner-up in the metric's units, its SE, the validation images, the rule), and
        how many clients the chosen τ_p's tuning run's final PMI weights effectively draw on
        (:func:`~.pmi.weight_spread`; at the first tuning seed)."""
        name = self.row_name or label
        searched = [c for c in cfgs if self.searched(c)]
        several = len({c.data.dataset for c in searched}) > 1
        rows, seen = [], set()
        for cfg in searched:
            row = name(cfg) + (f" · {cfg.data.dataset}" if several else "")
            if row in seen:
                continue
            seen.add(row)
            scores, d = self.scores(cfg), self.decide(cfg)
            chosen = self.results(cfg)[(d.rate, self.seeds[0])]
            rows.append({"row": row, "objective": "I_local" if self.metric == LOCAL else "ACC_global",
                         **{f"τ_p={t:g}": scores.get(float(t), float("nan")) for t in self.grid},
                         "chosen τ_p": d.rate, **decision_columns(d, "τ_p"),
                         "sources (chosen, tuning run)": pmi_spread(chosen)["pmi_effective_sources"]})
        return pd.DataFrame(rows).set_index("row") if rows else pd.DataFrame()


def tau_p_rows(table, results: pd.DataFrame, profile: str, base: RunConfig | None = None) -> pd.DataFrame:
    """A PMI table's τ_p beside its rows: its search (:meth:`TauPSearch.table`, on validation data at
    the tuning seed) joined with how concentrated each row's PMI weights are in the table's own runs
    (:data:`~.pmi.SPREAD`, mean over its seeds: ``pmi_effective_sources`` of N clients, the self-weight
    and the largest weight). ``table``: a :class:`~fedrepro.papers.tables.TableDef` whose ``tune`` is a
    :class:`TauPSearch` and whose ``derive`` adds :data:`~.pmi.SPREAD`; ``results``: its ``run`` (on
    ``base`` where it ran on one)."""
    search = table.search(profile)
    cfgs = table.configs(profile, base=base, tuned=False)
    found = search.table(cfgs, lambda c: c.method.name) if search is not None else pd.DataFrame()
    col = table.variant_col
    first = table.first_column(results)
    spread = first[first[list(SPREAD)].notna().any(axis=1)].groupby(col, sort=False)[list(SPREAD)].mean()
    spread = spread.rename(columns={c: f"{c} (claim seeds)" for c in SPREAD})
    # At the paper profile the search names each dataset's rows apart ("row · dataset"); the spread
    # is the first column's (the table's own figures read that column too).
    if found.empty:
        return spread
    order = [*spread.index, *(r for r in found.index if r not in spread.index)]  # the table's row order
    return found.join(spread, how="outer").reindex(order)


def searched_pmi(cfg: RunConfig) -> bool:
    """A row that uses PMI: pFedCSPC with ``pmi`` on."""
    return cfg.method.name == "pfedcspc" and bool(cfg.method.args.get("pmi", PFedCSPCParams().pmi))


def tau_p_search(grid: Sequence[float], metric: str, row_name: Callable[[RunConfig], str],
                 only: Callable[[RunConfig], bool] | None = None) -> TauPSearch:
    """The search of a PMI table: every row that uses PMI (:func:`searched_pmi`, and ``only`` where
    given), over ``grid``, by ``metric``."""
    def applies(cfg: RunConfig) -> bool:
        return searched_pmi(cfg) and (only is None or bool(only(cfg)))

    return TauPSearch(grid=tuple(float(t) for t in grid), metric=metric, row_name=row_name, applies=applies)
