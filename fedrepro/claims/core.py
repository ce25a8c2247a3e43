"""Claims: a statement from a paper (with its table or section) and a check of it on our results.

A check takes a tidy results table (one row per run: the grid columns, ``seed``, ``best``,
``final``...) and returns a :class:`Test` (or several) with the evidence: the numbers it compared
and the seeds. A test is an effect measured once per seed (a paired difference, a gap between
two settings, a correlation), its interval over the seeds, and what the claim requires of it, so
that a verdict says how sure it is:

- **PASS**: the whole interval clears the claim's bound;
- **FAIL**: the whole interval falls short of it;
- **INCONCLUSIVE**: the interval straddles the bound: the seeds cannot tell;
- **UNTESTABLE**: the claim requires a gain larger than the room its control leaves at this profile
  (a test that declares a ceiling, :class:`Ceiling`): the ceiling of the quantity minus the control's
  mean is below the bound, so no interval could clear it, whatever the method does. It replaces
  FAIL and INCONCLUSIVE, never PASS (an effect that clears the bound shows the room was larger than
  the ceiling said), and its evidence gives both numbers.

The interval is Student's t over the per-seed effects (:data:`INTERVAL`): 90% two-sided, so each
end is a one-sided 95% bound, the test a one-sided claim ("A beats B by more than m") calls for.
With 3 seeds t is 2.92, so an effect must clear its bound by about 1.7 seed standard deviations
to pass. Thresholds live in the claim, in plain sight.

**Sequential seeds.** A claim reads the profile's claim seeds (3 at laptop and paper). One that
declares a larger :attr:`Claim.max_seeds` may be read again on more seeds while it is
INCONCLUSIVE, at pre-declared stages (:data:`STAGES`: 3, 5, 8, 12 seeds, up to its maximum):
``fedrepro reproduce`` trains the next stage's seeds and renders its notebook again. Looking at
the same claim up to K times would let chance pass (or fail) it more often than α = 5% one-sided,
so the looks share α by **Bonferroni's rule**: each look is a one-sided test at α/K, i.e. the
interval at stage k is Student's t at 1 − 2α/K two-sided (:func:`look_level`). We chose it over
Pocock's or O'Brien-Fleming's alpha-spending boundaries because (1) the union bound holds whatever
the dependence between looks, with the variance estimated afresh at each look (the spending
boundaries assume a known variance or large samples, which 3-12 seeds are not), (2) it holds when a
look is skipped or taken at a later stage (a table extended for another claim), and (3) with one
stage (``max_seeds=3``, the default) K = 1 and the interval is exactly :data:`LEVEL`'s: a claim
that does not opt in is judged as before. Its cost is power: at K = 4 a 3-seed look needs
t = 6.2 instead of 2.92. A claim reads its seeds at the largest stage its rows reach (the first
seeds in seed order), so every look it takes is one of the K declared.

A table that runs the paper's dataset columns (``fedrepro.papers.tables.TableDef.datasets``, at the
paper profile) names each row's column in :data:`PAPER_COLUMN`. A claim reads the columns it names
(:attr:`Claim.paper_columns`), each on its own, and must hold in every one of them; it never mixes
the runs of two datasets.

A claim read on rehearsal runs (``fedrepro reproduce --profile paper --rehearse``,
:func:`fedrepro.config.rehearse_dict`) is checked as any other, so every check runs, but its verdict
is **REHEARSAL**, never PASS or FAIL: two rounds of one local step say nothing about the paper.
"""
from __future__ import annotations

import math
import re
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from ..config import rehearsing
from ..errors import ConfigError, CorruptCacheError
from ..env.host import git_commit, repo_root
from ..env.jsonfiles import NUMBER, ListOf, MapOf, MayLack, Obj, OneOf, loads, read_json_file
from ..params import check_value
from ..registry import Registry
from ..env.settings import output_path
from ..runs.store import atomic_write_json, read_run_file
from .replication import claim_chances, rerun_chances, same_verdict, strength

# The column that names which of the paper's dataset columns a row belongs to (tables that run
# several datasets, at the paper profile); a claim reads the columns it names.
PAPER_COLUMN = "paper_column"


LEVEL = 0.90
INTERVAL = "Student's t over the per-seed effects, 90% two-sided (each end a one-sided 95% bound)"
# Sequential seeds: the numbers of seeds at which a claim may be looked at (a claim uses those up to
# its max_seeds, and its max_seeds itself as the last stage); the first is the profiles' claim seeds.
STAGES = (3, 5, 8, 12)
DEFAULT_MAX_SEEDS = STAGES[0]
# The verdict of a test whose required gain exceeds the room its control leaves (module doc, Ceiling).
UNTESTABLE = "UNTESTABLE"
VERDICTS = ("PASS", "INCONCLUSIVE", "FAIL", UNTESTABLE, "NOT RUN")
# The verdict of every claim read on rehearsal runs (module doc); pages count it only where it occurs.
REHEARSAL = "REHEARSAL"


def shown_verdicts(verdicts) -> tuple[str, ...]:
    """The verdicts a page counts: :data:`VERDICTS`, and REHEARSAL where one of ``verdicts`` is."""
    return VERDICTS + ((REHEARSAL,) if REHEARSAL in set(verdicts) else ())
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


def stages(max_seeds: int) -> tuple[int, ...]:
    """The seed counts at which a claim of ``max_seeds`` is looked at: :data:`STAGES` up to it, and
    ``max_seeds`` itself last (``stages(3) == (3,)``, ``stages(10) == (3, 5, 8, 10)``)."""
    check_value("max_seeds", max_seeds, int, ge=STAGES[0])
    return tuple(n for n in STAGES if n < max_seeds) + (max_seeds,)


def look_level(max_seeds: int, level: float = LEVEL) -> float:
    """The two-sided level of each look of a claim with ``max_seeds`` (Bonferroni over its K
    :func:`stages`): one-sided α = (1 − ``level``)/2 split evenly over the K looks, so
    ``1 − (1 − level)/K``; ``level`` itself with one stage."""
    return 1.0 - (1.0 - level) / len(stages(max_seeds))


