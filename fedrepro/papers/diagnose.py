"""A likely cause for each claim that did not pass, read off the stored runs rather than typed.

A verdict other than PASS has four common causes, and the store can tell them apart:

- **budget**: the runs the claim compares were still moving when they stopped (by the flatness
  rule of :mod:`fedrepro.analysis.by_round`), or the claim's verdict changed in the last quarter of
  the rounds when the convergence notebooks cut the runs short. More rounds could change it either
  way. Moving runs whose verdict has held over the last half of the rounds are not budget (see
  **not a budget artefact**), nor are runs that move too slowly to matter: where the claim's effect
  is an accuracy difference, :func:`reach` bounds how far the moving runs could carry its mean over
  :data:`REACH_WINDOWS` more windows at their last window's pace, and when that is less than the
  shift that would change its verdict (:func:`needed_shift`), more rounds are not what it lacks.
  The runs are those the claim's check selected (recorded with its verdict); for a check on rows
  that name no run (a derived table), all the runs its notebook read.
- **noise**: the verdict changed back and forth in the last quarter of the rounds (more than once):
  each round's scores straddle the bound, so more seeds, not more rounds, would steady an
  INCONCLUSIVE; a FAIL's seeds agree at the last round, so the round chosen as final decides it.

Each claim gets one cause, and never one its verdict contradicts: a FAIL is not sent to more seeds,
an INCONCLUSIVE is not called settled.
- **seeds**: an INCONCLUSIVE verdict on runs that have flattened: the per-seed effects disagree
  about the bound, so more seeds (not more rounds) would decide it. A claim on one seed has no
  interval at all.
- **not a budget artefact**: a FAIL on flat runs, or a FAIL whose verdict has held at every cut over
  the last :data:`SETTLED_SHARE` of the rounds (settled) even if some runs still move: a gap that
  kept its sign while the runs grew is unlikely to close in the next rounds. The effect is absent at
  this profile's scale; what differs from the paper (data, model, rounds) is the next suspect. A
  settled INCONCLUSIVE is **seeds**.

:func:`causes` combines the notebooks' run traces (which runs each notebook read, from
``fedrepro reproduce``), the stored per-round metrics, and the verdicts by round that the
convergence notebooks save with :func:`save_by_round`.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ..analysis.by_round import FLAT_TOLERANCE, FLAT_WINDOW, FLAT_Z, change_rounds, evaluated, judge
from ..runs.store import RunResult
from ..runs.store import atomic_write_json
from ..claims.core import VERDICT_FIELD, claims_dir, read_interval, shift_to_change
from ..env import trace
from ..env.settings import output_path
from ..env.jsonfiles import read_json_file
from .verdicts import notebook_path

LATE_SHARE = 0.25  # a verdict that changed in the last quarter of the rounds has not settled
SETTLED_SHARE = 0.5  # one that held over the last half has, whether or not its runs still move
# How far moving runs are extrapolated: two more flatness windows at their last window's pace. Our
# choice: curves that flatten slow down, so two windows of the last one's pace over-reach.
REACH_WINDOWS = 2
# The version of these rules, recorded with each cause they read: a kept cause of an earlier version
# (its runs not in the store to read again) is shown as such. Raise it when a rule changes.
RULES_VERSION = 2  # 2: runs too slow to carry the interval across the bound are not budget (reach)
# The rules of the module doc in one sentence, for the results pages.
RULES_IN_BRIEF = (
    "**budget** when the runs it compares (or, for a check on a derived table, the runs its notebook read) were "
    "still moving at their last rounds, fast enough that two more windows at that pace could carry its interval "
    "across the bound, and its verdict had not held over the last half of the rounds, or it changed "
    "once in the last quarter, **noise** when it went back and forth there (more seeds, not more rounds, would "
    "steady it), **seeds** when runs that are flat or too slow to matter, or a verdict that has held over the last "
    "half of the rounds, give per-seed effects on both sides of the bound (or one seed), **not a budget artefact** "
    "when a FAIL has such runs or such a verdict")


@dataclass(frozen=True)
class Movement:
    """How much the runs a notebook read still moved over their last rounds."""
    runs: int          # runs with enough evaluated rounds to judge (2 windows)
    moving: int        # of those, runs that are not flat by the rule of fedrepro.analysis.by_round
    largest: float     # the largest |change| in accuracy (fraction), 0 when no run qualifies
    whose: str = "its notebook read"  # which runs: those the claim compares, or its notebook's
    total: float = math.nan  # the sum of the moving runs' |change| (fraction); NaN when not summed

    def text(self) -> str:
        return (f"{self.moving} of {self.runs} runs {self.whose} still moved over their last "
                f"{FLAT_WINDOW} rounds by more than {100 * FLAT_TOLERANCE:.1f} points and {FLAT_Z:g}× "
                f"their round-to-round noise (largest move {100 * self.largest:.1f})")


def _judged(h: str, runs_dir: Path) -> tuple[float, bool] | None:
    """``(last change, flat)`` of stored run ``h``; None when it is missing, unreadable or too short."""
    folder = Path(runs_dir) / h
    if not (folder / "config.json").is_file():
        return None
    try:
        rounds = RunResult(folder).rounds
    except Exception:  # an unfinished or unreadable run says nothing about convergence
        return None
    change, _, flat = judge(evaluated(rounds)["acc_mean"].to_numpy())
    return None if math.isnan(change) else (change, flat)


def movement(hashes, runs_dir: Path, whose: str = "its notebook read", cache: dict | None = None) -> Movement:
    """:class:`Movement` of the stored runs ``hashes`` (missing or too short runs are skipped);
    ``cache`` keeps each run's judgement for the next call (claims share runs)."""
    cache = {} if cache is None else cache
    judged = []
    for h in sorted(set(hashes)):
        if h not in cache:
            cache[h] = _judged(h, runs_dir)
        if cache[h] is not None:
            judged.append(cache[h])
    return Movement(len(judged), sum(not flat for _, flat in judged),
                    max((abs(c) for c, _ in judged), default=0.0), whose,
                    sum(abs(c) for c, flat in judged if not flat))


