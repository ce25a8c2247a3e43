"""What each notebook reads, known before it runs: the plan that ``fedrepro reproduce`` trains first.

Every paper package has a ``NOTEBOOKS`` mapping (``notebooks.py``) from a notebook's file stem to
its :class:`Need` entries: a table of the paper (``TableDef.configs``) or runs built another way,
and the cached analyses the notebook computes on them. :func:`plan` turns the selected notebooks
into one deduplicated list of runs and analyses; a run two notebooks share appears once.

A plan is a promise, checked: while a notebook renders, :mod:`fedrepro.env.trace` records every run it
reads, and a run the notebook had to train itself (the plan missed it) is reported by name.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from ..config import PROFILES, RunConfig, check_profile, default_seeds
from ..errors import ConfigError
from . import PAPERS
from . import paper as paper_package


@dataclass(frozen=True)
class Need:
    """Runs a notebook reads: one table of its paper (``table``, with ``TableDef.configs``
    keywords in ``kwargs``) or runs built another way (``runs``: profile -> configs), and the
    analyses (names in :data:`fedrepro.analysis.grid.CACHED`) it computes on those of them that
    ``where`` accepts. ``profiles``: the profiles at which the notebook reads them.

    ``stage`` (runs built another way only): the name (``"<paper>/<name>"``) under which the
    sequential claims' stages record more seeds for these runs (:func:`seed_stage`); ``runs`` must
    then build its claim seeds with :func:`fedrepro.papers.claim_seeds` under that name. None: the
    runs keep the seeds ``runs`` gives them."""

    table: str | None = None
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    runs: Callable[[str], Iterable[RunConfig]] | None = None
    analyses: tuple[str, ...] = ()
    where: Callable[[RunConfig], bool] | None = None
    profiles: tuple[str, ...] = PROFILES
    stage: str | None = None

    def __post_init__(self) -> None:
        if (self.table is None) == (self.runs is None):
            raise ConfigError("Need: give exactly one of table= (a table name) or runs= (profile -> configs)")
        if self.stage is not None and (self.runs is None or not isinstance(self.stage, str) or "/" not in self.stage):
            raise ConfigError(f"Need(stage={self.stage!r}): a stage name '<paper>/<name>' goes with runs=, not table=")

    def configs(self, paper: str, profile: str) -> list[RunConfig]:
        if profile not in self.profiles:
            return []
        if self.runs is not None:
            return list(self.runs(profile))

        tables = paper_package(paper).TABLES
        if self.table not in tables:
            raise ConfigError(f"Need(table={self.table!r}): paper {paper!r} has no such table; valid: "
                              f"{', '.join(tables)}")
        table = tables[self.table]
        # A tuned table's notebook also reads its learning-rate search (TuningPending until stored).
        return table.search_configs(profile, **dict(self.kwargs)) + table.configs(profile, **dict(self.kwargs))

    def untuned(self, paper: str, profile: str) -> list[RunConfig]:
        """The table's rows at their setup's rates (what a learning-rate search tunes, one run each);
        [] for runs built another way."""
        if self.table is None or profile not in self.profiles:
            return []
        return paper_package(paper).TABLES[self.table].configs(profile, tuned=False, **dict(self.kwargs))


@dataclass
class Plan:
    """The runs and cached analyses of a set of notebooks, each once."""

    runs: dict[str, RunConfig] = field(default_factory=dict)              # config hash -> config
    analyses: dict[tuple[str, str], RunConfig] = field(default_factory=dict)  # (analysis, run hash) -> run
    readers: dict[str, list[str]] = field(default_factory=dict)           # notebook -> run hashes
    computes: dict[str, list[tuple[str, str]]] = field(default_factory=dict)  # notebook -> analyses
    # Notebooks whose tables wait for a learning-rate search (fedrepro.execute.tuning): planned so far are
    # only the search runs; plan again once they are stored.
    incomplete: list[str] = field(default_factory=list)
    # The rows those searches tune, at their setup's rates (config hash -> config): one run each once
    # tuned, so the count of runs still to be planned (about: two rows may tune to one run).
    after_searches: dict[str, RunConfig] = field(default_factory=dict)
    # Run hash -> the runs to train that may be its stored prefix, for the pool to train first
    # (fedrepro.runs.prefix.waits_for; empty unless prefix sharing is on). Filled by the caller that
    # knows which runs it will train.
    waits: dict[str, frozenset[str]] = field(default_factory=dict)

    def add(self, notebook: str, paper: str, needs: Iterable[Need], profile: str) -> None:
        from ..execute.tuning import TuningPending

        hashes = self.readers.setdefault(notebook, [])
        mine = self.computes.setdefault(notebook, [])
        for need in needs:
            try:
                cfgs, searching = need.configs(paper, profile), False
            except TuningPending as e:
                cfgs, searching = e.configs, True
                if notebook not in self.incomplete:
                    self.incomplete.append(notebook)
                self.after_searches.update((c.hash(), c) for c in need.untuned(paper, profile))
            for cfg in cfgs:
                h = cfg.hash()
                self.runs.setdefault(h, cfg)
                if h not in hashes:
                    hashes.append(h)
                if not searching and (need.where is None or need.where(cfg)):
                    for name in need.analyses:
                        self.analyses.setdefault((name, h), cfg)
                        if (name, h) not in mine:
                            mine.append((name, h))


def notebook_key(path: Path, nb_root: Path) -> tuple[str, str]:
    """``(paper, stem)`` of a numbered notebook: ``fedpft/02_x.ipynb`` -> ``("fedpft", "02_x")``;
    a notebook at the top level belongs to the tour (``00_tour``) or to no paper (``99_*``)."""
    rel = path.relative_to(nb_root)
    return (rel.parts[0] if len(rel.parts) > 1 else "tour"), path.stem


def needs_of(path: Path, nb_root: Path) -> list[Need] | None:
    """The notebook's :class:`Need` entries; None when its folder is not a paper's (the backbones'
    notebooks and the claims summary read no runs)."""
    name, stem = notebook_key(path, nb_root)
    if name not in PAPERS or stem.startswith("99_"):
        return None
    table = getattr(paper_package(name), "NOTEBOOKS", {})
    if stem not in table:
        raise ConfigError(f"notebook {path.relative_to(nb_root)} has no entry in fedrepro.papers.{name}.NOTEBOOKS; "
                          f"add one (an empty list when it reads no runs); entries: {', '.join(table)}")
    return list(table[stem])


def plan(notebooks: Iterable[Path], nb_root: Path, profile: str, runs_dir: str | None = None) -> Plan:
    """The plan of ``notebooks`` at ``profile``; ``runs_dir`` replaces each config's runs folder
    (the folder the notebooks will read, ``FEDREPRO_RUNS`` by default)."""
    check_profile(profile)
    out = Plan()
    for path in notebooks:
        needs = needs_of(path, nb_root)
        rel = str(path.relative_to(nb_root))
        if needs is None:
            out.readers[rel], out.computes[rel] = [], []
            continue
        out.add(rel, notebook_key(path, nb_root)[0], needs, profile)
    out.after_searches = {h: c for h, c in out.after_searches.items() if h not in out.runs}
    if runs_dir is not None:
        out.runs = {h: c.replace(runs_dir=runs_dir) for h, c in out.runs.items()}
        out.analyses = {k: c.replace(runs_dir=runs_dir) for k, c in out.analyses.items()}
    return out


def _tables_read(path: Path, nb_root: Path, profile: str, record: Mapping[str, Any]) -> list[str]:
    """The seed-stage names (table keys, or a ``Need``'s ``stage``) whose runs ``record`` (one claim
    of the notebook ``path``) read: every table of the notebook with claim rows where the record names
    no run (a check on values derived from the runs). Runs built another way than by a table
    (``Need(runs=...)``) count under their ``stage`` name where they have one; without one their
    notebooks choose their own seeds."""
    from ..execute.tuning import TuningPending  # defers torch, as Plan.add does

    needs = needs_of(path, nb_root)
    if not needs:
        return []
    paper = notebook_key(path, nb_root)[0]
    read = set(record.get("runs") or ())
    tables = paper_package(paper).TABLES
    chosen = []
    for need in needs:
        if need.stage is not None:
            if profile in need.profiles and (not read or {c.hash() for c in need.configs(paper, profile)} & read):
                chosen.append(need.stage)
            continue
        if need.table is None or profile not in need.profiles:
            continue
        table = tables[need.table]
        if read:
            try:
                hashes = {c.hash() for c in need.configs(paper, profile)}
            except TuningPending:
                continue
            if hashes & read:
                chosen.append(table.key)
        elif any(g.seeds == "claim" for g in table.row_groups(profile)):
            chosen.append(table.key)
    return chosen


def seed_stage(notebooks: Iterable[Path], nb_root: Path, profile: str,
               recorded: Mapping[str, Mapping[str, Any]]) -> tuple[dict[str, int], list[str]]:
    """The next stage of the sequential claims (:data:`fedrepro.claims.core.STAGES`) among
    ``notebooks``: ``({table key: seeds}, [notebooks to render again])``, from the claims they
    recorded (``recorded``: :func:`fedrepro.claims.core.recorded_claims`, by claim id).

    A claim INCONCLUSIVE at one of its stages below its ``max_seeds``
    (:func:`~fedrepro.claims.core.next_stage`) asks for its next stage's seeds on the tables of its
    notebook whose runs it read (:func:`_tables_read`)."""
    from ..claims.core import DEFAULT_MAX_SEEDS, next_stage, record_name  # defers pandas, as Plan.add does

    saved = {record_name(p.relative_to(nb_root)): p for p in notebooks}
    grow: dict[str, int] = {}
    again: list[str] = []
    for record in recorded.values():
        path = saved.get(str(record.get("notebook")))
        if path is None:
            continue
        rel = str(path.relative_to(nb_root)).removesuffix(".ipynb")
        n_read = len(record.get("seeds") or ())
        nxt = next_stage(str(record.get("verdict")), n_read, int(record.get("max_seeds") or DEFAULT_MAX_SEEDS))
        if nxt is None:
            continue
        chosen = _tables_read(path, nb_root, profile, record)
        for key in chosen:
            grow[key] = max(grow.get(key, 0), nxt)
        if chosen and rel + ".ipynb" not in again:
            again.append(rel + ".ipynb")
    return grow, again


def recorded_stages(notebooks: Iterable[Path], nb_root: Path, profile: str,
                    recorded: Mapping[str, Mapping[str, Any]]) -> dict[str, int]:
    """The seed stage each table stood at when ``recorded`` (claim records by id) were written:
    ``{table key: seeds}`` for every table a claim read at more than the profile's claim seeds (the
    largest such count). The reference archive keeps it beside the records (:mod:`fedrepro.runs.archive`),
    so that a notebook reading the archive plans the seeds its page's verdicts rest on."""
    from ..claims.core import record_name  # defers pandas, as Plan.add does

    saved = {record_name(p.relative_to(nb_root)): p for p in notebooks}
    base = len(default_seeds(profile))
    out: dict[str, int] = {}
    for record in recorded.values():
        path = saved.get(str(record.get("notebook")))
        n_read = len(record.get("seeds") or ())
        if path is None or n_read <= base:
            continue
        for key in _tables_read(path, nb_root, profile, record):
            out[key] = max(out.get(key, 0), n_read)
    return dict(sorted(out.items()))
