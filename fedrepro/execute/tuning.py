"""Learning rates chosen on validation data, with the same search for every row of a table.

A table that compares methods gives each the same budget: every row (a method, or a method with
its own arguments) tries every learning rate of one grid, on its own config with a share of the
training split held out as validation data (``data.validation``; the test split is never read),
at one seed that no claim reads (:data:`TUNING_SEED`: a claim's seeds count up from 0, to 12 at
most), so that no claim's runs share a seed and a split with the search that chose their rate. The rate with the
highest validation score is the row's, for every seed of the
table. A row that still fails to learn at its best rate is a straw man of the table, not of the
tuning, and the notebook shows it apart.

The search runs are ordinary runs (stored, reused, fingerprinted). Until all of a row's search
runs are stored, its rate is unknown: :meth:`LrSearch.choose` raises :class:`TuningPending`
with the runs to train, which ``TableDef.run`` trains first and ``fedrepro reproduce`` trains
before planning the table again.
"""
from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping, Sequence

import pandas as pd

from ..config import RunConfig
from ..errors import ConfigError, FedreproError
from ..runs.store import RunStore
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


# The search's seed: none of the claim seeds (0, 1, 2, ... up to a sequential claim's 12) nor the
# table seeds (0, 1, 2), so that a claim never reads the seed its rates were chosen at.
TUNING_SEED = 1000
# The rates a search may choose: the step size of every parameter, or of the prompts alone.
SEARCH_KEYS = ("train.lr", "train.prompt_lr")


def _rates(grid: Any) -> bool:
    """Two or more learning rates, each a number > 0, none repeated (it would be trained twice)."""
    try:
        return (len(grid) >= 2 and len(set(grid)) == len(grid)
                and all(isinstance(v, (int, float)) and v > 0 for v in grid))
    except TypeError:  # not a sequence of hashable values
        return False