def reach(moved: Movement | None, seeds: int) -> float:
    """How far, in points, the mean paired effect of a claim on ``seeds`` seeds could still drift if
    every moving run kept its last window's pace for :data:`REACH_WINDOWS` more windows, all in the
    direction that matters: a run moves its seed's effect by its own change, so the mean moves by the
    changes' sum over the seeds. An upper bound (the runs need not move together, or at all); NaN
    when the movement was not summed or the seeds are unknown."""
    if moved is None or not seeds or math.isnan(moved.total):
        return math.nan
    return REACH_WINDOWS * 100 * moved.total / seeds


def _by_round_dir(claims_dir: Path) -> Path:
    return Path(claims_dir) / "by_round"


def save_by_round(verdicts: pd.DataFrame, notebook: str, profile: str) -> Path:
    """Record a convergence notebook's verdicts by round (the output of
    :func:`fedrepro.papers.verdicts.verdicts_by_round`) for :func:`causes`."""
    d = _by_round_dir(claims_dir(profile))  # under this process's output root, like save_claims
    d.mkdir(parents=True, exist_ok=True)
    rows = verdicts[["round", "claim_id", "verdict"]].to_dict(orient="records")
    path = d / f"{notebook}.json"
    atomic_write_json(path, {"notebook": notebook, "profile": profile, "verdicts": rows})
    return path


def last_change(verdicts: pd.DataFrame) -> dict[str, tuple[int, int, int]]:
    """Per claim: (the last round at which its verdict changed, or 0; the last round cut; how many
    times it changed in the last :data:`LATE_SHARE` of the rounds)."""
    cuts = verdicts.groupby("claim_id")["round"].max()
    out = {}
    for cid, changed in change_rounds(verdicts).items():
        last = int(cuts[cid])
        out[cid] = (int(changed.iloc[-1]) if len(changed) else 0, last,
                    int((changed > (1 - LATE_SHARE) * last).sum()))
    return out


def needed_shift(interval) -> float:
    """The shift in points that would change the verdict of a recorded claim's interval
    (:func:`fedrepro.claims.core.shift_to_change`); NaN when it is not an accuracy difference in
    points or is unbounded."""
    read = read_interval(interval) if isinstance(interval, str) else None
    if read is None or read[4] != " pts":
        return math.nan
    return shift_to_change(*read[:4])


def seed_count(evidence: str, seeds) -> int:
    """How many seeds a claim's deciding test read: the fewest of its tests' ``seeds [...]`` in its
    evidence (fewer seeds, more reach), else its recorded ``seeds``; 0 when neither says."""
    groups = _seed_groups(evidence)
    if groups:
        return min(groups)
    return len(seeds) if isinstance(seeds, (list, tuple)) else 0


def _seed_groups(evidence: str) -> list[int]:
    """How many seeds each ``seeds [...]`` of a claim's evidence lists."""
    return [len([s for s in g.split(",") if s.strip()]) for g in re.findall(r"seeds \[([^\]]*)\]", evidence or "")]


def _one_seed(evidence: str) -> bool:
    groups = _seed_groups(evidence)
    return bool(groups) and all(n == 1 for n in groups)


