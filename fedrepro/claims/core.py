"""Claims: a statement from a paper (with its table or section) and a check of it on our results.

A check takes a tidy results table (one row per run: the grid columns, ``seed``, ``best``,
``final``...) and returns a :class:`Test` (or several) with the evidence: the numbers it compared
and the seeds. A test is an effect measured once per seed (a paired difference, a gap between
two settings, a correlation), its interval over the seeds, and what the claim requires of it, so
that a verdict says how sure it is:

- **PASS**: the whole interval clears the claim's bound;
- **FAIL**: the whole interval falls short of it;
- **INCONCLUSIVE**: the interval straddles the bound: the seeds cannot tell.

The interval is Student's t over the per-seed effects (:data:`INTERVAL`): 90% two-sided, so each
end is a one-sided 95% bound, the test a one-sided claim ("A beats B by more than m") calls for.
With 3 seeds t is 2.92, so an effect must clear its bound by about 1.7 seed standard deviations
to pass. Thresholds live in the claim, in plain sight.

A table that runs the paper's dataset columns (``fedrepro.papers.tables.TableDef.datasets``, at the
paper profile) names each row's column in :data:`PAPER_COLUMN`. A claim reads the columns it names
(:attr:`Claim.paper_columns`), each on its own, and must hold in every one of them; it never mixes
the runs of two datasets.
"""
from __future__ import annotations

import math
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from ..jsonfiles import read_json_file
from ..papers.tables import PAPER_COLUMN
from ..registry import Registry


LEVEL = 0.90
INTERVAL = "Student's t over the per-seed effects, 90% two-sided (each end a one-sided 95% bound)"
VERDICTS = ("PASS", "INCONCLUSIVE", "FAIL", "NOT RUN")
# The ways a claim constrains its effect: above a bound, below it, or within ±bound of zero.
REQUIRES = (">", "<", "within")


def t_interval(values: Sequence[float], level: float = LEVEL) -> tuple[float, float, float]:
    """``(mean, low, high)`` of ``values`` (one per seed): Student's t interval at ``level``. One value
    gives an unbounded interval (no spread to estimate), so nothing rests on a single seed."""
    from scipy import stats

    v = np.asarray(values, dtype=float)
    if v.size == 0:
        raise MissingResults("no per-seed values")
    mean = float(v.mean())
    if v.size < 2:
        return mean, -math.inf, math.inf
    half = float(stats.t.ppf(0.5 + level / 2, v.size - 1) * v.std(ddof=1) / math.sqrt(v.size))
    return mean, mean - half, mean + half


@dataclass(frozen=True)
class Test:
    """An effect measured once per seed, its t interval, and what the claim requires of it:
    ``requires`` ">" (the effect exceeds ``bound``), "<" (it falls below ``bound``) or "within"
    (``|effect| <= bound``). ``scale`` and ``unit`` display it (100 and " pts" for accuracy
    differences kept as fractions)."""

    name: str
    values: tuple[float, ...]
    seeds: tuple
    requires: str
    bound: float
    scale: float = 100.0
    unit: str = " pts"
    exact: bool = False   # a quantity no seed changes (a parameter count): its interval is its value

    def __post_init__(self) -> None:
        if self.requires not in REQUIRES:
            raise ValueError(f"Test.requires must be one of {REQUIRES}, got {self.requires!r}")

    @property
    def interval(self) -> tuple[float, float, float]:
        if self.exact:
            v = float(np.mean(self.values))
            return v, v, v
        return t_interval(self.values)

    @property
    def verdict(self) -> str:
        _, low, high = self.interval
        if self.requires == ">":
            return "PASS" if low > self.bound else "FAIL" if high <= self.bound else "INCONCLUSIVE"
        if self.requires == "<":
            return "PASS" if high < self.bound else "FAIL" if low >= self.bound else "INCONCLUSIVE"
        b = abs(self.bound)
        return "PASS" if -b <= low and high <= b else "FAIL" if low > b or high < -b else "INCONCLUSIVE"

    def __bool__(self) -> bool:
        raise TypeError("a Test has three verdicts; read .verdict (PASS, FAIL or INCONCLUSIVE)")

    def _num(self, x: float, digits: int = 2) -> str:
        if not math.isfinite(x):
            return "+∞" if x > 0 else "−∞"
        # Percentages keep fixed decimals; a correlation or a cosine keeps its significant digits.
        return f"{self.scale * x:+.{digits}f}" if self.scale == 100.0 else f"{self.scale * x:+.3g}"

    @property
    def interval_text(self) -> str:
        mean, low, high = self.interval
        need = {"<": "< ", ">": "> ", "within": "within ±"}[self.requires]
        bound = self.scale * (abs(self.bound) if self.requires == "within" else self.bound)
        return (f"{self._num(mean)}{self.unit} [{self._num(low)}, {self._num(high)}], required {need}"
                f"{bound:+.2f}{self.unit}".replace("±+", "±"))

    def text(self) -> str:
        if self.exact:
            return f"{self.name}: {self.interval_text} (exact: no seed changes it) → {self.verdict}"
        per = ", ".join(self._num(v, 1) for v in self.values)
        return f"{self.name}: {self.interval_text} (per seed {per}; seeds {list(self.seeds)}) → {self.verdict}"


