"""What a ``fedrepro reproduce`` pass will cost, predicted before it runs (``--predict``).

Every number here is a prediction, not a measurement. It takes every run the selected notebooks
read (a tuned table's rows at their setup's learning rate until its search is stored:
:func:`fedrepro.execute.tuning.provisional_rates`; a run's cost does not depend on its rate),
estimates each from its config's size (:func:`fedrepro.execute.local.estimate_cost`), and converts
that estimate to seconds with the seconds per unit that a pass's report measured
(``timings.json``: every task's time; the committed ``bench/timings.json`` by default): per kind
of run where the report timed a run of the same kind, else per method, else over all its runs.
Analyses and renders take the report's times for the same analysis and notebook.

Beside the pass itself it predicts:

- the **sequential seeds** at their worst: every claim with ``max_seeds`` > 3 that stays
  INCONCLUSIVE to its last stage extends the tables of its notebook (as
  :func:`fedrepro.papers.plan.seed_stage` does when the claim names no run) to its stages' seeds;
  a claim's notebook is the one that recorded it, else the one the profile's committed results
  pages name; a claim no notebook is known for is listed, not costed;
- the **speed levers** of docs/speed.md that the plan alone can cost: successive halving of the
  learning-rate searches (``LrSearch(halving=, eta=)``), and prefix sharing (a run starting from a
  stored run that is its prefix, ``FEDREPRO_SHARE_PREFIX``: :mod:`fedrepro.runs.prefix`). Stopping runs once flat
  (``train.stop_when_flat``) needs each run's curve, which a report does not hold: it is not
  predicted.
"""
from __future__ import annotations

import json
import math
import statistics
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Mapping

from ..claims.core import CLAIMS, DEFAULT_MAX_SEEDS, KEPT, claims_dir, kept_records, recorded_claims, stages
from ..config import RunConfig, from_dict
from ..errors import ConfigError, FedreproError
from ..env.host import repo_root
from ..env.jsonfiles import read_json_file
from ..execute.local import SETUP_COST, Task, estimate_cost, unfinished
from ..execute.tuning import provisional_rates
from ..papers import PAPERS, claim_seeds, load_all, paper as paper_package
from ..papers.plan import needs_of, notebook_key
from ..papers.verdicts import notebook_path
from ..runs import archive
from ..runs.prefix import prefixes_among
from ..runs.store import RunResult

# The report of the last whole laptop pass, committed (docs/speed.md): the default calibration.
BENCH_TIMINGS = Path("bench") / "timings.json"
# docs/speed.md's example of a halving search: every rate at a quarter of the rounds, the best third in full.
HALVING, ETA = 0.25, 3


@dataclass
class Calibration:
    """Seconds per unit of :func:`estimate_cost` from a pass's report, and its analyses' and renders' times."""

    by_kind: dict[tuple, list[float]] = field(default_factory=lambda: defaultdict(list))
    by_method: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    analyses: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    renders: dict[str, float] = field(default_factory=dict)
    report: str = "given"    # the report's path, as shown
    timed_runs: int = 0      # runs the report timed
    matched: int = 0         # of those, runs the plan has today (same config hash)
    from_store: int = 0      # of the others, runs whose config the store keeps
    from_archive: int = 0    # runs of the reference archive the report did not time (their own train + eval time)

    @property
    def all_runs(self) -> list[float]:
        return [r for v in self.by_kind.values() for r in v]

    def basis(self, cfg: RunConfig) -> str:
        """What :meth:`run_seconds` calibrates ``cfg`` on: "kind" (runs of its kind were timed),
        "method" (runs of its method) or "all" (the median over every timed run)."""
        return "kind" if self.by_kind.get(Task("", cfg).kind) else \
            "method" if self.by_method.get(cfg.method.name) else "all"

    def run_seconds(self, cfg: RunConfig) -> float:
        kind = Task("", cfg).kind
        ratios = self.by_kind.get(kind) or self.by_method.get(cfg.method.name) or self.all_runs
        if not ratios:
            raise ConfigError(f"the report {self.report} timed none of the runs that today's plan has (the configs "
                              "changed since); valid: the timings.json of a pass over them (--timings)")
        return estimate_cost(cfg) * statistics.median(ratios)

    def analysis_seconds(self, name: str) -> float:
        times = self.analyses.get(name) or [t for v in self.analyses.values() for t in v]
        return statistics.median(times) if times else 0.0

    def render_seconds(self, notebook: str) -> float:
        if notebook in self.renders:
            return self.renders[notebook]
        return statistics.median(self.renders.values()) if self.renders else 0.0


