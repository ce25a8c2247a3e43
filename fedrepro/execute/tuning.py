"""Learning rates chosen on validation data, with the same search for every row of a table.

A table that compares methods gives each the same budget: every row (a method, or a method with
its own arguments) tries every learning rate of one grid, on its own config with a share of the
training split held out as validation data (``data.validation``; the test split is never read),
at seeds that no claim reads (:data:`TUNING_SEED` and, with ``repeats``, the seeds after it: a
claim's seeds count up from 0, to 12 at most), so that no claim's runs share a seed and a split with
the search that chose their rate. The rate is the row's for every seed of the table. A row that
still fails to learn at its best rate is a straw man of the table, not of the tuning, and the
notebook shows it apart.

**A search decides only what its validation data can tell apart** (:meth:`LrSearch.decide`). A
rate's score is its mean validation score over the tuning seeds. The best rate wins outright only
when (a) its runs were scored on at least :data:`MIN_VALIDATION_IMAGES` validation images in all
(every tuning seed's, summed), and (b) it beats every other rate by more than the standard error
of their paired difference, computed from the per-client differences (each client at each tuning
seed is one pair; a metric without per-client values pairs the seeds). Otherwise the rates that
data cannot tell from the best (all the scored rates when there is too little data) are the
candidates, and a stated rule picks one: the paper's own rate (``paper_rate``) if it is among them,
else the median candidate (by value; the lower of the two middle ones for an even count). The
decision, its margin (the best rate's score minus the runner-up's), the standard error, the number
of validation images and the rule are kept with it (:class:`SearchDecision`) and shown beside every
searched row (:meth:`LrSearch.table`).

The search runs are ordinary runs (stored, reused, fingerprinted). Until all of a row's search
runs are stored, its rate is unknown: :meth:`LrSearch.choose` raises :class:`TuningPending`
with the runs to train, which ``TableDef.run`` trains first and ``fedrepro reproduce`` trains
before planning the table again.
"""
from __future__ import annotations

import math
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping, Sequence

import numpy as np
import pandas as pd

from ..config import RunConfig
from ..errors import ConfigError, FedreproError
from ..runs.store import RunResult, RunStore
from ..params import check_fields, hp


class TuningPending(FedreproError):
    """A table's row cannot be configured before its search runs are stored; ``configs`` lists them."""

    def __init__(self, configs: Sequence[RunConfig]):
        self.configs = list(configs)
        super().__init__(f"{len(self.configs)} learning-rate search runs are not stored yet")


# Inside provisional_rates: the search runs that rows kept their setup's rate for (else None).
_WAITING: ContextVar[list[RunConfig] | None] = ContextVar("provisional_rates", default=None)


@contextmanager
def provisional_rates() -> Iterator[list[RunConfig]]:
    """Inside, a row whose search is not stored keeps its setup's rate instead of raising
    :class:`TuningPending`, and the search runs it waits for are collected in the list this yields:
    to plan a pass's cost before its searches train (a run's size does not depend on its rate)."""
    waiting: list[RunConfig] = []
    token = _WAITING.set(waiting)
    try:
        yield waiting
    finally:
        _WAITING.reset(token)


# The search's first seed: none of the claim seeds (0, 1, 2, ... up to a sequential claim's 12) nor the
# table seeds (0, 1, 2), so that a claim never reads the seed its rates were chosen at. A search with
# ``repeats`` also runs at the seeds after it (1001, 1002, ...).
TUNING_SEED = 1000
# The rates a search may choose: the step size of every parameter, or of the prompts alone.
SEARCH_KEYS = ("train.lr", "train.prompt_lr")
# The fewest validation images (over all tuning seeds) on which a search may pick its best rate outright;
# below it the stated rule picks (LrSearch.decide). At 100 images one image moves a score by a point.
MIN_VALIDATION_IMAGES = 100
# How a decision was made (SearchDecision.rule).
RULE_MARGIN = "best by more than its SE"
RULE_PAPER = "within noise: the paper's rate"
RULE_MEDIAN = "within noise: the median candidate"
TOO_LITTLE = "too little data"