def stage_of(n_seeds: int, max_seeds: int) -> int:
    """How many of ``n_seeds`` available seeds a claim of ``max_seeds`` reads: the largest stage they
    reach (all of them below the first stage, e.g. the smoke profile's one seed)."""
    reached = [n for n in stages(max_seeds) if n <= n_seeds]
    return reached[-1] if reached else n_seeds


def next_stage(verdict: str, n_read: int, max_seeds: int) -> int | None:
    """The seed count of a claim's next look, or None: only an INCONCLUSIVE claim read at one of its
    stages below its maximum goes on (a claim read on fewer seeds than its first stage, the smoke
    profile's one seed, checks that the code runs and is not a look)."""
    plan = stages(max_seeds)
    if verdict != "INCONCLUSIVE" or n_read not in plan or n_read >= max_seeds:
        return None
    return plan[plan.index(n_read) + 1]


def interval_verdict(low: float, high: float, requires: str, bound: float) -> str:
    """The verdict of an interval ``[low, high]`` against what a claim ``requires`` of its effect
    (:class:`Test`): PASS when it clears ``bound`` whole, FAIL when it falls short whole, else
    INCONCLUSIVE."""
    if requires == ">":
        return "PASS" if low > bound else "FAIL" if high <= bound else "INCONCLUSIVE"
    if requires == "<":
        return "PASS" if high < bound else "FAIL" if low >= bound else "INCONCLUSIVE"
    b = abs(bound)
    return "PASS" if -b <= low and high <= b else "FAIL" if low > b or high < -b else "INCONCLUSIVE"


def shift_to_change(low: float, high: float, requires: str, bound: float) -> float:
    """The smallest shift of the interval ``[low, high]`` (in its own units, either way) that changes
    its :func:`interval_verdict`: how far a drift of the effect must carry it before it decides
    differently. The verdict is constant between the bound's crossings of either end, so only those
    crossings are candidates."""
    b = abs(bound) if requires == "within" else bound
    ends = (-b, b) if requires == "within" else (b,)
    now = interval_verdict(low, high, requires, bound)
    best = math.inf
    for edge in ends:
        for cross in (edge - low, edge - high):
            for s in (cross - 1e-9, cross + 1e-9):
                if interval_verdict(low + s, high + s, requires, bound) != now:
                    best = min(best, abs(s))
    return best


@dataclass(frozen=True)
class Ceiling:
    """The most the quantity a test compares can reach at this profile, declared beside the test:
    ``value``, an upper bound of the quantity itself (1.0 for an accuracy kept as a fraction), or
    ``rows``, a where-mapping (as :func:`select` takes) whose mean over the seeds bounds the
    reachable value (a tuple or list value names several rows, and the best of them counts: "the
    best accuracy any of these methods reaches in this setting"). The room a test's control leaves
    is the ceiling minus the control's mean; a required gain larger than that cannot be shown
    here, and the test is UNTESTABLE (module doc). ``label`` names the ceiling in the evidence.

    The rows must not hold the method's own runs: a ceiling read off the method would shrink with
    it, and a claim that misses would never FAIL (:func:`room_left` refuses it)."""

    value: float | None = None
    rows: Mapping[str, object] | None = None
    label: str = ""

    def __post_init__(self) -> None:
        check_value("ceiling", (self.value, self.rows), object,
                    check=lambda v: (v[0] is None) != (v[1] is None) and (v[1] is None or isinstance(v[1], Mapping)),
                    valid="Ceiling(value=<an upper bound>) or Ceiling(rows=<a where-mapping>), one of the two")


def _matching(results: pd.DataFrame, where: Mapping[str, object]) -> np.ndarray:
    """Rows of ``results`` matching ``where``; a tuple or list value matches any of its values."""
    mask = np.ones(len(results), dtype=bool)
    for k, v in where.items():
        if k not in results.columns:
            raise MissingResults(f"column {k!r} absent")
        col = results[k]
        mask &= (col.isin(list(v)) if isinstance(v, (tuple, list)) else col == v).to_numpy()
    return mask


def _where_text(where: Mapping[str, object]) -> str:
    return ", ".join(f"{setting_name(k)}={v}" for k, v in where.items())