def exceeds(name: str, values, seeds, bound: float = 0.0, **display) -> Test:
    """The claim holds when the per-seed effect ``values`` is above ``bound``."""
    return Test(name, tuple(float(v) for v in values), tuple(seeds), ">", float(bound), **display)


def below(name: str, values, seeds, bound: float = 0.0, **display) -> Test:
    """The claim holds when the per-seed effect ``values`` is below ``bound``."""
    return Test(name, tuple(float(v) for v in values), tuple(seeds), "<", float(bound), **display)


def near_zero(name: str, values, seeds, tol: float, **display) -> Test:
    """The claim holds when the per-seed effect ``values`` lies within ±``tol`` of zero."""
    return Test(name, tuple(float(v) for v in values), tuple(seeds), "within", float(tol), **display)


def exact(name: str, value: float, requires: str, bound: float, **display) -> Test:
    """A claim about a quantity that no seed changes (a parameter count, a model's size): judged on
    its value, which is its own interval."""
    return Test(name, (float(value),), (), requires, float(bound), exact=True, **display)


def combined(tests: Sequence[Test]) -> str:
    """The verdict of a claim that needs every test: FAIL if one fails, PASS if all pass, else
    INCONCLUSIVE."""
    verdicts = [t.verdict for t in tests]
    if not verdicts:
        raise MissingResults("no test to judge")
    return "FAIL" if "FAIL" in verdicts else "PASS" if all(v == "PASS" for v in verdicts) else "INCONCLUSIVE"


def deciding(tests: Sequence[Test]) -> Test:
    """The test that decides :func:`combined`: the first failing, else the first inconclusive, else the
    one that clears its bound by the least (the interval a reader should see)."""
    verdict = combined(tests)
    if verdict != "PASS":
        return next(t for t in tests if t.verdict == verdict)

    def slack(t: Test) -> float:
        _, low, high = t.interval
        return {">": low - t.bound, "<": t.bound - high, "within": abs(t.bound) - max(abs(low), abs(high))}[t.requires]
    return min(tests, key=slack)


@dataclass(frozen=True)
class ClaimResult:
    claim_id: str
    paper: str
    source: str
    statement: str
    verdict: str        # one of VERDICTS
    interval: str       # the deciding test's effect and interval (empty when NOT RUN)
    evidence: str
    # The stored runs (hashes) whose rows the check selected, where the results name them (a
    # ``path`` column): what the likely causes inspect (fedrepro.claims.diagnose).
    runs: tuple[str, ...] = ()