def calibrate(report: Mapping, runs: Mapping[str, RunConfig], store: Path | None = None,
              archived: Mapping[str, tuple[RunConfig, float]] | None = None) -> Calibration:
    """The :class:`Calibration` of a pass's ``report`` (its ``tasks``: key -> seconds) over the
    runs whose hashes it timed: those of ``runs`` (hash -> config), and those whose config lies in
    ``store``, which keeps the runs of configs that have changed since the report (so a report still
    calibrates the kinds of run it timed). ``archived`` (hash -> (config, seconds)): the reference
    archive's runs with their recorded training and evaluation time, which calibrate the kinds the
    report did not time (a fresh clone's store is empty, and the archive's pass is newer)."""
    cal = Calibration()
    timed = set(report.get("tasks", {}))
    for key, (cfg, seconds) in (archived or {}).items():
        if key in timed or seconds <= 0:
            continue
        ratio = float(seconds) / estimate_cost(cfg)
        cal.by_kind[Task(key, cfg).kind].append(ratio)
        cal.by_method[cfg.method.name].append(ratio)
        cal.from_archive += 1
    for key, seconds in report.get("tasks", {}).items():
        if key.startswith("render:"):
            cal.renders[key.removeprefix("render:")] = float(seconds)
        elif ":" in key:
            cal.analyses[key.split(":", 1)[0]].append(float(seconds))
        else:
            cal.timed_runs += 1
            cfg = runs.get(key)
            cal.matched += cfg is not None
            if cfg is None and store is not None:
                cfg = _stored_config(store / key)
                cal.from_store += cfg is not None
            if cfg is not None:
                ratio = float(seconds) / estimate_cost(cfg)
                cal.by_kind[Task(key, cfg).kind].append(ratio)
                cal.by_method[cfg.method.name].append(ratio)
    return cal


def _need_configs(need, paper: str, profile: str, seeds: list[int] | None = None
                  ) -> tuple[list[RunConfig], list[RunConfig]]:
    """``(runs, search runs)`` of a need: its rows at their chosen rates, or their setup's where the
    search is not stored (:func:`provisional_rates`), at the claim seeds ``seeds`` where given; and
    the search runs they read."""
    with provisional_rates() as waiting:
        if need.runs is not None:
            cfgs = list(need.runs(profile))
            return cfgs + waiting, list(waiting)
        table = paper_package(paper).TABLES[need.table]
        kw = dict(need.kwargs)
        search = table.search_configs(profile, **kw)
        if seeds is not None:
            kw["seeds"] = seeds
        cfgs = table.configs(profile, **kw)
    return search + cfgs, search


@dataclass
class PlannedRuns:
    runs: dict[str, RunConfig] = field(default_factory=dict)          # hash -> config
    notebook: dict[str, str] = field(default_factory=dict)            # hash -> first notebook reading it
    analyses: dict[tuple[str, str], str] = field(default_factory=dict)  # (analysis, hash) -> notebook
    searches: set[str] = field(default_factory=set)                  # hashes of search runs

    def add(self, cfgs: Iterable[RunConfig], notebook: str) -> None:
        for cfg in cfgs:
            h = cfg.hash()
            self.runs.setdefault(h, cfg)
            self.notebook.setdefault(h, notebook)


def planned_runs(notebooks: Iterable[Path], nb_root: Path, profile: str) -> PlannedRuns:
    """Every run (and cached analysis) of ``notebooks`` at ``profile``, without waiting for any search."""
    out = PlannedRuns()
    for path in notebooks:
        needs = needs_of(path, nb_root)
        if not needs:
            continue
        paper, rel = notebook_key(path, nb_root)[0], str(path.relative_to(nb_root))
        for need in needs:
            if profile not in need.profiles:
                continue
            cfgs, search = _need_configs(need, paper, profile)
            out.searches.update(c.hash() for c in search)
            out.add(cfgs, rel)
            for cfg in cfgs:
                if cfg.hash() not in out.searches and (need.where is None or need.where(cfg)):
                    for name in need.analyses:
                        out.analyses.setdefault((name, cfg.hash()), rel)
    return out