def room_left(results: pd.DataFrame, ceiling: Ceiling, method: Mapping[str, object], control: Sequence[float],
              metric: str, seeds: Sequence, label_control: str = "the control") -> tuple[float, str]:
    """``(room, how)``: the ceiling of ``metric`` minus the control's mean (``control``, its per-seed
    values), in the metric's units, and how it was measured ("ceiling 100.00 − FedAvg 93.43", in
    points). A ceiling of rows reads them on ``seeds`` (all their seeds where they have none of them)
    and refuses rows that hold the ``method``'s (:class:`Ceiling`). Where the results hold none of
    its rows (a profile whose table runs no baseline beside the sweep), no room is measured:
    ``(NaN, "")``, and the test is judged as one without a ceiling."""
    base = float(np.mean(control))
    if ceiling.value is not None:
        top, named = float(ceiling.value), ceiling.label or "ceiling"
    else:
        rows_where = dict(ceiling.rows or {})
        if not set(rows_where) <= set(results.columns):
            return math.nan, ""
        mask = _matching(results, rows_where)
        own = mask & _matching(results, {k: v for k, v in method.items() if k in results.columns})
        if own.any():
            raise ConfigError(f"invalid ceiling rows {rows_where}: they hold the method's own rows {dict(method)}; "
                              "valid: rows of other methods or settings (a ceiling read off the method could "
                              "never let the claim fail)")
        rows = results[mask]
        if "seed" in rows.columns and rows["seed"].isin(list(seeds)).any():
            rows = rows[rows["seed"].isin(list(seeds))]
        if rows.empty:
            return math.nan, ""
        note_runs(rows)
        several = [k for k, v in rows_where.items() if isinstance(v, (tuple, list))]
        if several:
            means = rows.groupby(several)[metric].mean()
            best = means.idxmax()
            top = float(means.max())
            which = dict(zip(several, best if isinstance(best, tuple) else (best,)))
        else:
            top, which = float(rows[metric].mean()), rows_where
        named = f"{ceiling.label or 'ceiling'} {_where_text(which)}"
    return top - base, f"{named} {100 * top:.2f} − {label_control} {100 * base:.2f}"


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
    # The interval's two-sided level: LEVEL, or a sequential claim's per-look level (look_level).
    level: float = LEVEL
    # What the effect's sign means, in the claim's words: ``(positive, negative)`` templates in which
    # "{}" stands for the effect's size with its unit, e.g. ("pFedCSPC needs {} fewer than FedAvg",
    # "pFedCSPC needs {} more than FedAvg"). Empty: read off a name "A − B" as "A {} above B" /
    # "A {} below B" (:meth:`reading`); a name that is no difference reads as a level.
    reads: tuple[str, ...] = ()
    # The room the control leaves: the declared ceiling of the quantity minus the control's mean, in
    # the effect's units (room_left), and how it was measured; NaN where the test declares no ceiling.
    # A required gain larger than this makes the test UNTESTABLE (module doc).
    room: float = math.nan
    room_of: str = ""
    # The range the quantity itself cannot leave, in its own units before ``scale`` ((0.0, 1.0) for a
    # share or an accuracy kept as a fraction); None: unbounded. The t interval is cut to it: the
    # true mean lies in the range, so the cut interval covers it as often as the whole one does, and
    # a bound strictly inside the range gets the same verdict from either (one at an end of the range
    # asks the impossible, and a claim "above 100%" FAILs).
    limits: tuple[float, float] | None = None

    def __post_init__(self) -> None:
        # Only ``requires`` is a choice: the other fields are measurements (a NaN effect is a result to
        # report, not a bad option), so this record is not check_fields'd as an option class is.
        check_value("requires", self.requires, str, choices=REQUIRES)
        check_value("reads", self.reads, object,
                    check=lambda v: v == () or (isinstance(v, tuple) and len(v) == 2
                                                and all(isinstance(t, str) and t.count("{}") == 1 for t in v)),
                    valid='() or two templates with one "{}" each, e.g. ("A {} above B", "A {} below B")')
        check_value("limits", self.limits, object,
                    check=lambda v: v is None or (isinstance(v, tuple) and len(v) == 2
                                                  and all(isinstance(x, (int, float)) for x in v) and v[0] < v[1]),
                    valid="None or (low, high) with low < high, e.g. (0.0, 1.0) for a share")
        # One effect per seed: a seed read twice would count one run twice and narrow the interval.
        # (An exact quantity is no measurement over seeds.)
        twice = sorted({str(s) for s in self.seeds if list(self.seeds).count(s) > 1})
        if twice or (not self.exact and len(self.seeds) != len(self.values)):
            raise ConfigError(f"Test {self.name!r}: seeds={list(self.seeds)} for {len(self.values)} values"
                              + (f" (seed {', '.join(twice)} twice)" if twice else "")
                              + "; valid: one distinct seed per value")

    @property
    def interval(self) -> tuple[float, float, float]:
        if self.exact:
            v = float(np.mean(self.values))
            return v, v, v
        mean, low, high = t_interval(self.values, self.level)
        if self.limits is not None:
            low, high = max(low, self.limits[0]), min(high, self.limits[1])
        return mean, low, high

    @property
    def cut(self) -> bool:
        """Whether :attr:`limits` cut the t interval (the text then says so)."""
        if self.limits is None or self.exact:
            return False
        _, low, high = t_interval(self.values, self.level)
        return low < self.limits[0] or high > self.limits[1]

    def distance_sds(self) -> float:
        """How far the mean effect is from the bound, in standard deviations of the per-seed effects
        (signed: positive on the side the claim requires); NaN with fewer than 2 seeds or no spread."""
        v = np.asarray(self.values, dtype=float)
        if self.exact or v.size < 2 or not v.std(ddof=1) > 0:
            return math.nan
        mean, sd = float(v.mean()), float(v.std(ddof=1))
        if self.requires == ">":
            return (mean - self.bound) / sd
        if self.requires == "<":
            return (self.bound - mean) / sd
        return (abs(self.bound) - abs(mean)) / sd

    @property
    def no_room(self) -> bool:
        """Whether the claim requires a gain larger than the room its control leaves (:attr:`room`):
        an effect above the bound would put the method above the ceiling. A bound equal to the room
        is testable: "beats the best baseline" (margin 0, that baseline its own ceiling) can hold."""
        return self.requires == ">" and math.isfinite(self.room) and self.bound > self.room

    @property
    def verdict(self) -> str:
        _, low, high = self.interval
        return self.judge(low, high)

    def judge(self, low: float, high: float) -> str:
        """The verdict of this test's effect read as the interval ``[low, high]``: :attr:`verdict` is
        ``judge`` of its own interval, and a re-run's interval is judged by it too
        (:mod:`fedrepro.claims.replication`). A t interval is first cut to :attr:`limits`, as
        :attr:`interval` cuts it (cutting twice changes nothing)."""
        if self.limits is not None and not self.exact:
            low, high = max(low, self.limits[0]), min(high, self.limits[1])
        verdict = interval_verdict(low, high, self.requires, self.bound)
        # A PASS stands: an effect that clears the bound shows the room was larger than the ceiling said.
        # So does a loss: no room excuses missing the margin, not falling below the control (an interval
        # wholly below 0), else a control that is the best row would hide every loss to it.
        if verdict == "PASS" or (verdict == "FAIL" and high < 0):
            return verdict
        return UNTESTABLE if self.no_room else verdict

    @property
    def edges(self) -> tuple[float, ...]:
        """Every value :meth:`judge` compares an end of the interval with: the bound either way, zero
        (a loss, with a ceiling) and the limits; between them the verdict cannot change."""
        return (self.bound, -self.bound, 0.0) + tuple(self.limits or ())

    def rerun(self) -> dict[str, float] | None:
        """The chance of each verdict of a re-run of this test at as many seeds and the same level
        (:func:`fedrepro.claims.replication.rerun_chances`); certain for an exact quantity, None for a
        non-finite effect."""
        if self.exact:
            return {self.verdict: 1.0}
        v = np.asarray(self.values, dtype=float)
        if v.size < 2 or not np.isfinite(v).all():  # one seed, or a non-finite effect: nothing to spread
            return rerun_chances(float(v.mean()) if v.size else math.nan, math.nan, int(v.size), math.nan,
                                 self.judge, self.edges)
        mean, low, high = t_interval(v, self.level)
        sd = float(v.std(ddof=1))
        # The rule's half-width per SD at this many seeds, read off the test's own t interval (uncut).
        factor = (high - low) / 2 / sd if sd > 0 else math.nan
        return rerun_chances(mean, sd, int(v.size), factor, self.judge, self.edges)

    def record(self) -> dict:
        """The test as a claim record keeps it (:data:`TEST_RECORD_FIELDS`): its per-seed effects,
        seeds, requirement, bound, level, room and limits (enough to judge it, and a re-run of it,
        again: :func:`recorded_test`), its verdict and the chance of each verdict of a re-run."""
        return {"name": self.name, "values": [float(v) for v in self.values],
                "seeds": [_plain(s) for s in self.seeds], "requires": self.requires, "bound": float(self.bound),
                "level": float(self.level), "exact": bool(self.exact), "room": float(self.room),
                "limits": list(self.limits) if self.limits else None, "verdict": self.verdict, "rerun": self.rerun()}

    @property
    def room_text(self) -> str:
        """The required gain against the room its control leaves ("" without a ceiling)."""
        if not math.isfinite(self.room):
            return ""
        return (f"required {self._num(self.bound)}{self.unit} against a room of {self._num(self.room)}{self.unit} "
                f"({self.room_of})")

    def __bool__(self) -> bool:
        raise TypeError("a Test has several verdicts; read .verdict (PASS, FAIL, INCONCLUSIVE or UNTESTABLE)")

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

    def reading(self) -> tuple[str, str] | None:
        """The ``(positive, negative)`` templates of :attr:`reads`, or those a name "A − B" implies;
        None for a name that is no difference (its effect is a level, and its sign says nothing more)."""
        if self.reads:
            return self.reads[0], self.reads[1]
        parts = self.name.split(" − ")
        if len(parts) != 2 or not all(p.strip() for p in parts):
            return None
        a, b = (p.strip() for p in parts)
        return f"{a} {{}} above {b}", f"{a} {{}} below {b}"

    def _size(self, x: float) -> str:
        return self._num(abs(x)).lstrip("+") + self.unit

    @property
    def words(self) -> str:
        """The mean effect and what the claim requires of it, said in the claim's words: "pFedCSPC
        needs 7.67 rounds fewer than FedAvg (required: pFedCSPC needs more than 0 rounds fewer than
        FedAvg)"; the interval is :attr:`interval_text`'s."""
        mean = self.interval[0]
        reading = self.reading()
        b = abs(self.bound)
        if reading is None:
            need = f"within ±{self._size(b)}" if self.requires == "within" else \
                f"{'more' if self.requires == '>' else 'less'} than {self._num(self.bound).lstrip('+')}{self.unit}"
            return f"{self.name}: {self._num(mean).lstrip('+')}{self.unit} (required: {need})"
        up, down = reading
        said = (up if mean >= 0 else down).format(self._size(mean))
        if self.requires == "within":
            need = f"at most {self._size(b)} either way"
        elif self.requires == ">":
            need = up.format(f"more than {self._size(b)}") if self.bound >= 0 else \
                down.format(f"less than {self._size(b)}")
        else:
            need = up.format(f"less than {self._size(b)}") if self.bound > 0 else \
                down.format(f"more than {self._size(b)}")
        return f"{said} (required: {need})"

    def text(self) -> str:
        if self.exact:
            return f"{self.name}: {self.interval_text} (exact: no seed changes it) → {self.verdict}"
        per = ", ".join(self._num(v, 1) for v in self.values)
        # The room after the verdict, so that the part before it reads as every test's does.
        room = f" ({self.room_text})" if self.room_text else ""
        cut = (f"; interval cut to the quantity's range [{self._num(self.limits[0])}, {self._num(self.limits[1])}]"
               if self.cut else "")
        return (f"{self.name}: {self.interval_text} (per seed {per}; seeds {list(self.seeds)}{cut}) → "
                f"{self.verdict}{room}")