@dataclass(frozen=True)
class LrSearch:
    """``key`` (``train.lr``, or ``train.prompt_lr``) per row, chosen from ``grid`` by ``metric`` on
    validation data.

    ``validation``: the share of each run's training split held out (stratified) as its test
    split; ``seed``: the one seed the search runs at (:data:`TUNING_SEED`, which no claim reads);
    ``applies``: which rows are searched (default all; the others keep their config's rate);
    ``on``: the config a row's search runs on (default the row's own; e.g. the method on one
    reference split, so that every table showing the method uses one search). Ties go to the rate
    nearest the setup's own (the first in grid order when equally near), so a flat score never
    moves a row away from it. Every rate trains one fixed budget: a row that stops when flat
    (``train.stop_when_flat``) is searched at ``train.flat_from`` rounds (the pilot's budget it trains
    in full; its maximum when that is 0) without the rule, so its rates are never compared at rounds
    their own curves chose, and its search runs are the first rounds of its own runs.
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

    def __post_init__(self) -> None:
        check_fields(self)

    def searched(self, cfg: RunConfig) -> bool:
        return self.applies is None or bool(self.applies(cfg))

    @property
    def stages(self) -> tuple["LrSearch", ...]:
        """The searches a row goes through in turn: this one alone (a search in stages, such as
        PEP-FedPT's head rate then prompt rate, names each)."""
        return (self,)

    def full_configs(self, cfg: RunConfig) -> list[RunConfig]:
        """The row's full search runs: its config at the search seed, on validation data, once per rate."""
        if not self.searched(cfg):
            return []
        start = cfg if self.on is None else self.on(cfg)
        t = start.train
        fixed = {"train.stop_when_flat": False, "train.rounds": t.flat_from or t.rounds} if t.stop_when_flat else {}
        return [start.replace(**{**fixed, "seed": self.seed, "data.validation": self.validation, self.key: float(lr)})
                for lr in self.grid]

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
        ``own`` (the setup's), then in grid order. The search's one ranking rule: :meth:`choose`
        takes the first, :meth:`survivors` the first :meth:`kept`."""
        scored = [lr for lr in self.grid if float(lr) in scores]
        return [float(lr) for lr in sorted(scored, key=lambda lr: (-scores[float(lr)], abs(lr - own),
                                                                    self.grid.index(lr)))]

    def replay_halving(self, cfg: RunConfig, rounds_of: Callable[[RunConfig], pd.DataFrame]
                       ) -> tuple[float, list[float]]:
        """``(rate, survivors)``: the rate this search (with ``halving``) chooses for ``cfg``'s row,
        and the rates whose full runs it trains, read off the stored
        full runs of the same search without it (``rounds_of``: a full run's stored rounds): a short
        run is the first :meth:`short_rounds` rounds of its rate's full run, bit for bit
        (:mod:`fedrepro.runs.prefix`), so its score is the full run's score at that round. The
        survivors' full scores are the stored ones. Raises :class:`TuningPending` until every full
        run is stored, and :class:`ConfigError` where a short run is not such a prefix (its last
        round not evaluated in the full run, or a method whose rounds depend on their number)."""
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
        summaries = self._stored_summaries(full)
        final = self._scores_of(summaries)
        at, column = self.short_rounds(cfg), self.metric.removeprefix("final_")
        short = {}
        for c in full:
            diverged = summaries[self.rate(c)].get("diverged_round")
            if diverged is not None and diverged <= at:  # the short run diverges in the same round
                short[self.rate(c)] = float("-inf")  # and loses, as a diverged full run does
                continue
            rounds = rounds_of(c)
            row = rounds[rounds["round"] == at]
            if row.empty or column not in row or pd.isna(row[column].iloc[0]):
                raise ConfigError(f"replay_halving: run {c.hash()} has no {column} at round {at} (eval_every="
                                  f"{c.train.eval_every}); train the short run instead")
            short[self.rate(c)] = float(row[column].iloc[0])
        keep = self.ranked(short, self.rate(cfg))[:self.kept()]
        return self.ranked({lr: final[lr] for lr in keep}, self.rate(cfg))[0], keep

    def short_scores(self, cfg: RunConfig) -> dict[float, float]:
        """Validation score per rate of the short runs with ``halving``."""
        return self._stored_scores(self.short_configs(cfg))

    def scores(self, cfg: RunConfig) -> dict[float, float]:
        """Validation score per rate for ``cfg``'s row (with ``halving``, of the survivors' full runs
        only); raises :class:`TuningPending` when some search runs are not stored (or are stale under
        the stale policy, so they will be trained anew)."""
        runs = self.full_configs(cfg)
        if self.halving:
            keep = self.survivors(cfg)
            runs = [c for c in runs if self.rate(c) in keep]
        return self._stored_scores(runs)

    def _stored_scores(self, runs: list[RunConfig]) -> dict[float, float]:
        return self._scores_of(self._stored_summaries(runs))

    def _stored_summaries(self, runs: list[RunConfig]) -> dict[float, dict]:
        """Each run's stored summary by rate; raises :class:`TuningPending` naming the runs not stored
        (or stale under the stale policy, so they will be trained anew)."""
        from ..runs.train import is_stale as _is_stale, on_stale_policy

        policy = on_stale_policy()
        missing = [c for c in runs if RunStore(c.runs_dir).status(c) != "done"
                   or _is_stale(RunStore(c.runs_dir), c, policy)]
        if missing:
            raise TuningPending(missing)
        return {self.rate(c): RunStore(c.runs_dir).load(c).summary for c in runs}

    def _scores_of(self, summaries: Mapping[float, dict]) -> dict[float, float]:
        out = {}
        for lr, summary in summaries.items():
            if self.metric not in summary:
                raise ConfigError(f"LrSearch(metric={self.metric!r}): run {summary.get('config_hash')} has no such "
                                  "summary value; valid: " + ", ".join(sorted(k for k in summary
                                                                               if k.startswith(("best_", "final_")))))
            v = summary[self.metric]  # NaN is stored as null
            # A diverged run (no score) loses to any run that was scored.
            out[lr] = float("-inf") if v is None or v != v else float(v)
        return out

    def choose(self, cfg: RunConfig) -> RunConfig:
        """``cfg`` with its row's chosen rate (unchanged when the row is not searched)."""
        if not self.searched(cfg):
            return cfg
        try:
            scores = self.scores(cfg)
        except TuningPending as e:
            waiting = _WAITING.get()
            if waiting is None:
                raise
            waiting.extend(e.configs)
            return cfg
        return cfg.replace(**{self.key: self.ranked(scores, self.rate(cfg))[0]})

    def table(self, cfgs: Sequence[RunConfig], label: Callable[[RunConfig], str]) -> pd.DataFrame:
        """The search as a table: one row per searched row of ``cfgs`` (by ``label``), one column per
        rate (the validation score), and the rate chosen."""
        rows, seen = [], set()
        for cfg in cfgs:
            name = label(cfg)
            if name in seen or not self.searched(cfg):
                continue
            seen.add(name)
            scores = self.scores(cfg)
            key = self.key.split(".", 1)[1]
            short = {f"short {key}={lr:g}": v for lr, v in self.short_scores(cfg).items()} if self.halving else {}
            full = {f"{key}={lr:g}": scores.get(float(lr), float("nan")) for lr in self.grid}  # NaN: pruned
            rows.append({"row": name, **short, **full, f"chosen {key}": self.rate(self.choose(cfg))})
        return pd.DataFrame(rows).set_index("row") if rows else pd.DataFrame()


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