def likely_cause(verdict: str, evidence: str, moved: Movement | None,
                 changed: tuple[int, int, int] | None = None, needed: float = math.nan, seeds: int = 0) -> str:
    """The likely cause of a verdict other than PASS (rules: module doc); "" for PASS, NOT RUN, and a
    claim with no stored runs to inspect, and a REHEARSAL (its numbers mean nothing). ``changed`` is
    the claim's entry of :func:`last_change`; ``needed`` the shift in points that would change the
    verdict of its interval (NaN for an effect in other units) and ``seeds`` how many seeds it read,
    for :func:`reach`."""
    if verdict in ("PASS", "NOT RUN", "REHEARSAL"):
        return ""
    last_round, cuts, flips = changed if changed else (0, 0, 0)
    late = bool(changed) and last_round > (1 - LATE_SHARE) * cuts
    moving = bool(moved and moved.moving)
    if late and flips > 1:
        # Back and forth, not a drift: each round's final scores straddle the bound.
        flipped = (f"noise: the verdict changed {flips} times in the last quarter of the rounds (last at round "
                   f"{last_round} of {cuts}), so one round's scores sit on either side of the bound")
        if verdict == "FAIL":  # the seeds agree at the last round: which round is last decides it, not seeds
            return flipped + "; the seeds agree at the last round, so the round chosen as final decides it"
        return flipped + "; more seeds, not more rounds, would steady it"
    settled = bool(changed) and last_round <= (1 - SETTLED_SHARE) * cuts
    held = ((f"its verdict has been the same at every cut since round {last_round} of {cuts}" if last_round
             else f"its verdict was the same at every cut of rounds 1 to {cuts}") if changed else "")
    far = reach(moved, seeds)
    outpaced = moving and far < needed  # the runs move, but too slowly to carry the interval across
    if moving and not settled and not outpaced:
        if late:
            return f"budget: the verdict changed at round {last_round} of {cuts}, and {moved.text()}"
        return f"budget: {moved.text()}" + (f", though {held}" if changed else "")
    if late:
        return f"budget: the verdict changed at round {last_round} of {cuts}"
    if _one_seed(evidence):
        return "seeds: it rests on one seed, so there is no interval"
    if moving:  # settled (the verdict has not moved for half the rounds) or outpaced
        why = (f"{held}, though {moved.text()}" if settled else moved.text()) + (
            f", but {REACH_WINDOWS} more windows at that pace would move its effect by at most {far:.2f} pts, "
            f"less than the {needed:.2f} pts that would change its verdict" if outpaced else "")
    elif moved and moved.runs:
        why = f"the {moved.runs} runs {moved.whose} are flat" + (" and the verdict settled" if changed else "")
    else:
        why = held
    if verdict == "INCONCLUSIVE":
        return "seeds: the per-seed effects straddle the bound" + (f" ({why})" if why else "")
    if why:
        return (f"not a budget artefact: {why}; the effect is absent at this profile's scale "
                f"(data, model and rounds differ from the paper's)")
    return ""  # nothing stored to inspect: the page says so


def causes(profile: str, claims: pd.DataFrame, runs_dir: Path | None = None,
           root: Path | None = None) -> pd.Series:
    """A likely cause per row of ``claims`` (:func:`fedrepro.papers.verdicts.collect_claims`), indexed like it.

    Reads ``output/<profile>/trace/<notebook>.jsonl`` under the output root ``root`` (written by
    ``fedrepro reproduce``) for the runs each notebook read; a notebook rendered outside ``reproduce`` has no trace and
    gets only the
    seed-based causes."""
    runs_dir = Path(runs_dir) if runs_dir is not None else output_path("runs", profile, root)
    trace_dir = output_path("trace", profile, root)
    changed: dict[str, tuple[int, int, int]] = {}
    for f in sorted(_by_round_dir(claims_dir(profile, root)).glob("*.json")):
        record = read_json_file(f, "verdicts-by-round file", "delete it and render its notebook again (`fedrepro "
                                f"reproduce --profile {profile} --only <notebook>`), which records them anew",
                                {"verdicts": list},
                                ("verdicts", {"round": int, "claim_id": str, "verdict": VERDICT_FIELD}))
        changed.update(last_change(pd.DataFrame(record["verdicts"], columns=["round", "claim_id", "verdict"])))
    moved: dict[str, Movement | None] = {}
    judged: dict = {}  # each run read once, however many claims compare it
    out = {}
    for i, row in claims.iterrows():
        nb = row.get("notebook") if isinstance(row.get("notebook"), str) else None
        evidence = row.get("evidence") if isinstance(row.get("evidence"), str) else ""
        own = row.get("runs") if isinstance(row.get("runs"), (list, tuple)) else []
        if own:
            here = movement(own, runs_dir, whose="it compares", cache=judged)
        else:
            if nb and nb not in moved:
                # claims record "<paper>_<NN>_<name>"; traces are named after the notebook's path
                events = trace.read(trace_dir / _trace_name(nb))
                hashes = [e["hash"] for e in events if e.get("event") == "run"]
                moved[nb] = movement(hashes, runs_dir, cache=judged) if hashes else None
            here = moved.get(nb)
        out[i] = likely_cause(row["verdict"], evidence, here, changed.get(row["claim_id"]),
                              needed_shift(row.get("interval")), seed_count(evidence, row.get("seeds")))
    return pd.Series(out, dtype=object)


def _trace_name(notebook: str) -> str:
    """The trace file of the notebook whose claims are saved as ``notebook``:
    ``"pfedcspc_01_global_and_personalized"`` → ``"pfedcspc__01_global_and_personalized.ipynb.jsonl"``,
    ``"00_tour"`` → ``"00_tour.ipynb.jsonl"``."""
    return trace.notebook_file(notebook_path(notebook) + ".ipynb")