# Test.interval_text of a bounded interval, at the end of a claim's interval (after the deciding
# test's name when a claim has several): mean, low, high, requirement, bound, unit.
_INTERVAL_TEXT = re.compile(r"([+-]\d+(?:\.\d+)?)( [^\s\[]+|[^\s\[]*) \[([+-]\d+(?:\.\d+)?), ([+-]\d+(?:\.\d+)?)\], "
                            r"required (> |< |within ±)([+-]?\d+(?:\.\d+)?)\2$")


def read_interval(text: str) -> tuple[float, float, str, float, str] | None:
    """``(low, high, requires, bound, unit)`` of a recorded claim's interval as displayed
    (:attr:`Test.interval_text`; unit " pts" for accuracy differences); None for an empty or
    unbounded interval."""
    m = _INTERVAL_TEXT.search(text or "")
    if not m:
        return None
    _, unit, low, high, need, bound = m.groups()
    return float(low), float(high), {"> ": ">", "< ": "<", "within ±": "within"}[need], float(bound), unit


def read_mean(text: str) -> tuple[float, str] | None:
    """``(mean, unit)`` of a recorded claim's interval as displayed (:attr:`Test.interval_text`); None
    for an empty or unbounded interval."""
    m = _INTERVAL_TEXT.search(text or "")
    return (float(m.group(1)), m.group(2)) if m else None


def _negated(number: str) -> str:
    """A displayed signed number (``"+0.92"``) with its sign turned (``"-0.92"``); zero keeps "+"."""
    flipped = ("-" if number[0] == "+" else "+") + number[1:]
    return "+" + number[1:] if float(flipped) == 0 else flipped