def _rates(grid: Any) -> bool:
    """Two or more learning rates, each a number > 0, none repeated (it would be trained twice)."""
    try:
        return (len(grid) >= 2 and len(set(grid)) == len(grid)
                and all(isinstance(v, (int, float)) and v > 0 for v in grid))
    except TypeError:  # not a sequence of hashable values
        return False


@dataclass(frozen=True)
class SearchDecision:
    """How a search chose a row's rate: ``rate`` (the one the row trains at), ``best`` (the highest
    validation score) and ``runner_up`` (the second), ``margin`` (best − runner-up, in the metric's
    units; +inf when the runner-up diverged), ``se`` (the standard error of their paired difference),
    ``n_images`` (validation images, summed over the tuning seeds), ``n_pairs`` (the paired units: clients
    × seeds, or seeds), ``seeds`` (the tuning seeds), ``candidates`` (the rates the data cannot tell
    from the best, or every scored rate with too little data) and ``rule`` (:data:`RULE_MARGIN`, or
    the rule that picked among the candidates, prefixed with :data:`TOO_LITTLE` when ``n_images`` <
    :data:`MIN_VALIDATION_IMAGES`)."""

    rate: float
    best: float
    runner_up: float | None
    margin: float
    se: float
    n_images: int
    n_pairs: int
    seeds: tuple[int, ...]
    candidates: tuple[float, ...]
    rule: str

    @property
    def too_little_data(self) -> bool:
        return self.rule.startswith(TOO_LITTLE)

    @property
    def separated(self) -> bool:
        """Whether the best rate won on its margin (not by the rule)."""
        return self.rule == RULE_MARGIN

    def text(self, key: str = "lr", scale: float = 100.0, unit: str = " pts") -> str:
        """One line: the rate, the margin and its SE, the data behind it and the rule."""
        if self.runner_up is None:
            vs = "no runner-up"
        else:
            m = "+∞" if math.isinf(self.margin) else f"{scale * self.margin:+.2f}{unit}"
            vs = f"{key} {self.best:g} {m} over {key} {self.runner_up:g} (SE {scale * self.se:.2f}{unit})"
        return (f"{key} {self.rate:g} ({self.rule}): {vs}; {self.n_images} validation images over "
                f"{len(self.seeds)} tuning seed{'s' if len(self.seeds) != 1 else ''}")


# Per-unit validation values of a stored run, by (path, summary file stamp, metric): decide() reads each
# search run once per process however many rows and seeds ask for it.
_UNITS: dict[tuple, tuple[pd.Series, int]] = {}


def _client_column(metric: str) -> tuple[str, str] | None:
    """``(when, column)`` of a per-client metric (``final_acc_mean`` -> ``("final", "acc")``), else None."""
    when, _, rest = metric.partition("_")
    if when not in ("final", "best") or not rest.endswith("_mean"):
        return None
    return when, rest.removesuffix("_mean")


def run_units(result: RunResult, metric: str) -> tuple[pd.Series, int]:
    """``(values, n_images)`` of one stored search run: its per-client ``metric`` at the round the
    metric reads (the final round, or the best round for ``best_*``) over the participating clients
    with a score, indexed by client, and their validation images; a metric that is no per-client
    mean gives the run's one value (index -1) and the images of the final round."""
    summary = result.summary
    f = result.path / "summary.json"
    try:
        stat = f.stat()
        stamp = (stat.st_mtime_ns, stat.st_size)
    except OSError:
        stamp = None
    key = (str(result.path), stamp, metric)
    if stamp is not None and key in _UNITS:
        return _UNITS[key]
    clients = result.clients
    spec = _client_column(metric)
    if clients.empty:
        out = pd.Series(dtype=float), 0
    else:
        if spec is not None and spec[0] == "best" and summary.get("best_round"):
            at = summary["best_round"]
        else:
            at = clients["round"].max()
        rows = clients[(clients["round"] == at) & ~clients["held_out"].fillna(False).astype(bool)]
        if spec is not None and spec[1] in rows:
            scored = rows[rows[spec[1]].notna()]
            out = (pd.Series(scored[spec[1]].to_numpy(dtype=float), index=scored["client"].astype(int)),
                   int(scored["n_test"].fillna(0).sum()))
        else:
            v = summary.get(metric)
            value = float("nan") if v is None else float(v)
            out = pd.Series([value], index=[-1]), int(rows["n_test"].fillna(0).sum())
    if stamp is not None:
        _UNITS[key] = out
    return out


