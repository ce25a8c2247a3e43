"""Table definitions: which runs fill a paper's table, and which of the paper's numbers sit beside ours.

A :class:`TableDef` names the setup its runs start from, its row groups (:class:`Rows`: a grid of
config values or named variants, run over the claim seeds or the table seeds), the column that
spans the table (e.g. Dirichlet α) and the quoted table to show beside it. A notebook then reads::

    table = fedrepro.papers.paper("fedpft").TABLES["main"]
    results = table.run(PROFILE)          # trains what is missing, loads the rest
    display(table.show(results))          # ours beside the paper's
    evaluate_claims(results, ids=[...])

Row groups may depend on the profile (a laptop budget thins the rows no claim reads), so ``rows`` is
a list or a function of the profile. :meth:`TableDef.configs` lists every run a table needs
without running any, so a planner can gather the runs of many tables first.

A table whose paper prints one column per dataset (FedPFT (ICLR) Table 9: CIFAR-10 and CIFAR-100)
names them in ``datasets``: each paper column's label and the setup its runs start from
(:class:`DataColumn`). At the paper profile the table runs every column, and its results name each
row's column in :data:`PAPER_COLUMN`; :meth:`TableDef.show` then labels our columns as the paper's
(``"C100 α=0.1"``), beside its numbers. The smoke and laptop profiles run the table's ``setup``
alone, which stands in for the first column.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

import pandas as pd

from ..config import RunConfig, check_seeds, default_seeds
from ..errors import ConfigError
from . import setup
from . import claim_seeds
from . import table_seeds as default_table_seeds
from .reference import paper_table
from .reference import beside
from ..claims.core import PAPER_COLUMN
from ..execute.tuning import TUNING_SEED, TuningPending
from ..runs.store import RunStore
from ..runs.tables import pivot_mean_std
from ..params import check_fields, hp
from ..env.style import RECONSTRUCTED, display_label, method_key

if TYPE_CHECKING:
    from ..execute.tuning import LrSearch


def tuning_seeds(profile: str) -> list[int]:
    """The seeds of rows that choose a setting on validation data (``Rows(seeds="tuning")``): as many as
    the profile's claim seeds, from :data:`~fedrepro.execute.tuning.TUNING_SEED` on, so that no claim
    reads them and the choice has as much validation data as a claim row has test data."""
    return [TUNING_SEED + i for i in range(len(default_seeds(profile)))]


SEED_KINDS = ("claim", "table", "tuning")
# The profiles that run a table's ``datasets``; the others run its ``setup`` alone (their small
# data stands in for the first column).
DATASET_PROFILES = ("paper",)


def by_paper_column(results: pd.DataFrame) -> list[tuple[str | None, pd.DataFrame]]:
    """``[(paper column, its rows)]`` in the results' order, or ``[(None, results)]`` where they name
    none (the smoke and laptop profiles): for a notebook's own step per dataset (a target accuracy)."""
    if PAPER_COLUMN not in results.columns:
        return [(None, results)]
    return [(None if pd.isna(k) else k, rows) for k, rows in results.groupby(PAPER_COLUMN, sort=False, dropna=False)]


def with_paper_column(keys: Sequence[str], results: pd.DataFrame) -> list[str]:
    """``keys`` led by :data:`PAPER_COLUMN` where ``results`` name paper columns, so that a notebook's
    own group-by keeps the datasets apart (``keys`` alone at the smoke and laptop profiles)."""
    return [PAPER_COLUMN, *keys] if PAPER_COLUMN in results.columns else list(keys)


def _reading(row):
    """A row label as tables show it: a reconstructed method's name with "(our reading)"; any other
    label (a method, α, a setting) unchanged, type included."""
    return display_label(row) if method_key(row) in RECONSTRUCTED else row