def effect_once(effect: str, interval: str) -> str:
    """A claim's effect said once, from what its record holds (``effect``: :attr:`Test.words`, e.g.
    "DP noise raises PEP-FedPT by 1.37 pts (required: DP noise costs PEP-FedPT less than 3.00 pts)";
    ``interval``: :attr:`Test.interval_text` of the quantity whose sign the claim tests, e.g. "-1.37 pts
    [-3.65, +0.92], required < +3.00 pts"): "DP noise raises PEP-FedPT by 1.37 pts [-0.92, +3.65];
    required: DP noise costs PEP-FedPT less than 3.00 pts".

    The words give the mean's size in the direction its sign reads ("raises by 1.37" for a cost of
    -1.37), so the interval is turned to that direction too: printed raw beside them, its sign
    contradicts the sentence (issue 58: ``pep_fedpt.dp_costs_little``). The interval keeps its own
    words (sign and bound) where the words are missing (a record without them) or the interval is not
    one :func:`read_interval` can read."""
    interval = interval or ""
    said, sep, need = (effect or "").rpartition(" (required: ")
    m = _INTERVAL_TEXT.search(interval)
    if not effect or not sep or not need.endswith(")") or m is None:
        return f"{effect}; interval: {interval}" if effect and interval else (effect or interval)
    mean, low, high = m.group(1), m.group(3), m.group(4)
    # A mean said as its size (no sign in the words) while negative: the words read the other way.
    turned = float(mean) < 0 and mean not in said
    low, high = (_negated(high), _negated(low)) if turned else (low, high)
    return f"{said} [{low}, {high}]; required: {need[:-1]}"


# ---------------------------------------------------------------------------------------------
# How firm a verdict is (fedrepro.claims.replication), in a claim record and read back from one

def _plain(seed):
    """A seed as JSON keeps it (a numpy integer as an int)."""
    return int(seed) if isinstance(seed, (int, np.integer)) else seed


def replication_record(tests: Sequence[Test], verdict: str) -> dict:
    """What a claim record keeps of how firm its ``verdict`` is (:data:`REPLICATION_FIELDS`): each test
    (:meth:`Test.record`), the chance of each verdict of a re-run of the claim
    (:func:`fedrepro.claims.replication.claim_chances`) and of this one (``same_verdict``, with its
    ``strength``); no chance for a REHEARSAL, whose numbers mean nothing."""
    records = [t.record() for t in tests]
    chances = claim_chances([r["rerun"] for r in records]) if verdict != REHEARSAL else None
    same = same_verdict(chances, verdict)
    return {"same_verdict": same, "strength": strength(same), "rerun": chances, "tests": records}


def recorded_test(record: Mapping) -> Test:
    """The :class:`Test` a claim record keeps (:meth:`Test.record`), to judge again."""
    values = tuple(math.nan if v is None else float(v) for v in record["values"])
    room = record.get("room")
    limits = record.get("limits")
    return Test(record["name"], values, tuple(record["seeds"]), record["requires"], float(record["bound"]),
                exact=bool(record.get("exact")), level=float(record.get("level") or LEVEL),
                room=math.nan if room is None else float(room), limits=tuple(limits) if limits else None)


# Every test as Test.text() prints it in a claim's evidence (the exact tests, which no seed changes, print
# no per-seed values; a test whose interval was cut to its limits is not read), and the room a test with
# a ceiling prints after its verdict. Shared with bench/seed_needs.py, which reads the committed pages.
_NUM = r"[+\-−]?(?:∞|\d[\d.]*(?:e[+\-]?\d+)?)"
_PRINTED_TEST = re.compile(
    rf"(?<=: )(?P<mean>{_NUM})(?P<unit>[^\[\];:]*?) \[(?P<low>{_NUM}), (?P<high>{_NUM})\], required "
    rf"(?P<need>> |< |within ±)(?P<bound>{_NUM})[^(;]*? \((?:per seed (?P<per>[^;]*); seeds \[(?P<seeds>[^\]]*)\]"
    r"|exact[^)]*)\) → (?P<verdict>PASS|FAIL|INCONCLUSIVE|UNTESTABLE)"
    rf"(?: \(required [^()]*? against a room of (?P<room>{_NUM}))?")
# The verdict after each test the evidence prints, read or not.
_ARROW = re.compile(r"\) → (?:PASS|FAIL|INCONCLUSIVE|UNTESTABLE)\b")


def printed_number(text: str) -> float:
    """A number as a claim's evidence prints it ("−1.2", "+∞")."""
    text = text.replace("−", "-")
    return math.copysign(math.inf, -1.0 if text.startswith("-") else 1.0) if "∞" in text else float(text)


def printed_tests(evidence: str, level: float = LEVEL, with_exact: bool = False) -> list[dict]:
    """Every seeded test printed in a claim's ``evidence`` (:meth:`Test.text`), as numbers in the
    page's units: ``name``, ``n``, ``mean``, ``sd``, ``unit``, ``requires``, ``bound``, the printed
    ``verdict`` and, for a test with a ceiling, the ``room`` it printed; ``with_exact``: the exact tests
    too (``"exact": True``, ``n`` 0, no ``sd``). ``level``: the level the evidence printed the
    intervals at (a check prints its tests at :data:`LEVEL`; a sequential claim's per-look level
    applies after). The SD is read off the interval's half-width (t × SD / √n), which keeps more
    digits than the per-seed values."""
    from scipy import stats

    out = []
    for m in _PRINTED_TEST.finditer(evidence or ""):
        if m["seeds"] is None and not with_exact:
            continue  # an exact test: no spread, nothing more seeds would change
        seeds = [s for s in (m["seeds"] or "").split(",") if s.strip()]
        n = len(seeds)
        mean, low, high = printed_number(m["mean"]), printed_number(m["low"]), printed_number(m["high"])
        per = [printed_number(v) for v in m["per"].split(",")] if m["per"] else []
        half = (high - low) / 2
        sd = (half * math.sqrt(n) / stats.t.ppf(0.5 + level / 2, n - 1) if n > 1 and math.isfinite(half) else
              float(np.std(per, ddof=1)) if len(per) > 1 else math.nan)
        name = evidence[:m.start()].rsplit(";", 1)[-1].rsplit("] ", 1)[-1].strip().removesuffix(":").strip()
        out.append({"name": name, "n": n, "mean": mean, "sd": sd, "unit": m["unit"].strip(),
                    "requires": {"> ": ">", "< ": "<", "within ±": "within"}[m["need"]],
                    "bound": printed_number(m["bound"]), "verdict": m["verdict"],
                    **({"room": printed_number(m["room"])} if m["room"] else {}),
                    **({"exact": m["seeds"] is None} if with_exact else {})})
    return out