@dataclass(frozen=True)
class Claim:
    id: str
    paper: str
    source: str  # e.g. "Table 2", "§4.3"
    statement: str
    # -> (a Test, or the tests that must all hold; evidence)
    check: Callable[[pd.DataFrame], tuple[Test | Sequence[Test], str]]
    # What our own analysis points to when this claim does not pass here (a hypothesis with the
    # measurement behind it, not a verdict); the results pages print "no cause recorded" without one.
    likely_cause: str = ""
    # The paper columns (PAPER_COLUMN values, e.g. "C10") whose rows the claim reads where results
    # name them: the claim is checked in each present column on its own and must hold in all. Rows
    # that name no column (the smoke and laptop runs, tables without datasets) are read in each.
    paper_columns: tuple[str, ...] = ()

    def _column_rows(self, results: pd.DataFrame) -> list[tuple[str | None, pd.DataFrame]]:
        """The result rows each check reads: ``[(paper column, rows)]``, or ``[(None, results)]`` where
        no row names a paper column."""
        if PAPER_COLUMN not in results.columns or results[PAPER_COLUMN].isna().all():
            return [(None, results)]
        named, plain = results[PAPER_COLUMN], results[PAPER_COLUMN].isna()
        present = [c for c in self.paper_columns if (named == c).any()]
        if present:
            return [(c, results[plain | (named == c)]) for c in present]
        if self.paper_columns or not plain.any():
            names = ", ".join(map(str, dict.fromkeys(named.dropna())))
            wanted = ", ".join(self.paper_columns) or "none"
            raise MissingResults(f"the results' paper columns are {names}; the claim reads {wanted}")
        return [(None, results[plain])]

    def evaluate(self, results: pd.DataFrame) -> ClaimResult:
        try:
            with _reading() as read:
                parts = [(column, self.check(rows)) for column, rows in self._column_rows(results)]
        except MissingResults as e:
            return ClaimResult(self.id, self.paper, self.source, self.statement, "NOT RUN", "", f"not checked: {e}")
        tests: list[Test] = []
        for _, (outcome, _) in parts:
            got = [outcome] if isinstance(outcome, Test) else \
                list(outcome) if isinstance(outcome, (list, tuple)) else []
            if not got or not all(isinstance(t, Test) for t in got):
                raise TypeError(f"claim {self.id}: its check must return (Test or list of Tests, evidence), "
                                f"got {type(outcome).__name__}")
            tests += got
        evidence = parts[0][1][1] if parts[0][0] is None else \
            " || ".join(f"[{column}] {ev}" for column, (_, ev) in parts)
        decider = deciding(tests)
        interval = decider.interval_text if len(tests) == 1 else f"{decider.name}: {decider.interval_text}"
        return ClaimResult(self.id, self.paper, self.source, self.statement, combined(tests), interval, evidence,
                           tuple(sorted(read)))


class MissingResults(LookupError):
    """The table lacks the rows a claim needs (e.g. a notebook ran a subset)."""


CLAIMS: Registry = Registry("claim")


def register_claim(claim: Claim) -> Claim:
    CLAIMS.register(claim.id)(claim)
    return claim


def registered() -> Registry:
    """The claim registry with every paper's claims in it (each paper package registers its own)."""
    from ..papers import load_all

    load_all()
    return CLAIMS


def claims_for(paper: str) -> list[Claim]:
    reg = registered()
    return [reg.get(n) for n in reg.names() if reg.get(n).paper == paper]


def evaluate_claims(results: pd.DataFrame, paper: str | None = None,
                    ids: Iterable[str] | None = None) -> pd.DataFrame:
    """Evaluate claims (all of a paper's, or the given ids) into a display table."""
    chosen = [registered().get(i) for i in ids] if ids is not None else claims_for(paper or "")
    rows = [c.evaluate(results).__dict__ for c in chosen]
    return pd.DataFrame(rows, columns=["claim_id", "paper", "source", "statement", "verdict", "interval", "evidence",
                                       "runs"])


# ---------------------------------------------------------------------------------------------
# Building blocks for checks

# The run hashes the check being evaluated has selected (None outside Claim.evaluate).
_READ: ContextVar[set[str] | None] = ContextVar("claim_runs_read", default=None)


@contextmanager
def _reading():
    read: set[str] = set()
    token = _READ.set(read)
    try:
        yield read
    finally:
        _READ.reset(token)


def note_runs(rows: pd.DataFrame) -> None:
    """Record ``rows``' runs (their ``path`` column) as read by the claim being evaluated: for a check
    that reads rows itself rather than through :func:`select`."""
    read = _READ.get()
    if read is not None and "path" in rows.columns:
        read.update(Path(str(p)).name for p in rows["path"].dropna())


def select(results: pd.DataFrame, where: Mapping[str, object], metric: str) -> pd.Series:
    """Per-seed values of ``metric`` for rows matching ``where``, indexed by seed."""
    mask = np.ones(len(results), dtype=bool)
    for k, v in where.items():
        if k not in results.columns:
            raise MissingResults(f"column {k!r} absent")
        mask &= (results[k] == v).to_numpy()
    rows = results[mask]
    if rows.empty:
        raise MissingResults(f"no runs with {dict(where)}")
    note_runs(rows)
    return rows.set_index("seed")[metric].sort_index()


def paired(results: pd.DataFrame, a: Mapping[str, object], b: Mapping[str, object], metric: str,
           metric_b: str | None = None) -> tuple[list, pd.Series, pd.Series]:
    """``(seeds, A, B)``: the per-seed ``metric`` of rows ``a`` and ``metric_b`` (default the same)
    of rows ``b``, restricted to the seeds both sides have, in seed order."""
    va, vb = select(results, a, metric), select(results, b, metric if metric_b is None else metric_b)
    seeds = sorted(set(va.index) & set(vb.index))
    if not seeds:
        raise MissingResults("no seed run for both sides")
    return seeds, va.loc[seeds], vb.loc[seeds]