@dataclass(frozen=True)
class Rows:
    """One group of a table's rows, run over the same seeds.

    ``grid`` maps dotted config keys to values (their Cartesian product, as in
    :func:`fedrepro.run_grid`; a list of such mappings concatenates their points); ``variants`` names whole config
    overrides (ablation settings), which
    then label the rows in the table's ``variant_col``; ``base`` overrides the setup for this group
    only; ``seeds`` is ``"claim"`` (the rows a claim reads: the profile's claim seeds), ``"table"``
    (rows no claim reads: the table seeds) or ``"tuning"`` (rows that choose a setting on validation
    data: as many seeds as the profile's claim seeds, from the tuning seed on, which no claim reads).
    """

    grid: Mapping[str, Sequence[Any]] | Sequence[Mapping[str, Sequence[Any]]] = hp(factory=dict)
    variants: Mapping[str, Mapping[str, Any]] | None = hp(None)
    seeds: str = hp("claim", choices=SEED_KINDS)
    base: Mapping[str, Any] = hp(factory=dict)

    def __post_init__(self) -> None:
        check_fields(self)


@dataclass(frozen=True)
class DataColumn:
    """One of the paper's columns of a table: the setup variant its runs start from and the config
    overrides on it (dotted keys, e.g. pFedCSPC (TNNLS) Table IV's ``{"train.participation": 0.5}``).
    ``rows`` replaces the table's row groups for this column where they depend on the dataset
    (e.g. MOON's μ); a list or a function of the profile, as :attr:`TableDef.rows`."""

    setup: str = "default"
    overrides: Mapping[str, Any] = field(default_factory=dict)
    rows: Sequence[Rows] | Callable[[str], Sequence[Rows]] | None = None