def paper_of(notebook: str) -> str:
    """The paper a notebook (its path under ``notebooks/``) belongs to: its folder, the tour for a
    notebook at the top level."""
    return notebook.split("/")[0] if "/" in notebook else "tour"


def claim_notebooks(profile: str, pages: Path | None = None) -> dict[str, str]:
    """Claim id -> the notebook (path under ``notebooks/``, with ``.ipynb``) that checks it: from the
    claims the notebooks recorded at ``profile``, else from the records kept beside the committed
    results pages ``pages`` (:func:`fedrepro.claims.core.kept_records`)."""
    recorded = recorded_claims(claims_dir(profile))
    if recorded:
        return {cid: notebook_path(r["notebook"]) + ".ipynb" for cid, r in recorded.items()}
    kept = kept_records(Path(pages) / KEPT) if pages is not None else {}
    return {row["claim_id"]: r["path"] + ".ipynb" for r in kept.values() for row in r["claims"]}


def seed_stage_runs(notebooks: Iterable[Path], nb_root: Path, profile: str, checked_in: Mapping[str, str],
                    known: set[str]) -> tuple[dict[int, dict[str, RunConfig]], list[str]]:
    """The runs the sequential claims would add if each stayed INCONCLUSIVE to its maximum:
    ``({stage: {hash: config}}, [claims whose notebook is unknown])``; each stage's runs are those
    beyond the previous stage's (and beyond ``known``, the pass's own runs)."""
    load_all()
    by_path = {str(p.relative_to(nb_root)): p for p in notebooks}
    selected = {notebook_key(p, nb_root)[0] for p in by_path.values()}
    top: dict[tuple[str, str], int] = {}   # (notebook, table) -> the largest max_seeds of its claims
    unknown = []
    for cid in CLAIMS.names():
        claim = CLAIMS.get(cid)
        if claim.max_seeds <= DEFAULT_MAX_SEEDS:
            continue
        nb = checked_in.get(cid)
        if nb is None:
            if claim.paper in selected:
                unknown.append(cid)
            continue
        if nb not in by_path:
            continue  # a notebook outside the selection (--only)
        for need in needs_of(by_path[nb], nb_root) or []:
            table = paper_package(claim.paper).TABLES.get(need.table) if need.table else None
            if table is None or profile not in need.profiles or "seeds" in need.kwargs:
                continue
            if any(g.seeds == "claim" for g in table.row_groups(profile)):
                key = (nb, need.table)
                top[key] = max(top.get(key, 0), claim.max_seeds)
    out: dict[int, dict[str, RunConfig]] = {}
    seen = set(known)
    for n in sorted({s for m in top.values() for s in stages(m)} - {DEFAULT_MAX_SEEDS}):
        added: dict[str, RunConfig] = {}
        for (nb, table_name), m in top.items():
            if n > m:
                continue
            paper = notebook_key(by_path[nb], nb_root)[0]
            need = next(x for x in needs_of(by_path[nb], nb_root) if x.table == table_name)
            base = claim_seeds(profile, paper_package(paper).TABLES[table_name].key)
            seeds = base + [max(base) + 1 + i for i in range(n - len(base))]
            for cfg in _need_configs(need, paper, profile, seeds)[0]:
                h = cfg.hash()
                if h not in seen:
                    added[h] = cfg
        seen |= set(added)
        out[n] = added
    return out, unknown


def _without(cfg: RunConfig, *train_keys: str) -> str:
    """A key of ``cfg`` that ignores the ``train`` fields ``train_keys`` (runs that differ only there)."""
    d = cfg.to_dict()
    for k in train_keys:
        d["train"].pop(k, None)
    return json.dumps(d, sort_keys=True, default=str)