def paired_gaps(first: pd.DataFrame, second: pd.DataFrame, a: Mapping[str, object], b: Mapping[str, object],
                metric: str) -> tuple[list, np.ndarray, np.ndarray]:
    """``(seeds, gap_first, gap_second)``: the per-seed gap A − B (``metric``) in two settings (e.g. two
    splits or two α), restricted to the seeds both settings have, in seed order. For claims that a
    gap is larger in one setting than in another."""
    s1, a1, b1 = paired(first, a, b, metric)
    s2, a2, b2 = paired(second, a, b, metric)
    seeds = sorted(set(s1) & set(s2))
    if not seeds:
        raise MissingResults("no seed run in both settings")
    g1 = (a1 - b1).loc[seeds].to_numpy()
    g2 = (a2 - b2).loc[seeds].to_numpy()
    return seeds, g1, g2


def gap_larger_in(first: pd.DataFrame, second: pd.DataFrame, a: Mapping[str, object], b: Mapping[str, object],
                  metric: str, names: tuple[str, str], what: str) -> tuple[Test, str]:
    """The gap A − B is larger in ``first`` than in ``second`` (e.g. "the gain shrinks as the split
    gets milder"): the per-seed difference of the two gaps exceeds zero; ``names`` label the two
    settings."""
    seeds, g1, g2 = paired_gaps(first, second, a, b, metric)
    test = exceeds(f"gap at {names[0]} − gap at {names[1]}", g1 - g2, seeds)
    per1, per2 = (", ".join(f"{100 * v:+.1f}" for v in g) for g in (g1, g2))
    return test, (f"{what}: {names[0]} {100 * g1.mean():+.2f} pts (per seed {per1}), {names[1]} "
                  f"{100 * g2.mean():+.2f} pts (per seed {per2}); {test.text()}")


def compare(results: pd.DataFrame, a: Mapping[str, object], b: Mapping[str, object], *, metric: str = "best",
            margin: float = 0.0, label_a: str = "A", label_b: str = "B") -> tuple[Test, str]:
    """A beats B by more than ``margin``: the paired per-seed difference A − B (``metric``) over the
    seeds both have, with its interval."""
    seeds, va, vb = paired(results, a, b, metric)
    da, db = va.to_numpy(), vb.to_numpy()
    test = exceeds(f"{label_a} − {label_b}", da - db, seeds, margin)
    wins = int((da > db).sum())
    evidence = (f"{label_a} {100 * da.mean():.2f} vs {label_b} {100 * db.mean():.2f} ({metric} acc %, mean over "
                f"seeds {seeds}); {test.text()}; {label_a} wins {wins}/{len(seeds)} seeds")
    return test, evidence


def compare_each(results: pd.DataFrame, a: Mapping[str, object], b: Mapping[str, object], over: str, *,
                 metric: str = "best", margin: float = 0.0, label_a: str = "A", label_b: str = "B"
                 ) -> tuple[list[Test], str]:
    """:func:`compare` at every value of column ``over`` present for both sides; the claim needs
    them all."""
    if over not in results.columns:
        raise MissingResults(f"column {over!r} absent")
    tests, lines = [], []
    for value in sorted(results[over].dropna().unique()):
        try:
            test, ev = compare(results, {**a, over: value}, {**b, over: value}, metric=metric, margin=margin,
                               label_a=f"{label_a} ({over}={value})", label_b=label_b)
        except MissingResults:
            continue
        tests.append(test)
        lines.append(f"[{over}={value}: {test.verdict}] {ev}")
    if not tests:
        raise MissingResults(f"no value of {over} has runs for both sides")
    return tests, "; ".join(lines)


def within(results: pd.DataFrame, where: Mapping[str, object], col_a: str, col_b: str, tol: float,
           over: str | None = None) -> tuple[list[Test], str]:
    """``col_a`` and ``col_b`` of the same runs agree within ±``tol``: their per-seed difference lies
    within ±``tol`` (at every value of ``over``)."""
    groups = [None] if over is None else sorted(results[over].dropna().unique()) if over in results else []
    if not groups:
        raise MissingResults(f"column {over!r} absent")
    tests, lines = [], []
    for value in groups:
        cond = dict(where) if value is None else {**where, over: value}
        try:
            va, vb = select(results, cond, col_a), select(results, cond, col_b)
        except MissingResults:
            continue
        seeds = sorted(set(va.index) & set(vb.index))
        label = f"{col_a} − {col_b}" + ("" if value is None else f" ({over}={value})")
        test = near_zero(label, va.loc[seeds].to_numpy() - vb.loc[seeds].to_numpy(), seeds, tol)
        tests.append(test)
        prefix = "" if value is None else f"[{over}={value}] "
        lines.append(f"{prefix}{col_a} {100 * va.mean():.2f} vs {col_b} {100 * vb.mean():.2f}; {test.text()}")
    if not tests:
        raise MissingResults(f"no runs with {dict(where)}")
    return tests, "; ".join(lines)