def spread_test(t: Mapping, n: int, level: float) -> Test:
    """A test printed in a claim's evidence (:func:`printed_tests`) as ``n`` per-seed values with its
    mean and SD exactly (ddof 1), judged at ``level``; one value at one seed; its room where it printed one."""
    if n < 2:
        values = (float(t["mean"]),) * max(n, 1)
    else:
        z = np.linspace(-1.0, 1.0, n)
        values = tuple(t["mean"] + t["sd"] * (z - z.mean()) / z.std(ddof=1))
    return Test(t["name"], values, tuple(range(len(values))), t["requires"], t["bound"], level=level,
                room=float(t.get("room", math.nan)))


def printed_rerun(evidence: str, verdict: str, max_seeds: int) -> dict[str, float] | None:
    """The chance of each verdict of a re-run of a claim recorded without its tests (a record written
    before records kept them), read off its ``evidence``: None unless every test it prints is read,
    each gives its printed verdict as read (the numbers are rounded), and together, at the claim's
    level (:func:`look_level` of ``max_seeds``), they give the claim's ``verdict``. A check that
    printed only some of its tests would go unseen: records that keep their tests need none of this."""
    printed = printed_tests(evidence, LEVEL, with_exact=True)
    if not printed or len(printed) != len(_ARROW.findall(evidence or "")) or verdict in ("NOT RUN", REHEARSAL):
        return None
    level = look_level(max_seeds)
    tests = []
    for t in printed:
        if t["exact"]:
            test = Test(t["name"], (t["mean"],), (), t["requires"], t["bound"], exact=True,
                        room=t.get("room", math.nan))
            at_print = test
        else:
            at_print, test = spread_test(t, t["n"], LEVEL), spread_test(t, t["n"], level)
        if at_print.verdict != t["verdict"]:
            return None
        tests.append(test)
    if combined(tests) != verdict:
        return None
    return claim_chances([t.rerun() for t in tests])


def record_rerun(row: Mapping) -> tuple[float | None, str]:
    """``(chance, how)``: the chance that a re-run returns a recorded claim's verdict, and where it comes
    from: ``"record"`` (the tests the record keeps, judged again, so that today's estimate applies),
    ``"evidence"`` (an older record's printed tests, :func:`printed_rerun`) or ``""`` (none: NOT RUN,
    REHEARSAL, a non-finite effect, or evidence that does not give the verdict back)."""
    verdict = row.get("verdict")
    if verdict in ("NOT RUN", REHEARSAL) or not isinstance(verdict, str):
        return None, ""
    kept = row.get("replication")
    if isinstance(kept, Mapping) and isinstance(kept.get("tests"), list) and kept["tests"]:
        try:
            tests = [recorded_test(t) for t in kept["tests"]]
        except (TypeError, ValueError, KeyError, ConfigError):  # a value that is no number: nothing to estimate
            return None, ""
        if combined(tests) != verdict:
            return None, ""
        chance = same_verdict(claim_chances([t.rerun() for t in tests]), verdict)
        return chance, "record" if chance is not None else ""
    top = row.get("max_seeds")
    top = int(top) if isinstance(top, (int, float)) and top == top and top >= STAGES[0] else DEFAULT_MAX_SEEDS
    chance = same_verdict(printed_rerun(row.get("evidence") or "", verdict, top), verdict)
    return chance, "evidence" if chance is not None else ""


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
    """The verdict of a claim that needs every test: FAIL if one fails, else UNTESTABLE if one has no
    room, PASS if all pass, else INCONCLUSIVE. A test that fails decides the claim whatever the room of
    the others; one without room keeps the claim from passing, and more seeds would not change that."""
    verdicts = [t.verdict for t in tests]
    if not verdicts:
        raise MissingResults("no test to judge")
    for decisive in ("FAIL", UNTESTABLE):
        if decisive in verdicts:
            return decisive
    return "PASS" if all(v == "PASS" for v in verdicts) else "INCONCLUSIVE"


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
    # ``path`` column): what the likely causes inspect (fedrepro.papers.diagnose).
    runs: tuple[str, ...] = ()
    # The seeds its tests read (their union), and the most it may read (Claim.max_seeds).
    seeds: tuple[int, ...] = ()
    max_seeds: int = DEFAULT_MAX_SEEDS
    # The deciding test's mean effect and requirement in the claim's words (Test.words).
    effect: str = ""
    # An UNTESTABLE claim's required gain against the room its control leaves (Test.room_text).
    room: str = ""
    # How likely a re-run is to return the verdict (replication_record): every test it judged, with its
    # per-seed effects, and the chances; None when NOT RUN. (A dict: left out of the result's hash.)
    replication: dict | None = field(default=None, hash=False)


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
    # The most seeds the claim may be read on (STAGES up to it; see the module's "Sequential
    # seeds"). The default, the profiles' 3 claim seeds, is one look at LEVEL: no sequential reading.
    max_seeds: int = DEFAULT_MAX_SEEDS

    # What the check compares (fedrepro.claims.arms: Rows, Columns, Replaced), each arm with its
    # null, the table in which the claimed effect is absent: fed a null, the check must not PASS
    # (tests/papers/test_every_claim_can_fail.py), or the claim could not fail.
    arms: tuple = ()

    def __post_init__(self) -> None:
        stages(self.max_seeds)  # a one-line error naming max_seeds when it is not an int >= 3
        # ("C10") is a string, which would read as the columns "C", "1" and "0".
        check_value("paper_columns", self.paper_columns, object,
                    check=lambda v: isinstance(v, tuple) and all(isinstance(c, str) for c in v),
                    valid="a tuple of column names, e.g. ('C10',)")

    def _at_stage(self, results: pd.DataFrame) -> pd.DataFrame:
        """``results`` cut to the seeds of the largest stage they reach (the first seeds in seed
        order), so that every look is one of the claim's declared stages."""
        if "seed" not in results.columns:
            return results
        seeds = sorted(results["seed"].dropna().unique())
        keep = stage_of(len(seeds), self.max_seeds)
        return results if keep >= len(seeds) else results[results["seed"].isin(seeds[:keep])]

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
                parts = [(column, self.check(self._at_stage(rows))) for column, rows in self._column_rows(results)]
        except MissingResults as e:
            return ClaimResult(self.id, self.paper, self.source, self.statement, "NOT RUN", "", f"not checked: {e}",
                               max_seeds=self.max_seeds)
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
        level = look_level(self.max_seeds)
        if level != LEVEL:  # a sequential claim: every test at the per-look level
            tests = [replace(t, level=level) for t in tests]
            evidence += (f"; sequential: each look at {100 * level:.1f}% two-sided (Bonferroni over stages "
                         f"{list(stages(self.max_seeds))})")
        decider = deciding(tests)
        interval = decider.interval_text if len(tests) == 1 else f"{decider.name}: {decider.interval_text}"
        seeds = tuple(sorted({int(s) for t in tests for s in t.seeds}))
        verdict = combined(tests)
        if verdict == "INCONCLUSIVE" and len(seeds) >= self.max_seeds:
            d = decider.distance_sds()
            evidence += (f"; still INCONCLUSIVE at its maximum of {self.max_seeds} seeds: the mean effect is "
                         f"{d:+.2f} per-seed standard deviations from the bound" if d == d else
                         f"; still INCONCLUSIVE at its maximum of {self.max_seeds} seeds")
        room = decider.room_text if verdict == UNTESTABLE else ""
        if rehearsal_rows(results):
            verdict, evidence = REHEARSAL, f"rehearsal runs, the numbers mean nothing (the check read: {evidence})"
            room = ""
        return ClaimResult(self.id, self.paper, self.source, self.statement, verdict, interval, evidence,
                           tuple(sorted(read)), seeds, self.max_seeds, decider.words, room,
                           replication_record(tests, verdict))