def halving_saving(planned: PlannedRuns, cal: Calibration, halving: float = HALVING, eta: int = ETA) -> float:
    """Seconds a halving search (every rate at ``halving`` of the rounds, the best 1/``eta`` in full)
    would save over the full searches of the plan: per rate, its run at the shorter rounds plus the
    share ⌈n/eta⌉/n of its full run, against its full run (n rates per row: runs that differ only in
    their rate)."""
    rows: dict[str, list[RunConfig]] = defaultdict(list)
    for h in planned.searches:
        cfg = planned.runs[h]
        rows[_without(cfg, "lr", "prompt_lr")].append(cfg)
    saved = 0.0
    for cfgs in rows.values():
        n = len(cfgs)
        for cfg in cfgs:
            full = cal.run_seconds(cfg)
            short = cal.run_seconds(cfg.replace(**{"train.rounds": max(1, round(halving * cfg.train.rounds))}))
            saved += full - (short + full * math.ceil(n / eta) / n)
    return saved


def prefix_saving(runs: Mapping[str, RunConfig], cal: Calibration) -> tuple[float, int]:
    """``(seconds, runs)``: what starting each run from its longest prefix among ``runs`` would save
    (:func:`fedrepro.runs.prefix.candidates`: its config with fewer rounds, without the early stop up
    to ``train.flat_from``, or its twin with the stop, whose estimate, at its maximum, bounds it from
    above): the donor's training, less the set-up every run pays (:func:`estimate_cost`'s constant).
    The pass trains each run after its prefixes (:func:`fedrepro.runs.prefix.waits_for`)."""
    saved, n = 0.0, 0
    for found in prefixes_among(runs).values():
        if found:
            donor = found[0]
            cost = estimate_cost(donor)
            saved += cal.run_seconds(donor) * (cost - SETUP_COST) / cost
            n += 1
    return saved, n


def predict(notebooks: list[Path], nb_root: Path, profile: str, report: Path, pages: Path | None = None,
            runs_dir: str | None = None) -> dict:
    """The predicted CPU seconds of a pass over ``notebooks`` (see the module doc), calibrated on
    ``report``; ``runs_dir``: the store whose runs count as trained (default each config's own)."""
    timings = read_json_file(report, "timings file", "name a timings.json written by `fedrepro reproduce`",
                             {"tasks": dict})
    planned = planned_runs(notebooks, nb_root, profile)
    if runs_dir is not None:
        planned.runs = {h: c.replace(runs_dir=runs_dir) for h, c in planned.runs.items()}
    cal = calibrate(timings, planned.runs, Path(runs_dir) if runs_dir is not None else None,
                    archived_times(profile))
    cal.report = _shown(Path(report))  # as the error of a kind it cannot calibrate names it
    left = unfinished(list(planned.runs.values()))
    papers: dict[str, dict[str, float]] = {}

    def row(paper: str) -> dict[str, float]:
        return papers.setdefault(paper, {"runs": 0, "runs_s": 0.0, "to_train": 0, "to_train_s": 0.0,
                                         "analyses_s": 0.0, "renders_s": 0.0, "kind": 0, "method": 0, "all": 0})
    for h, cfg in planned.runs.items():
        r, s = row(paper_of(planned.notebook[h])), cal.run_seconds(cfg)
        r["runs"] += 1
        r[cal.basis(cfg)] += 1
        r["runs_s"] += s
        if h in left:
            r["to_train"] += 1
            r["to_train_s"] += s
    for (name, _), nb in planned.analyses.items():
        row(paper_of(nb))["analyses_s"] += cal.analysis_seconds(name)
    for path in notebooks:
        rel = str(path.relative_to(nb_root))
        paper = paper_of(rel)
        row(paper if paper in PAPERS else "no paper")["renders_s"] += cal.render_seconds(rel)
    for r in papers.values():
        r["total_s"] = r["runs_s"] + r["analyses_s"] + r["renders_s"]
    extra, unknown = seed_stage_runs(notebooks, nb_root, profile, claim_notebooks(profile, pages), set(planned.runs))
    stage_s = {n: sum(cal.run_seconds(c) for c in cfgs.values()) for n, cfgs in extra.items()}
    prefix_s, prefix_n = prefix_saving(planned.runs, cal)
    return {
        "profile": profile, "report": cal.report, "report_commit": timings.get("commit"),
        "runs_timed": cal.timed_runs, "runs_matched": cal.matched, "runs_from_store": cal.from_store,
        "runs_from_archive": cal.from_archive,
        "runs": len(planned.runs),
        "papers": papers, "total_s": sum(r["total_s"] for r in papers.values()),
        "to_train_s": sum(r["to_train_s"] for r in papers.values()),
        "seed_stages": {n: {"runs": len(extra[n]), "seconds": s} for n, s in stage_s.items()},
        "seed_stages_s": sum(stage_s.values()), "claims_without_notebook": unknown,
        "halving_saving_s": halving_saving(planned, cal), "halving": [HALVING, ETA],
        "prefix_saving_s": prefix_s, "prefix_runs": prefix_n,
    }