def claims_dir(profile: str, root=None):
    """``output/<profile>/claims/`` under the output root (:mod:`fedrepro.settings`): where notebooks
    leave their claims for the summary notebook."""
    from ..settings import output_path

    return output_path("claims", profile, root, create=True)


def save_claims(table: pd.DataFrame, notebook: str, profile: str):
    """Record a notebook's evaluated claims (JSON) so that the summary notebook can collect them."""
    from ..store import atomic_write_json

    path = claims_dir(profile) / f"{notebook}.json"
    rows = table.to_dict(orient="records")
    atomic_write_json(path, {"notebook": notebook, "profile": profile, "claims": rows})
    return path


def notebook_path(name: str | None) -> str:
    """The claims record's notebook name as the notebook's path under ``notebooks/``, without
    ``.ipynb`` (``fedotp_01_label_shift`` -> ``fedotp/01_label_shift``, ``00_tour`` -> ``00_tour``): the
    notebooks save their claims under their path with ``/`` as ``_``; "" for none (NOT RUN)."""
    from ..papers import PAPERS

    if not isinstance(name, str) or not name:  # NOT RUN: no notebook (None, or NaN from pandas)
        return ""
    for paper in PAPERS:
        if name.startswith(paper + "_"):
            return f"{paper}/{name[len(paper) + 1:]}"
    return name


# What a notebook's claims file must hold for the pages (save_claims writes it), and what to do when not.
CLAIM_ROW_FIELDS = {"claim_id": str, "paper": str, "verdict": str}
CLAIMS_FILE_FIX = ("delete it and render its notebook again (`fedrepro reproduce --profile {profile} --only "
                   "{notebook}`), which records its claims anew")


def recorded_claims(folder) -> dict[str, dict]:
    """The claims the notebooks recorded in ``folder`` (:func:`save_claims`), by claim id, each with
    the notebook that checked it; empty when the folder does not exist."""
    from pathlib import Path

    folder = Path(folder)
    checked = {}
    for f in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        fix = CLAIMS_FILE_FIX.format(profile=folder.parent.name, notebook=notebook_path(f.stem))
        record = read_json_file(f, "claims file", fix, {"notebook": str, "claims": list}, ("claims", CLAIM_ROW_FIELDS))
        for row in record["claims"]:
            checked[row["claim_id"]] = {**row, "notebook": record["notebook"]}
    return checked


def collect_claims(profile: str, root=None) -> pd.DataFrame:
    """Every claim of every paper, with the verdict recorded by the notebook that checked it (under
    the output root ``root``, default :func:`fedrepro.settings.output_root`).

    Registered claims that no notebook has checked yet at this profile appear as NOT RUN.
    """
    registered()
    checked = recorded_claims(claims_dir(profile, root))
    rows = []
    for name in CLAIMS.names():
        c = CLAIMS.get(name)
        rows.append(checked.get(name, {"claim_id": c.id, "paper": c.paper, "source": c.source,
                                       "statement": c.statement, "evidence": "no notebook has checked it yet",
                                       "verdict": "NOT RUN", "interval": "", "notebook": None, "runs": []}))
    cols = ["paper", "claim_id", "source", "statement", "verdict", "interval", "evidence", "notebook", "runs"]
    return pd.DataFrame(rows, columns=cols)


def claims_table_style(table: pd.DataFrame):
    """A pandas Styler that colours verdicts, for notebooks."""
    colours = {"PASS": "background-color: #d4f4dd", "FAIL": "background-color: #f8d7da",
               "INCONCLUSIVE": "background-color: #fff3cd", "NOT RUN": "background-color: #eeeeee"}
    cols = ["claim_id", "source", "statement", "verdict", "interval", "evidence"]
    # The class lets the teaching site keep the evidence column readable (fedrepro.book.builder.SITE_CSS).
    return (table[cols].style.map(lambda v: colours.get(v, ""), subset=["verdict"]).hide(axis="index")
            .set_table_attributes('class="claims-table"'))