@dataclass(frozen=True)
class TableDef:
    """A paper's table: the runs that fill it and how to show it beside the paper's numbers."""

    paper: str
    name: str
    title: str
    rows: Sequence[Rows] | Callable[[str], Sequence[Rows]]
    index: str = "method.name"
    columns: str | None = None
    metric: str = "best"
    setup: str = "default"
    variant_col: str = "setting"
    # The quoted table (``fedrepro.papers.<paper>.reference``) and which of its columns to show.
    reference: str | None = None
    reference_columns: Callable[[str], bool] | None = None
    # Reshapes the quoted table to our layout (e.g. a paper table with α as rows is transposed).
    reference_view: Callable[[pd.DataFrame], pd.DataFrame] | None = None
    label: Callable[[Any], str] | None = None
    # Labels of our rows (``index`` values), for a table laid out as the paper's with a grid axis as
    # its rows (e.g. ``α=0.5``, matching the quoted table's row names).
    row_label: Callable[[Any], str] | None = None
    # Columns computed from the stored runs after the grid (e.g. pFedCSPC's I_local and HM).
    derive: Callable[[pd.DataFrame], pd.DataFrame] | None = None
    # The order of named rows (``variants``) in the table; default: the order the groups name them.
    order: Sequence[str] | None = None
    # Each row's learning rate chosen on validation data, the same search for every row
    # (:class:`fedrepro.execute.tuning.LrSearch`; a function of the profile, None where it does not apply).
    tune: Callable[[str], "LrSearch | None"] | None = None
    # Its claims read the final models through an analysis (a probe) that the early stop does not
    # watch: every run trains its full budget (RunConfig.full_budget). A config another table stops
    # when flat is then a prefix of this one's (fedrepro.runs.prefix).
    final_models: bool = False
    # The paper's columns, each a dataset (or a dataset and a setting): the label the paper prints ->
    # the setup its runs start from (a setup variant, or a DataColumn). Run at DATASET_PROFILES, in
    # this order; elsewhere ``setup`` alone stands in for the first.
    datasets: Mapping[str, DataColumn | str] | None = None

    @property
    def key(self) -> str:
        """``"<paper>/<table>"``: the table's name in the seed stages' record (:func:`fedrepro.papers.claim_seeds`)."""
        return f"{self.paper}/{self.name}"

    def paper_columns(self, profile: str) -> dict[str, DataColumn] | None:
        """The paper columns the table runs at ``profile`` (label -> :class:`DataColumn`); None where
        it runs its ``setup`` alone."""
        if not self.datasets or profile not in DATASET_PROFILES:
            return None
        return {k: v if isinstance(v, DataColumn) else DataColumn(v) for k, v in self.datasets.items()}

    def search(self, profile: str) -> "LrSearch | None":
        return None if self.tune is None else self.tune(profile)

    def row_groups(self, profile: str) -> list[Rows]:
        return list(self.rows(profile) if callable(self.rows) else self.rows)

    def _base(self, profile: str, variant: str | None, overrides: Mapping[str, Any]) -> RunConfig:
        return setup(self.paper, profile, variant or self.setup, **overrides)

    def _columns(self, profile: str, variant, base) -> dict[str | None, DataColumn | None]:
        """The paper columns to run (label -> column), or ``{None: None}``: the table's own setup (or the
        caller's ``variant`` or ``base``, which run as asked)."""
        columns = self.paper_columns(profile) if variant is None and base is None else None
        return {None: None} if columns is None else dict(columns)

    def _groups(self, profile: str, seeds, table_seeds, variant, overrides, base):
        """``(paper column label or None, group base config, row group, seeds)`` of every row group."""
        asked = [v for k, v in overrides.items() if k.replace("__", ".") == "train.stop_when_flat" and v]
        if self.final_models and asked:
            raise ConfigError(f"train.stop_when_flat={asked[0]!r} for table {self.key}, which reads the final "
                              "models and trains the full budget; valid: False")
        # The claim rows' seeds: the profile's, continued to the stage a sequential claim reached.
        seeds = check_seeds(seeds, "seeds") if seeds else claim_seeds(profile, self.key)
        table_seeds = check_seeds(table_seeds, "table_seeds") if table_seeds else default_table_seeds(profile)
        for label, column in self._columns(profile, variant, base).items():
            if column is not None:
                # The caller's overrides win over the column's own.
                start = self._base(profile, column.setup, {**column.overrides, **overrides})
                groups = self.row_groups(profile) if column.rows is None else \
                    list(column.rows(profile) if callable(column.rows) else column.rows)
            else:
                start = self._base(profile, variant, overrides) if base is None else base.replace(
                    **{k.replace("__", "."): v for k, v in overrides.items()})
                groups = self.row_groups(profile)
            for g in groups:
                by_kind = {"claim": seeds, "table": table_seeds, "tuning": tuning_seeds(profile)}
                yield (label, start.replace(**dict(g.base)) if g.base else start, g, by_kind[g.seeds])

    def configs(self, profile: str, seeds: Sequence[int] | None = None, table_seeds: Sequence[int] | None = None,
                variant: str | None = None, base: RunConfig | None = None, tuned: bool = True,
                **overrides: Any) -> list[RunConfig]:
        """Every run the table needs (without running any), in table order: at the paper profile, every
        paper column of ``datasets`` in turn. ``variant`` or ``base`` replaces the paper's setup (to
        run the table's rows on another config, one column); keyword overrides (``a__b=v``) apply to
        each. With ``tune``, each row at its chosen learning rate; raises
        :class:`~fedrepro.execute.tuning.TuningPending` (naming the search runs) until the search is stored.
        ``tuned=False``: every row at its setup's rate, as the search starts from it."""
        out = self._untuned(profile, seeds, table_seeds, variant, base, overrides)
        search = self.search(profile)
        if search is None or not tuned:
            return out

        missing: dict[str, RunConfig] = {}
        tuned = []
        for cfg in out:
            try:
                tuned.append(search.choose(cfg))
            except TuningPending as e:
                missing.update((c.hash(), c) for c in e.configs)
        if missing:
            raise TuningPending(list(missing.values()))
        return tuned

    def _budget(self, cfg: RunConfig) -> RunConfig:
        """``cfg`` as this table trains it: the full budget where its claims read the final models."""
        return cfg.full_budget() if self.final_models else cfg

    def _untuned(self, profile, seeds, table_seeds, variant, base, overrides) -> list[RunConfig]:
        return [cfg for _, cfg in self._labelled(profile, seeds, table_seeds, variant, base, overrides)]

    def _labelled(self, profile, seeds, table_seeds, variant, base, overrides) -> list[tuple[str | None, RunConfig]]:
        """``(paper column label or None, run)`` of every row, in table order, before any search."""
        from ..execute.grid import grid_points

        out = []
        for label, group_base, g, s in self._groups(profile, seeds, table_seeds, variant, overrides, base):
            bases = [group_base] if g.variants is None else [group_base.replace(**dict(v)) for v in g.variants.values()]
            out += [(label, b.replace(**point, seed=int(seed))) for b in bases
                    for point, seed in grid_points(g.grid or None, s)]
        return [(label, self._budget(cfg)) for label, cfg in out]

    def configs_by_column(self, profile: str, seeds: Sequence[int] | None = None,
                          table_seeds: Sequence[int] | None = None,
                          **overrides: Any) -> dict[str | None, list[RunConfig]]:
        """The table's runs (before any learning-rate search) by paper column: ``{label: runs}`` in
        ``datasets`` order, or ``{None: runs}`` where the profile runs the table's ``setup`` alone."""
        out: dict[str | None, list[RunConfig]] = {}
        for label, cfg in self._labelled(profile, seeds, table_seeds, None, None, overrides):
            out.setdefault(label, []).append(cfg)
        return out

    def search_configs(self, profile: str, seeds: Sequence[int] | None = None,
                       table_seeds: Sequence[int] | None = None, variant: str | None = None,
                       base: RunConfig | None = None, **overrides: Any) -> list[RunConfig]:
        """The learning-rate search runs of the table's rows (none without ``tune``), each once."""
        search = self.search(profile)
        if search is None:
            return []
        out: dict[str, RunConfig] = {}
        for cfg in self._untuned(profile, seeds, table_seeds, variant, base, overrides):
            out.update((c.hash(), c) for c in search.search_configs(cfg))
        return list(out.values())

    def search_table(self, profile: str, label: Callable[[RunConfig], str] | None = None,
                     variant: str | None = None, **overrides: Any) -> pd.DataFrame:
        """The learning-rate search as a table: each searched row's validation score per rate and
        the rate chosen (empty without ``tune``); rows are named by ``label`` (default: the method)."""
        search = self.search(profile)
        if search is None:
            return pd.DataFrame()
        cfgs = self._untuned(profile, None, None, variant, None, overrides)
        return search.table(cfgs, label or (lambda c: c.method.name))

    def run(self, profile: str, seeds: Sequence[int] | None = None, table_seeds: Sequence[int] | None = None,
            variant: str | None = None, progress: bool = True, base: RunConfig | None = None,
            executor: Any = None, **overrides: Any) -> pd.DataFrame:
        """Train what is missing and return the tidy results table (one row per run; with the paper's
        columns, :data:`PAPER_COLUMN` names each row's). ``executor``: where the missing runs train
        (see :func:`fedrepro.run_grid`)."""
        from ..execute.run import run
        from ..execute.grid import run_grid, train_pending

        # The search first: the rows' learning rates are unknown until its runs are stored (with one
        # worker, train_pending leaves them to run()).
        # A search by successive halving names its full runs only once its short ones are stored:
        # train what it names until it names nothing new.
        trained: set[str] = set()
        while searches := [c for c in self.search_configs(profile, seeds, table_seeds, variant, base, **overrides)
                           if c.hash() not in trained]:
            train_pending(searches, progress=progress, executor=executor)
            for cfg in searches:
                run(cfg)
            trained.update(c.hash() for c in searches)
        # All of the table's missing runs at once, so that the worker processes stay busy across groups.
        train_pending(self.configs(profile, seeds, table_seeds, variant, base, **overrides), progress=progress,
                      executor=executor)
        search = self.search(profile)
        parts = []
        for label, start, g, s in self._groups(profile, seeds, table_seeds, variant, overrides, base):
            part = run_grid(start, g.grid or None, seeds=s, variants=g.variants, variant_col=self.variant_col,
                            progress=progress, workers=1,
                            transform=self._budget if search is None else lambda c: search.choose(self._budget(c)))
            parts.append(part if label is None else part.assign(**{PAPER_COLUMN: label}))
        table = pd.concat(parts, ignore_index=True)
        order = self._row_order(profile)
        if order and self.variant_col in table:
            rank = {k: i for i, k in enumerate(order)}
            table = table.sort_values(self.variant_col, key=lambda c: c.map(rank), kind="stable")
            table = table.reset_index(drop=True)
        return self.derive(table) if self.derive is not None else table

    def _row_order(self, profile: str) -> list[str]:
        if self.order is not None:
            return list(self.order)
        names: list[str] = []
        columns = (self.paper_columns(profile) or {}).values()
        for rows in [self.rows, *(c.rows for c in columns if c.rows is not None)]:
            for g in rows(profile) if callable(rows) else rows:
                names += [k for k in (g.variants or {}) if k not in names]
        return names

    def first_column(self, results: pd.DataFrame) -> pd.DataFrame:
        """The rows of the table's first paper column (every row where the results name no column):
        the setting the smoke and laptop profiles run, which a notebook's own figures read."""
        if PAPER_COLUMN not in results.columns or not self.datasets:
            return results
        first = next(iter(self.datasets))
        return results[results[PAPER_COLUMN].isna() | (results[PAPER_COLUMN] == first)]

    def column_label(self, value: Any, column: str | None = None) -> Any:
        """The label of our column for ``columns`` value ``value``: ``label(value)``, and in a table
        with ``datasets`` and ``columns`` prefixed by paper column ``column`` (default: the first,
        which the smoke and laptop data stand in for), ``"C100 α=0.1"`` as the paper prints it."""
        text = self.label(value) if self.label is not None else value
        if not self.datasets or self.columns is None:
            return text
        return f"{column if column is not None else next(iter(self.datasets))} {text}"

    def _pivot_columns(self, table: pd.DataFrame) -> tuple[pd.DataFrame, str | None, Callable[[Any], str] | None]:
        """``(table, column key, label)`` of :meth:`ours`: with the paper's columns, each cell under
        its paper column's label (and the ``columns`` value's, combined)."""
        if PAPER_COLUMN not in table.columns or not self.datasets:
            label = (lambda v: self.column_label(v)) if self.datasets and self.columns is not None else self.label
            return table, self.columns, label
        named = table[PAPER_COLUMN].fillna(next(iter(self.datasets)))
        if self.columns is None:
            return table.assign(**{PAPER_COLUMN: named}), PAPER_COLUMN, None
        combined = [self.column_label(v, c) for v, c in zip(table[self.columns], named)]
        return table.assign(**{PAPER_COLUMN: combined}), PAPER_COLUMN, None

    def ours(self, table: pd.DataFrame, metric: str | None = None, name: str | None = None) -> pd.DataFrame:
        """Our ``"mean ± std"`` table (one-seed cells marked ¹), columns labelled as the paper's. Results
        over the paper's columns (:data:`PAPER_COLUMN`) have one column per paper column (with
        ``columns``, per paper column and value); otherwise a table without ``columns`` has one
        column, named ``name`` (default: the metric)."""
        metric = metric or self.metric
        table, columns, label = self._pivot_columns(table)
        out = pivot_mean_std(table, self.index, columns, metric, label=label)
        if self.row_label is not None:
            out = out.rename(index=self.row_label)
        out = out.rename(index=_reading)
        return out.rename(columns={metric: name}) if columns is None and name else out

    def paper_numbers(self) -> pd.DataFrame | None:
        """The quoted table, restricted to ``reference_columns``; None when the paper has none."""
        if self.reference is None:
            return None

        ref = paper_table(self.paper, self.reference)
        if self.reference_columns is not None:
            ref = ref[[c for c in ref.columns if self.reference_columns(c)]]
        return ref if self.reference_view is None else self.reference_view(ref)

    def paper_lookup(self, column: str | None = None) -> Callable[[Any, Any], float | None]:
        """``lookup(row, col, dataset=None)``: the paper's number (%) for our row (an ``index`` value)
        and column (a ``columns`` value) in paper column ``dataset`` (default: the first of
        ``datasets``), under the labels :meth:`show` gives them (``row_label``, :meth:`column_label`);
        None where the paper quotes none. ``column`` names the paper's column outright (a table
        without ``columns``, or one whose paper columns are datasets). For a figure beside ours."""
        ref = self.paper_numbers()
        if ref is None:
            raise ConfigError(f"{self.paper} table {self.name!r} quotes no paper table (reference=None)")
        if column is not None and column not in ref.columns:
            raise ConfigError(f"paper_lookup(column={column!r}) for {self.paper} table {self.name!r}; "
                              f"valid: {', '.join(map(str, ref.columns))}")

        def lookup(row: Any, col: Any = None, dataset: str | None = None) -> float | None:
            r = self.row_label(row) if self.row_label is not None else row
            c = column if column is not None else self.column_label(col, dataset)
            r = r if r in ref.index else str(r)
            if r not in ref.index or c not in ref.columns:
                return None
            v = ref.at[r, c]
            return None if pd.isna(v) else float(v)

        return lookup

    def show(self, table: pd.DataFrame, metric: str | None = None, name: str | None = None,
             ours_label: str | None = None) -> pd.DataFrame:
        """Ours beside the paper's numbers (or ours alone when the paper reports none)."""
        ours = self.ours(table, metric, name)
        ref = self.paper_numbers()
        label = ours_label or f"ours ({'final' if (metric or self.metric).startswith('final') else 'best'} round)"
        if ref is None:
            return ours
        out = beside(ours, ref.rename(index=_reading), label)
        # Rows named after a grid axis (α) follow the paper's order; ours may hold only some of them.
        return out if self.row_label is None else out.reindex(list(dict.fromkeys([*ref.index, *ours.index])))