def archived_times(profile: str) -> dict[str, tuple[RunConfig, float]]:
    """The reference archive's runs at ``profile`` (:mod:`fedrepro.runs.archive`) with the seconds
    each took to train and evaluate where it was trained; empty without an archive. A run whose
    config no longer reads (a field renamed since), or that timed nothing, is left out."""
    arch = archive.Archive(archive.archive_folder(profile))
    if not arch.exists():
        return {}
    out = {}
    for h, run in arch.runs.items():
        try:
            cfg = from_dict(json.loads(run.files["config.json"])["config"])
            s = json.loads(run.files["summary.json"])
            seconds = float(s.get("time_train_s", 0)) + float(s.get("time_eval_s", 0))
        except (FedreproError, KeyError, TypeError, ValueError):
            continue
        if seconds > 0:  # a run that trained nothing (0 rounds) times nothing
            out[h] = (cfg, seconds)
    return out


def _stored_config(folder: Path) -> RunConfig | None:
    """The config stored in a run's ``folder``; None where there is none, or it no longer reads as
    a config (a field renamed since)."""
    try:
        return RunResult(folder).config
    except (FedreproError, OSError):
        return None


def _shown(path: Path) -> str:
    """``path`` relative to the repository where it lies in it."""
    try:
        return str(path.resolve().relative_to(repo_root()))
    except ValueError:
        return str(path)


def _h(seconds: float) -> str:
    return f"{seconds / 3600:.2f} CPU-h"


def text(p: Mapping, workers: int) -> str:
    """The prediction as ``--predict`` prints it."""
    lines = [f"[reproduce] predicted cost at {p['profile']} (a prediction, not a measurement: each run's size "
             f"estimate times the seconds per unit that {p['report']} (commit {p['report_commit']}) measured; "
             f"{p['runs_matched']} of its {p['runs_timed']} timed runs are in today's plan of {p['runs']} runs, and "
             f"{p.get('runs_from_store', 0)} more calibrate their kind from the configs the store keeps, "
             f"{p.get('runs_from_archive', 0)} from the reference archive's runs):"]
    for paper, r in p["papers"].items():
        lines.append(f"    {paper}: {r['runs']} runs {_h(r['runs_s'])} ({r['to_train']} to train, "
                     f"{_h(r['to_train_s'])}), analyses {_h(r['analyses_s'])}, renders {_h(r['renders_s'])}"
                     + (f"; runs calibrated on their kind {r['kind']}, their method {r['method']}, all runs "
                        f"{r['all']}" if r["runs"] else ""))
    lines.append(f"    all: {_h(p['total_s'])} from an empty store, about {p['total_s'] / 3600 / workers:.1f} h of "
                 f"wall time on {workers} workers if every core stays busy; {_h(p['to_train_s'])} of training left "
                 "in this store")
    for n, s in p["seed_stages"].items():
        lines.append(f"    sequential seeds, stage {n}: +{s['runs']} runs, +{_h(s['seconds'])} if every claim "
                     "that may go on is still INCONCLUSIVE")
    unknown = p["claims_without_notebook"]
    if unknown:
        lines.append(f"    not costed: {len(unknown)} sequential claims no notebook is known to check (none recorded, "
                     f"none on the results pages), e.g. {', '.join(unknown[:3])}")
    halving, eta = p["halving"]
    lines.append(f"    levers (docs/speed.md): halving searches (halving={halving}, eta={eta}) would save "
                 f"{_h(p['halving_saving_s'])}; prefix sharing {_h(p['prefix_saving_s'])} over {p['prefix_runs']} "
                 "runs; stop_when_flat: not predicted (needs each run's curve)")
    return "\n".join(lines)