def _paired(a: pd.Series, b: pd.Series) -> tuple[float, float, int]:
    """``(mean, standard error, n)`` of the paired differences a − b over their common units (SE +inf
    with fewer than two pairs: nothing to estimate the noise from)."""
    if a.empty or b.empty:
        return float("nan"), math.inf, 0
    common = a.index.intersection(b.index)
    d = (a.loc[common] - b.loc[common]).to_numpy(dtype=float)
    d = d[np.isfinite(d)]
    if d.size == 0:
        return float("nan"), math.inf, 0
    se = float(d.std(ddof=1) / math.sqrt(d.size)) if d.size >= 2 else math.inf
    return float(d.mean()), se, int(d.size)


def median_candidate(candidates: Sequence[float]) -> float:
    """The median of ``candidates`` by value; the lower of the two middle ones for an even count."""
    ordered = sorted(float(c) for c in candidates)
    return ordered[(len(ordered) - 1) // 2]


def decide_rate(scores: Mapping[float, float], units: Mapping[float, pd.Series], n_images: int,
                ranked: Sequence[float], paper_rate: float | None = None, seeds: Sequence[int] = ()) -> SearchDecision:
    """The search's rule (the module docstring) on validation ``scores`` by rate, their per-unit values
    ``units`` by rate (indexed alike: (seed, client) pairs), ``n_images`` validation images in all, the
    rates ``ranked`` best first (ties already broken) and the paper's rate (None: not given)."""
    def paired(a: float, b: float) -> tuple[float, float, int]:
        return _paired(units.get(a, pd.Series(dtype=float)), units.get(b, pd.Series(dtype=float)))

    n_pairs = paired(ranked[0], ranked[1])[2] if len(ranked) > 1 else 0
    return decide(scores, ranked, n_images, lambda a, b: paired(a, b)[1], paper_rate, RULE_PAPER, n_pairs, seeds)


def decide(scores: Mapping[float, float], ranked: Sequence[float], n_images: int, se: Callable[[float, float], float],
           fallback: float | None = None, fallback_rule: str = RULE_PAPER, n_pairs: int = 0,
           seeds: Sequence[int] = ()) -> SearchDecision:
    """The rule of every search (the module docstring), for any candidate values: ``scores`` by value,
    ``ranked`` best first (ties already broken), ``n_images`` validation images in all, ``se(a, b)`` the
    standard error of ``scores[a] − scores[b]``; within noise, ``fallback`` (the paper's value, or a
    neutral one; None: none) if it is among the candidates (named ``fallback_rule``), else the median."""
    best = ranked[0]
    runner_up = ranked[1] if len(ranked) > 1 else None
    gaps = {}
    for r in ranked[1:]:
        if scores[r] == -math.inf and scores[best] > -math.inf:  # a diverged value is told apart by its divergence
            gaps[r] = (math.inf, 0.0)
        else:
            gaps[r] = (scores[best] - scores[r], se(best, r))
    margin, gap_se = gaps[runner_up] if runner_up is not None else (float("nan"), float("nan"))
    finite = [r for r in ranked if scores[r] > -math.inf]
    if n_images < MIN_VALIDATION_IMAGES:
        pool, prefix = finite or list(ranked), f"{TOO_LITTLE} ({n_images} < {MIN_VALIDATION_IMAGES} images); "
    else:
        pool, prefix = [best] + [r for r, (m, s) in gaps.items() if not m > s], ""
        if len(pool) == 1:
            return SearchDecision(best, best, runner_up, margin, gap_se, n_images, n_pairs, tuple(seeds), (best,),
                                  RULE_MARGIN)
    if fallback is not None and any(math.isclose(fallback, r, rel_tol=1e-9) for r in pool):
        value, rule = next(r for r in pool if math.isclose(fallback, r, rel_tol=1e-9)), fallback_rule
    else:
        value, rule = median_candidate(pool), RULE_MEDIAN
    return SearchDecision(float(value), best, runner_up, margin, gap_se, n_images, n_pairs, tuple(seeds),
                          tuple(sorted(float(r) for r in pool)), prefix + rule)


@dataclass(frozen=True)
class LrSearch:
    """``key`` (``train.lr``, or ``train.prompt_lr``) per row, chosen from ``grid`` by ``metric`` on
    validation data, by the rule of :meth:`decide` (the module docstring).

    ``validation``: the share of each run's training split held out (at random) as its test
    split; ``seed``: the first seed the search runs at (:data:`TUNING_SEED`, which no claim reads),
    ``repeats``: how many seeds from it (each rate runs at every one, and its score is the mean), so
    that the search has enough validation data to tell its rates apart; ``paper_rate``: the rate the
    rule picks when the rates are within noise and it is among them (None: the median candidate);
    ``applies``: which rows are searched (default all; the others keep their config's rate);
    ``on``: the config a row's search runs on (default the row's own; e.g. the method on one
    reference split, so that every table showing the method uses one search). Ties of the mean
    score go to the rate nearest the setup's own (the first in grid order when equally near), so a
    flat score never moves the best rate away from it. Every rate trains one fixed budget: a row that
    stops when flat (``train.stop_when_flat``) is searched at ``train.flat_from`` rounds (the pilot's
    budget it trains in full; its maximum when that is 0) without the rule, so its rates are never
    compared at rounds their own curves chose, and its search runs are the first rounds of its own runs.
    """

    grid: tuple[float, ...] = hp(check=_rates, valid="two or more distinct positive learning rates")
    validation: float = hp(0.2, gt=0, lt=1)
    metric: str = hp("final_acc_mean")
    seed: int = hp(TUNING_SEED, ge=0)
    applies: Callable[[RunConfig], bool] | None = hp(None)
    # Successive halving (0: off, every rate trains its full rounds): every rate first trains this
    # fraction of the row's rounds (at least one); only the best 1/eta of them (rounded up, ties as
    # in choose) then train the full rounds, and the row's rate is the best of those. The full runs
    # are the full search's own runs (same configs), so the two searches share what they both train.
    halving: float = hp(0.0, ge=0, lt=1)
    eta: int = hp(3, ge=2)
    on: Callable[[RunConfig], RunConfig] | None = hp(None)
    key: str = hp("train.lr", choices=SEARCH_KEYS)
    repeats: int = hp(1, ge=1, le=100)
    paper_rate: float | None = hp(None, gt=0)

    def __post_init__(self) -> None:
        check_fields(self)

    def searched(self, cfg: RunConfig) -> bool:
        return self.applies is None or bool(self.applies(cfg))

    @property
    def stages(self) -> tuple["LrSearch", ...]:
        """The searches a row goes through in turn: this one alone (a search in stages, such as
        PEP-FedPT's head rate then prompt rate, names each)."""
        return (self,)

    @property
    def seeds(self) -> tuple[int, ...]:
        """The tuning seeds: ``seed`` and the ``repeats − 1`` after it."""
        return tuple(self.seed + i for i in range(self.repeats))

    def full_configs(self, cfg: RunConfig) -> list[RunConfig]:
        """The row's full search runs: its config on validation data, once per rate and tuning seed
        (rate by rate)."""
        if not self.searched(cfg):
            return []
        start = cfg if self.on is None else self.on(cfg)
        t = start.train
        fixed = {"train.stop_when_flat": False, "train.rounds": t.flat_from or t.rounds} if t.stop_when_flat else {}
        seeds = self.seeds[:1] if start.rehearsal else self.seeds
        return [start.replace(**{**fixed, "seed": s, "data.validation": self.validation, self.key: float(lr)})
                for lr in self.trained_rates(start) for s in seeds]

    def trained_rates(self, start: RunConfig) -> tuple[float, ...]:
        """The rates a search on ``start`` trains: the grid; in a rehearsal (``start.rehearsal`` set,
        :func:`fedrepro.config.rehearse_dict`) one rate at one tuning seed, which proves the search's
        code (its runs, its decision, its table) without training the grid: the paper's rate where
        the grid holds it, else the grid's rate nearest the setup's own (the first in grid order when
        equally near), the rate a search whose scores all tie would choose (:meth:`ranked`)."""
        if not start.rehearsal:
            return tuple(self.grid)
        if self.paper_rate is not None and any(math.isclose(self.paper_rate, r, rel_tol=1e-9) for r in self.grid):
            return (float(next(r for r in self.grid if math.isclose(self.paper_rate, r, rel_tol=1e-9))),)
        own = self.rate(start)
        return (float(min(self.grid, key=lambda r: (abs(r - own), self.grid.index(r)))),)

    def rate(self, cfg: RunConfig) -> float:
        """``cfg``'s value of the searched rate (``key``)."""
        return float(getattr(cfg.train, self.key.split(".", 1)[1]))

    def search_configs(self, cfg: RunConfig) -> list[RunConfig]:
        """The row's search runs that can be named now: every rate's (the short ones, with
        ``halving``), and with ``halving`` once those are stored, the survivors' full runs."""
        if not self.halving:
            return self.full_configs(cfg)
        short = self.short_configs(cfg)
        try:
            keep = self.survivors(cfg)
        except TuningPending:
            return short
        return short + [c for c in self.full_configs(cfg) if self.rate(c) in keep]

    def short_rounds(self, cfg: RunConfig) -> int:
        """The rounds of a rate's first (short) run with ``halving``: that share of the full search
        runs' rounds (a row that stops when flat is searched at a fixed budget, :meth:`full_configs`);
        of a rehearsal, the paper's short run's (which the rehearsal records and cuts,
        :func:`fedrepro.config.rehearse_dict`)."""
        full = (self.full_configs(cfg) or [cfg])[0]
        rounds = full.rehearsal.get("paper", {}).get("rounds", full.train.rounds)
        return max(1, int(round(self.halving * rounds)))

    def short_configs(self, cfg: RunConfig) -> list[RunConfig]:
        """The row's short runs with ``halving``: every rate at :meth:`short_rounds` rounds."""
        return [c.replace(**{"train.rounds": self.short_rounds(cfg)}) for c in self.full_configs(cfg)]

    def survivors(self, cfg: RunConfig) -> list[float]:
        """The rates that train their full rounds with ``halving``: the best ``ceil(n / eta)`` by their
        short runs' scores (a tie goes as in :meth:`choose`); raises :class:`TuningPending` until the
        short runs are stored."""
        return self.ranked(self._stored_scores(self.short_configs(cfg)), self.rate(cfg))[:self.kept()]

    def kept(self) -> int:
        """How many rates train their full rounds with ``halving``: ``ceil(n / eta)``."""
        return -(-len(self.grid) // self.eta)

    def ranked(self, scores: Mapping[float, float], own: float) -> list[float]:
        """The grid's rates that ``scores`` scores, best first: by score, a tie to the rate nearest
        ``own`` (the setup's), then in grid order. The search's one ranking rule: :meth:`decide`
        starts from it, :meth:`survivors` takes the first :meth:`kept`."""
        scored = [lr for lr in self.grid if float(lr) in scores]
        return [float(lr) for lr in sorted(scored, key=lambda lr: (-scores[float(lr)], abs(lr - own),
                                                                    self.grid.index(lr)))]

    def replay_halving(self, cfg: RunConfig, rounds_of: Callable[[RunConfig], pd.DataFrame]
                       ) -> tuple[float, list[float]]:
        """``(rate, survivors)``: the rate this search (with ``halving``) chooses for ``cfg``'s row,
        and the rates whose full runs it trains, read off the stored
        full runs of the same search without it (``rounds_of``: a full run's stored rounds): a short
        run is the first :meth:`short_rounds` rounds of its rate's full run, bit for bit
        (:mod:`fedrepro.runs.prefix`), so its score is the full run's score at that round (the mean
        over the tuning seeds). The survivors' full runs decide as :meth:`decide` does. Raises
        :class:`TuningPending` until every full run is stored, and :class:`ConfigError` where a short
        run is not such a prefix (its last round not evaluated in the full run, or a method whose
        rounds depend on their number)."""
        from ..methods import METHODS
        from ..runs.prefix import reads_total_rounds

        if not self.halving:
            raise ConfigError("replay_halving: this search has halving=0; valid: a search with 0 < halving < 1")
        if not self.metric.startswith("final_"):
            raise ConfigError(f"replay_halving: metric={self.metric!r}; valid: a final_<metric> score "
                              "(the score at the short run's last round)")
        full = self.full_configs(cfg)
        if not full:
            return self.rate(cfg), []
        if reads_total_rounds(METHODS.get(full[0].method.name)):
            raise ConfigError(f"replay_halving: {full[0].method.name}'s rounds depend on train.rounds, so a short "
                              "run is not the first rounds of the full one; train it instead")
        results = self._stored_results(full)
        at, column = self.short_rounds(cfg), self.metric.removeprefix("final_")
        per_seed: dict[float, list[float]] = {}
        for c in full:
            lr = self.rate(c)
            diverged = results[(lr, c.seed)].summary.get("diverged_round")
            if diverged is not None and diverged <= at:  # the short run diverges in the same round
                per_seed.setdefault(lr, []).append(float("-inf"))  # and loses, as a diverged full run does
                continue
            rounds = rounds_of(c)
            row = rounds[rounds["round"] == at]
            if row.empty or column not in row or pd.isna(row[column].iloc[0]):
                raise ConfigError(f"replay_halving: run {c.hash()} has no {column} at round {at} (eval_every="
                                  f"{c.train.eval_every}); train the short run instead")
            per_seed.setdefault(lr, []).append(float(row[column].iloc[0]))
        short = {lr: float(np.mean(v)) for lr, v in per_seed.items()}
        keep = self.ranked(short, self.rate(cfg))[:self.kept()]
        return self._decide_on(cfg, [c for c in full if self.rate(c) in keep], results).rate, keep

    def short_scores(self, cfg: RunConfig) -> dict[float, float]:
        """Validation score per rate of the short runs with ``halving`` (the mean over the tuning seeds)."""
        return self._stored_scores(self.short_configs(cfg))

    def _decided_runs(self, cfg: RunConfig) -> list[RunConfig]:
        """The full runs the decision reads (with ``halving``, the survivors' only)."""
        runs = self.full_configs(cfg)
        if self.halving:
            keep = self.survivors(cfg)
            runs = [c for c in runs if self.rate(c) in keep]
        return runs

    def scores(self, cfg: RunConfig) -> dict[float, float]:
        """Validation score per rate for ``cfg``'s row, the mean over the tuning seeds (with ``halving``,
        of the survivors' full runs only); raises :class:`TuningPending` when some search runs are not
        stored (or are stale under the stale policy, so they will be trained anew)."""
        return self._stored_scores(self._decided_runs(cfg))

    def _stored_scores(self, runs: list[RunConfig]) -> dict[float, float]:
        return self._scores_of({k: r.summary for k, r in self._stored_results(runs).items()})

    def _stored_results(self, runs: list[RunConfig]) -> dict[tuple[float, int], RunResult]:
        """Each run's stored result by (rate, seed); raises :class:`TuningPending` naming the runs not
        stored (or stale under the stale policy, so they will be trained anew)."""
        from ..runs.train import is_stale as _is_stale, on_stale_policy

        policy = on_stale_policy()
        missing = [c for c in runs if RunStore(c.runs_dir).status(c) != "done"
                   or _is_stale(RunStore(c.runs_dir), c, policy)]
        if missing:
            raise TuningPending(missing)
        return {(self.rate(c), c.seed): RunStore(c.runs_dir).load(c) for c in runs}

    def _scores_of(self, summaries: Mapping[tuple[float, int], dict]) -> dict[float, float]:
        """The mean score over the tuning seeds by rate; a rate that diverged at any seed (no score)
        loses to any rate that was scored at every seed."""
        per_rate: dict[float, list[float]] = {}
        for (lr, _), summary in summaries.items():
            if self.metric not in summary:
                raise ConfigError(f"LrSearch(metric={self.metric!r}): run {summary.get('config_hash')} has no such "
                                  "summary value; valid: " + ", ".join(sorted(k for k in summary
                                                                               if k.startswith(("best_", "final_")))))
            v = summary[self.metric]  # NaN is stored as null
            per_rate.setdefault(lr, []).append(float("-inf") if v is None or v != v else float(v))
        return {lr: float(np.mean(v)) if all(math.isfinite(x) for x in v) else float("-inf")
                for lr, v in per_rate.items()}

    def units(self, cfg: RunConfig) -> tuple[dict[float, pd.Series], int]:
        """``(values by rate, n_images)``: each rate's per-unit validation values over the tuning seeds,
        indexed by (seed, client) (:func:`run_units`), and the validation images one rate's runs were
        scored on, summed over the seeds (the most of any rate's: a diverged run scores none)."""
        return self._units_of(self._stored_results(self._decided_runs(cfg)))

    def _units_of(self, results: Mapping[tuple[float, int], RunResult]) -> tuple[dict[float, pd.Series], int]:
        parts: dict[float, list[pd.Series]] = {}
        images: dict[float, int] = {}
        for (lr, seed), res in results.items():
            values, n = run_units(res, self.metric)
            parts.setdefault(lr, []).append(pd.Series(values.to_numpy(), index=pd.MultiIndex.from_arrays(
                [[seed] * len(values), values.index.to_numpy()], names=["seed", "client"])))
            images[lr] = images.get(lr, 0) + n
        units = {lr: pd.concat(p) for lr, p in parts.items()}
        return units, max(images.values(), default=0)

    def _decide_on(self, cfg: RunConfig, runs: list[RunConfig],
                   results: Mapping[tuple[float, int], RunResult] | None = None) -> SearchDecision:
        results = {k: v for k, v in (results or self._stored_results(runs)).items()
                   if k in {(self.rate(c), c.seed) for c in runs}}
        scores = self._scores_of({k: r.summary for k, r in results.items()})
        units, n_images = self._units_of(results)
        return decide_rate(scores, units, n_images, self.ranked(scores, self.rate(cfg)), self.paper_rate, self.seeds)

    def decide(self, cfg: RunConfig) -> SearchDecision:
        """How the search picks ``cfg``'s row's rate (the module docstring's rule) from its stored runs;
        raises :class:`TuningPending` until they are stored."""
        scores = self.scores(cfg)
        units, n_images = self.units(cfg)
        return decide_rate(scores, units, n_images, self.ranked(scores, self.rate(cfg)), self.paper_rate, self.seeds)

    def choose(self, cfg: RunConfig) -> RunConfig:
        """``cfg`` with its row's chosen rate (unchanged when the row is not searched)."""
        if not self.searched(cfg):
            return cfg
        try:
            decision = self.decide(cfg)
        except TuningPending as e:
            waiting = _WAITING.get()
            if waiting is None:
                raise
            waiting.extend(e.configs)
            return cfg
        return cfg.replace(**{self.key: decision.rate})

    def table(self, cfgs: Sequence[RunConfig], label: Callable[[RunConfig], str]) -> pd.DataFrame:
        """The search as a table: one row per searched row of ``cfgs`` (by ``label``), one column per
        rate (the validation score, the mean over the tuning seeds), the rate chosen, and beside it
        the decision (:class:`SearchDecision`): the best rate's margin over the runner-up, its SE, the
        validation images and the rule."""
        rows, seen = [], set()
        for cfg in cfgs:
            name = label(cfg)
            if name in seen or not self.searched(cfg):
                continue
            seen.add(name)
            scores = self.scores(cfg)
            d = self.decide(cfg)
            key = self.key.split(".", 1)[1]
            short = {f"short {key}={lr:g}": v for lr, v in self.short_scores(cfg).items()} if self.halving else {}
            full = {f"{key}={lr:g}": scores.get(float(lr), float("nan")) for lr in self.grid}  # NaN: pruned
            rows.append({"row": name, **short, **full, f"chosen {key}": d.rate, **decision_columns(d, key)})
        return pd.DataFrame(rows).set_index("row") if rows else pd.DataFrame()


def decision_columns(d: SearchDecision, key: str = "lr") -> dict[str, Any]:
    """A decision's columns beside its row (:meth:`LrSearch.table`), named after the searched key."""
    return {f"{key} best": d.best, f"{key} runner-up": d.runner_up, f"{key} margin": d.margin, f"{key} SE": d.se,
            f"{key} n val": d.n_images, f"{key} seeds": len(d.seeds), f"{key} rule": d.rule}


STRAW_CHANCE = 2.0  # a score below twice chance has not learned the task
STRAW_MEDIAN = 0.5  # nor has one below half of what the table's methods typically reach in that column


def straw_men(results: pd.DataFrame, chance: float, values: Sequence[str], by: Sequence[str]) -> pd.DataFrame:
    """The straw-man cells of a table at its chosen rates, from its runs (a ``run_grid`` table).

    A cell is a group of ``by`` (the method first, then e.g. α) and one of ``values``, scored by its
    mean over seeds. It is a straw man when its runs diverged (no value, and a ``diverged_round``),
    its score is below :data:`STRAW_CHANCE` × ``chance``, or below :data:`STRAW_MEDIAN` × the median
    of its column (the same ``values`` entry and the same ``by`` values after the method) over the
    methods: a method far below every other one in a column has not learned what that column
    measures, whatever its other columns say. A cell with no value and no divergence (a personalised
    method's global accuracy, which it does not have) is not scored, so it is no straw man.

    Returns one row per straw-man cell: ``method``, ``column``, ``score`` (NaN if diverged), ``why``."""
    if not 0 < chance < 1:
        raise ConfigError(f"straw_men: chance={chance!r}; valid: a probability in (0, 1)")
    by = list(by)
    missing = [c for c in [*by, *values] if c not in results.columns]
    if missing:
        raise ConfigError(f"straw_men: columns {missing} are not in the results; valid: {list(results.columns)}")
    gone = results["diverged_round"].notna() if "diverged_round" in results else pd.Series(False, results.index)
    cells = []
    for key, g in results.groupby(by, sort=False):
        key = key if isinstance(key, tuple) else (key,)
        for v in values:
            score = g[v].mean()
            if pd.isna(score) and not gone[g.index].any():
                continue  # not scored, not diverged
            label = " ".join(str(k) for k in key[1:]) if len(values) == 1 and len(key) > 1 else \
                " ".join([v, *(str(k) for k in key[1:])])
            cells.append((key[0], label, score))
    rows = []
    for label in dict.fromkeys(c[1] for c in cells):
        col = [(m, sc) for m, lab, sc in cells if lab == label]
        floor = max(STRAW_CHANCE * chance, STRAW_MEDIAN * float(pd.Series([sc for _, sc in col]).median()))
        for method, sc in col:
            if pd.isna(sc):
                why = "diverged"
            elif sc < STRAW_CHANCE * chance:
                why = f"below {STRAW_CHANCE:g}× chance ({100 * STRAW_CHANCE * chance:.0f}%)"
            elif sc < floor:
                why = f"below {STRAW_MEDIAN:g}× the column's median ({100 * floor:.1f}%)"
            else:
                continue
            rows.append({"method": method, "column": label, "score": sc, "why": why})
    return pd.DataFrame(rows, columns=["method", "column", "score", "why"])