def halving_changes(tables: Mapping[str, TableDef], profile: str, halving: float = 0.25, eta: int = 3,
                    train: bool = False, progress: bool = False) -> pd.DataFrame:
    """Every searched row of ``tables`` (by id) at ``profile`` whose chosen learning rate differs
    between its table's search and the same search by successive halving (``LrSearch.halving``,
    ``eta``): ``table``, ``row`` (the row's method and non-rate settings), ``full lr``, ``halving
    lr``, ``short runs`` (rounds of the short runs). ``train``: train the search runs that are not
    stored (both searches'; the survivors' full runs are the full search's own), else a missing one
    raises :class:`~fedrepro.execute.tuning.TuningPending`. Only rows that change are listed: an
    empty table says halving picks every row's rate as the full search does."""
    from ..execute.run import run

    rows = []
    for tid, table in tables.items():
        full = table.search(profile)
        if full is None:
            continue
        cut = dataclasses.replace(full, halving=halving, eta=eta)
        seen: set[frozenset] = set()
        for cfg in table._untuned(profile, None, None, None, None, {}):
            key = frozenset(c.hash() for c in full.full_configs(cfg))
            if not key or key in seen:
                continue
            seen.add(key)
            chosen = []
            for search in (full, cut):
                while True:
                    try:
                        chosen.append(float(search.choose(cfg).train.lr))
                        break
                    except TuningPending as e:
                        if not train:
                            raise
                        for c in e.configs:
                            run(c, force_progress=progress)
            if chosen[0] != chosen[1]:
                rows.append({"table": tid, "row": _row_name(cfg), "full lr": chosen[0], "halving lr": chosen[1],
                             "short runs": f"{cut.short_rounds(cfg)} of {cfg.train.rounds} rounds"})
    return pd.DataFrame(rows, columns=["table", "row", "full lr", "halving lr", "short runs"])