def _is_rehearsal_run(path: str) -> bool:
    """Whether the stored run at ``path`` is a rehearsal (its ``config.json`` has ``rehearsal`` set);
    not when it cannot be read."""
    file = Path(path) / "config.json"
    try:
        # Bounded, never a link, a FIFO or a device, and no RecursionError: a store is input from
        # whoever can write it (docs/reliability.md, "Threat model").
        stored = loads(read_run_file(file))
    except (OSError, ValueError, CorruptCacheError):  # JSONDecodeError, UnicodeDecodeError: ValueErrors
        return False
    # The store keeps the config under "config" (beside its hash and version).
    cfg = stored.get("config", stored) if isinstance(stored, dict) else {}
    return isinstance(cfg, dict) and bool(cfg.get("rehearsal"))


def rehearsal_rows(results: pd.DataFrame) -> bool:
    """Whether ``results`` come from rehearsal runs: a true ``rehearsal`` column, a run of the ``path``
    column stored as a rehearsal, or (for results that name no run) a process building rehearsals
    (:func:`fedrepro.config.rehearsing`)."""
    if "rehearsal" in results.columns:
        return bool(results["rehearsal"].fillna(False).astype(bool).any())
    if "path" in results.columns and results["path"].notna().any():
        return any(_is_rehearsal_run(str(p)) for p in results["path"].dropna().unique())
    return rehearsing()


class MissingResults(LookupError):
    """The table lacks the rows a claim needs (e.g. a notebook ran a subset)."""


CLAIMS: Registry = Registry("claim")


def register_claim(claim: Claim) -> Claim:
    CLAIMS.register(claim.id)(claim)
    return claim


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
            margin: float = 0.0, label_a: str = "A", label_b: str = "B",
            ceiling: Ceiling | None = None) -> tuple[Test, str]:
    """A beats B by more than ``margin``: the paired per-seed difference A − B (``metric``) over the
    seeds both have, with its interval. With a ``ceiling`` the test also measures the room B leaves
    (:func:`room_left`), and a margin larger than that makes it UNTESTABLE."""
    seeds, va, vb = paired(results, a, b, metric)
    da, db = va.to_numpy(), vb.to_numpy()
    room = room_left(results, ceiling, a, db, metric, seeds, label_b) if ceiling is not None else (math.nan, "")
    test = exceeds(f"{label_a} − {label_b}", da - db, seeds, margin, room=room[0], room_of=room[1])
    wins = int((da > db).sum())
    evidence = (f"{label_a} {100 * da.mean():.2f} vs {label_b} {100 * db.mean():.2f} ({metric} acc %, mean over "
                f"seeds {seeds}); {test.text()}; {label_a} wins {wins}/{len(seeds)} seeds")
    return test, evidence


# How a grid column reads in a claim's labels and evidence: the papers' symbol where they have one,
# else the config key itself.
SETTING_NAMES = {"data.partition_args.alpha": "α", "data.partition_args.shots": "shots", "method.args.gamma": "γ",
                 "method.args.r_f": "R_f", "method.args.tau_p": "τ_p", "train.participation": "participation",
                 "method.args.n_prompts": "n_κ", "method.args.n_rho": "n_ρ"}


def setting_name(over: str) -> str:
    """A grid column as a claim's label says it: ``"α"`` for ``"data.partition_args.alpha"``
    (:data:`SETTING_NAMES`), else the key itself."""
    return SETTING_NAMES.get(over, over)


def setting(over: str, value: object) -> str:
    """One grid value as a claim's label says it: ``setting("data.partition_args.alpha", 0.5)`` is
    ``"α=0.5"``."""
    return f"{setting_name(over)}={value}"


def compare_each(results: pd.DataFrame, a: Mapping[str, object], b: Mapping[str, object], over: str, *,
                 metric: str = "best", margin: float = 0.0, label_a: str = "A", label_b: str = "B",
                 ceiling: Ceiling | None = None) -> tuple[list[Test], str]:
    """:func:`compare` at every value of column ``over`` present for both sides; the claim needs
    them all. A ``ceiling`` of rows is read at the same value of ``over`` (unless it names its own)."""
    if over not in results.columns:
        raise MissingResults(f"column {over!r} absent")
    tests, lines = [], []
    for value in sorted(results[over].dropna().unique()):
        here = ceiling
        if ceiling is not None and ceiling.rows is not None and over not in ceiling.rows:
            here = replace(ceiling, rows={**ceiling.rows, over: value})
        try:
            test, ev = compare(results, {**a, over: value}, {**b, over: value}, metric=metric, margin=margin,
                               label_a=f"{label_a} ({setting(over, value)})", label_b=label_b, ceiling=here)
        except MissingResults:
            continue
        tests.append(test)
        lines.append(f"[{setting(over, value)}: {test.verdict}] {ev}")
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
        label = f"{col_a} − {col_b}" + ("" if value is None else f" ({setting(over, value)})")
        test = near_zero(label, va.loc[seeds].to_numpy() - vb.loc[seeds].to_numpy(), seeds, tol)
        tests.append(test)
        prefix = "" if value is None else f"[{setting(over, value)}] "
        lines.append(f"{prefix}{col_a} {100 * va.mean():.2f} vs {col_b} {100 * vb.mean():.2f}; {test.text()}")
    if not tests:
        raise MissingResults(f"no runs with {dict(where)}")
    return tests, "; ".join(lines)