def halving_replay(tables: Mapping[str, TableDef], profile: str, halving: float = 0.25, eta: int = 3) -> pd.DataFrame:
    """Every searched row of ``tables`` (by id) at ``profile``: the rate its table's search chose and
    the rate the same search by successive halving (``halving``, ``eta``) would choose, both read
    off the full search's stored runs (:meth:`~fedrepro.execute.tuning.LrSearch.replay_halving`:
    nothing trains), and the CPU seconds halving would not have spent (the stored time of the rounds
    after the short runs' end, in the rates it drops). A search in stages (PEP-FedPT's head rate,
    then its prompt rate) is replayed stage by stage, each from the full search's choice of the
    stage before, so each stage is judged on its own. Columns: ``table``, ``row``, ``stage`` (the
    searched key), ``full``, ``halving``, ``changed``, ``saved_s``; ``note`` where a stage could not be
    replayed (its short round not evaluated, or its full search not stored)."""
    read: dict[str, pd.DataFrame] = {}  # the replay and the saved seconds read the same runs

    def rounds_of(c: RunConfig) -> pd.DataFrame:
        h = c.hash()
        if h not in read:
            read[h] = RunStore(c.runs_dir).load(c).rounds
        return read[h]

    rows, seen = [], set()
    for tid, table in tables.items():
        search = table.search(profile)
        if search is None:
            continue
        for cfg in table._untuned(profile, None, None, None, None, {}):
            at = cfg
            for stage in search.stages:
                key = frozenset(c.hash() for c in stage.full_configs(at))
                try:
                    chosen_full = stage.choose(at)  # unchanged where the row is not searched (no key)
                except TuningPending as e:  # a row no notebook of the pass read: nothing to replay
                    rows.append({"table": tid, "row": _row_name(at), "stage": stage.key, "full": float("nan"),
                                 "halving": float("nan"), "changed": False, "saved_s": 0.0,
                                 "note": f"the full search is not stored ({len(e.configs)} runs)"})
                    break
                if not key or key in seen:
                    at = chosen_full
                    continue
                seen.add(key)
                cut = dataclasses.replace(stage, halving=halving, eta=eta)
                full = stage.rate(chosen_full)
                try:
                    (chosen, keep), note = cut.replay_halving(at, rounds_of), ""
                except ConfigError as e:
                    (chosen, keep), note = (float("nan"), []), str(e)
                short = cut.short_rounds(at)
                dropped = [c for c in stage.full_configs(at) if stage.rate(c) not in keep] if not note else []
                saved = sum(float(r.loc[r["round"] > short, ["time_train_s", "time_eval_s"]].sum().sum())
                            for r in map(rounds_of, dropped))
                rows.append({"table": tid, "row": _row_name(at), "stage": stage.key, "full": full, "halving": chosen,
                             "changed": bool(chosen != full) and not note, "saved_s": saved, "note": note})
                at = chosen_full
    return pd.DataFrame(rows, columns=["table", "row", "stage", "full", "halving", "changed", "saved_s", "note"])


def _row_name(cfg: RunConfig) -> str:
    """A searched row as a reader names it: its method, its arguments and its partition's α."""
    args = ", ".join(f"{k}={v}" for k, v in sorted(cfg.method.args.items()))
    alpha = cfg.data.partition_args.get("alpha")
    return (f"{cfg.method.name}({args})" if args else cfg.method.name) + (f" α={alpha:g}" if alpha is not None else "")