def claims_dir(profile: str, root=None):
    """``output/<profile>/claims/`` under the output root (:mod:`fedrepro.env.settings`): where notebooks
    leave their claims for the summary notebook."""
    return output_path("claims", profile, root, create=True)


def save_claims(table: pd.DataFrame, notebook: str, profile: str):
    """Record a notebook's evaluated claims (JSON) so that the summary notebook can collect them, with
    the commit of the code that checked them (``-dirty`` when the package or notebooks differ from it)."""
    path = claims_dir(profile) / f"{notebook}.json"
    rows = table.to_dict(orient="records")
    commit = git_commit(repo_root(), ("fedrepro", "notebooks")) or "unknown"
    atomic_write_json(path, {"notebook": notebook, "profile": profile, "commit": commit, "claims": rows})
    return path


# What a notebook's claims file must hold for the pages (save_claims writes it), and what to do when not.
# Every field the pages read, so that a damaged one is named here and not met as a TypeError there.
VERDICT_FIELD = OneOf((*VERDICTS, REHEARSAL))
# A test as a record keeps it (Test.record; values and room null where not finite), and how firm the
# claim's verdict is (replication_record).
TEST_RECORD_FIELDS = {"name": str, "values": list, "seeds": list, "requires": OneOf(REQUIRES), "bound": NUMBER,
                      "level": NUMBER, "exact": bool, "room": MayLack(NUMBER), "limits": MayLack(ListOf(NUMBER)),
                      "verdict": str, "rerun": MayLack(MapOf(NUMBER))}
REPLICATION_FIELDS = {"same_verdict": MayLack(NUMBER), "strength": str, "rerun": MayLack(MapOf(NUMBER)),
                      "tests": ListOf(Obj(TEST_RECORD_FIELDS))}
CLAIM_ROW_FIELDS = {"claim_id": str, "paper": str, "verdict": VERDICT_FIELD,
                    **{k: MayLack(str) for k in ("statement", "source", "interval", "evidence", "effect", "cause",
                                                  "room")},
                    "seeds": MayLack(ListOf(int)), "max_seeds": MayLack(int), "runs": MayLack(ListOf(str)),
                    "cause_rules": MayLack(int), "replication": MayLack(Obj(REPLICATION_FIELDS))}
CLAIMS_FILE_FIX = ("delete it and render its notebook again (`fedrepro reproduce --profile {profile} --only "
                   "{notebook}`), which records its claims anew")


def recorded_claims(folder) -> dict[str, dict]:
    """The claims the notebooks recorded in ``folder`` (:func:`save_claims`), by claim id, each with
    the notebook that checked it, its commit (None in a record written before records named it) and
    when it was recorded (``recorded``: the file's time, UTC); empty when the folder does not exist."""
    folder = Path(folder)
    checked = {}
    for f in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        # The notebook's own part of its path ("fedotp_01_label_shift" -> "01_label_shift"), which --only matches.
        own = re.search(r"\d\d_.*", f.stem)
        fix = CLAIMS_FILE_FIX.format(profile=folder.parent.name, notebook=own.group(0) if own else f.stem)
        record = read_json_file(f, "claims file", fix, {"notebook": str, "claims": list}, ("claims", CLAIM_ROW_FIELDS))
        recorded = datetime.fromtimestamp(f.stat().st_mtime, timezone.utc).isoformat(timespec="microseconds")
        for row in record["claims"]:
            checked[row["claim_id"]] = {**row, "notebook": record["notebook"], "commit": record.get("commit"),
                                        "recorded": recorded}
    return checked


# The folder beside the results pages that keeps each notebook's last record (claims, commit, times).
KEPT = "claims"


def record_name(notebook: str) -> str:
    """The name a notebook records its claims under (:func:`save_claims`) and its kept record is
    written under: its path below ``notebooks/``, without ``.ipynb``, with "/" as "_"
    (``"fedotp/01_label_shift.ipynb"`` -> ``"fedotp_01_label_shift"``)."""
    return str(notebook).removesuffix(".ipynb").replace("/", "_")


def kept_records(folder: Path) -> dict[str, dict]:
    """The notebooks' records kept beside the pages (:func:`fedrepro.app.results_page.write_pages`
    writes them to ``<pages>/claims/``), by notebook path; empty where there are none."""
    kept = {}
    for f in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        record = read_json_file(f, "kept notebook record", "delete it: the pages then show its notebook's claims as "
                                "NOT RUN until a pass renders that notebook again", {"path": str, "claims": list},
                                ("claims", CLAIM_ROW_FIELDS))
        kept[record["path"]] = record
    return kept


def breakable_id(claim_id: str) -> str:
    """``claim_id`` as HTML code that a narrow column may wrap after a dot or an underscore, and
    nowhere else: a claim id broken mid-word reads as two words (``<wbr>`` adds no character, so a
    copied id is the id)."""
    return "<code>" + re.sub(r"([._])", r"\1<wbr>", claim_id) + "</code>"


def claims_table_style(table: pd.DataFrame):
    """A pandas Styler that colours verdicts and lets claim ids wrap only between words, for notebooks."""
    colours = {"PASS": "background-color: #d4f4dd", "FAIL": "background-color: #f8d7da",
               "INCONCLUSIVE": "background-color: #fff3cd", "NOT RUN": "background-color: #eeeeee",
               UNTESTABLE: "background-color: #e6dcf0", REHEARSAL: "background-color: #dde7f7"}
    cols = ["claim_id", "source", "statement", "verdict", "interval", "evidence"]
    # The class lets the teaching site keep the evidence column readable (fedrepro.app.book.builder.SITE_CSS).
    return (table[cols].style.map(lambda v: colours.get(v, ""), subset=["verdict"]).hide(axis="index")
            .format(breakable_id, subset=["claim_id"]).set_table_attributes('class="claims-table"'))
