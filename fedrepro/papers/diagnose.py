"""A likely cause for each claim that did not pass, read off the stored runs rather than typed.

A verdict other than PASS has several common causes, and the store can tell them apart. Each cause
is a :class:`Cause`: its kind, its text, and the measurement behind it. A cause that attributes a
FAIL to the budget, the scale or the stand-in (:data:`ATTRIBUTING`) must name a measurement, or it
cannot be made (:class:`Cause` refuses it):

- **budget**: the runs the claim compares were still moving when they stopped (by the flatness
  rule of :mod:`fedrepro.analysis.by_round`), or the claim's verdict changed in the last quarter of
  the rounds when the convergence notebooks cut the runs short, or a longer run of the same configs
  (:func:`save_longer`) changed it. More rounds could change it either way. Moving runs whose
  verdict has held over the last half of the rounds are not budget, nor are runs that move too
  slowly to matter: where the claim's effect is an accuracy difference, :func:`reach` bounds how far
  the moving runs could carry its mean over :data:`REACH_WINDOWS` more windows at their last
  window's pace, and when that is less than the shift that would change its verdict
  (:func:`needed_shift`), these runs are not what it lacks. The runs are those the claim's check
  selected (recorded with its verdict); for a check on rows that name no run (a derived table), all
  the runs its notebook read.
- **noise**: the verdict changed back and forth in the last quarter of the rounds (more than once):
  each round's scores straddle the bound, so more seeds, not more rounds, would steady an
  INCONCLUSIVE; a FAIL's seeds agree at the last round, so the round chosen as final decides it.
- **seeds**: an INCONCLUSIVE verdict on runs that have flattened: the per-seed effects disagree
  about the bound, so more seeds (not more rounds) would decide it. A claim on one seed has no
  interval at all.
- **not a budget artefact**: a FAIL that a longer run measured: the claim read on runs of the same
  configs trained to at least :data:`LONGER_FACTOR` × the budget (a record of :func:`save_longer`)
  FAILs at every cut from the budget on. The cause names that run, its rounds and the effect at each
  budget. Flat curves do not clear a budget: a curve flat over 5-round windows can still gain a
  point per 50 rounds, so a FAIL on flat or settled runs with no longer run measured is **budget
  not ruled out**, with what was measured (flat, settled, too slow to matter).
- **φ-epoch budget**: a FAIL whose compared runs give their feature extractors unequal training: the
  method's schedule trains φ on the classification loss for fewer epochs a round than the baselines
  it is compared with (FedPFT's R_a = 1 against the baselines' 5). The numbers, per arm and over the
  run, are read off the stored configs (:func:`extractor_epochs`), never typed.
- **untestable**: an UNTESTABLE claim (:data:`fedrepro.claims.core.UNTESTABLE`): its required gain
  against the room its control leaves, as its test measured them.

Each claim gets one cause, and never one its verdict contradicts: a FAIL is not sent to more seeds,
an INCONCLUSIVE is not called settled.

:func:`causes` combines the notebooks' run traces (which runs each notebook read, from
``fedrepro reproduce``), the stored per-round metrics and configs, the verdicts by round that the
convergence notebooks save with :func:`save_by_round`, and the longer runs saved with
:func:`save_longer`.
"""
from __future__ import annotations

import dataclasses
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import pandas as pd

from ..analysis.by_round import FLAT_TOLERANCE, FLAT_WINDOW, FLAT_Z, change_rounds, evaluated, judge
from ..config import RunConfig
from ..errors import ConfigError
from ..methods import METHODS
from ..methods.base import ModelMethod
from ..methods.pft import CE_ROUTES, PFTMethod
from ..runs.store import RunResult
from ..runs.store import atomic_write_json
from ..claims.arms import Rows
from ..claims.core import UNTESTABLE, VERDICT_FIELD, claims_dir, read_interval, read_mean, shift_to_change
from ..env import trace
from ..env.settings import output_path
from ..env.jsonfiles import MayLack, read_json_file
from .verdicts import notebook_path, registered

LATE_SHARE = 0.25  # a verdict that changed in the last quarter of the rounds has not settled
SETTLED_SHARE = 0.5  # one that held over the last half has, whether or not its runs still move
# How far moving runs are extrapolated: two more flatness windows at their last window's pace. Our
# choice: curves that flatten slow down, so two windows of the last one's pace over-reach.
REACH_WINDOWS = 2
# A run of the same configs to at least this many times the budget's rounds measures the budget
# (save_longer); shorter ones are not read. Issue 54: twice the rounds, as the rounds pilots train.
LONGER_FACTOR = 2
# The version of these rules, recorded with each cause they read: a kept cause of an earlier version
# (its runs not in the store to read again) is shown as such. Raise it when a rule changes.
RULES_VERSION = 3  # 3: "not a budget artefact" only on a longer run; φ-epoch budget; untestable
# The rules of the module doc in one sentence, for the results pages.
RULES_IN_BRIEF = (
    "**budget** when the runs it compares (or, for a check on a derived table, the runs its notebook read) were "
    "still moving at their last rounds, fast enough that two more windows at that pace could carry its interval "
    "across the bound, and its verdict had not held over the last half of the rounds, or it changed "
    f"once in the last quarter, or a run of the same configs to {LONGER_FACTOR}× the rounds or more changed it, "
    "**noise** when it went back and forth there (more seeds, not more rounds, would "
    "steady it), **seeds** when runs that are flat or too slow to matter, or a verdict that has held over the last "
    "half of the rounds, give per-seed effects on both sides of the bound (or one seed), **not a budget artefact** "
    f"only when a run of the same configs to {LONGER_FACTOR}× the rounds or more still FAILs (the cause names it and "
    "the effect at each budget), **budget not ruled out** when a FAIL has flat or settled runs but no longer run "
    "was measured (flatness over 5-round windows cannot clear a budget), **φ-epoch budget** when the runs it "
    "compares train their feature extractors for unequal epochs (read off their configs), and **untestable** when "
    "its required gain exceeds the room its control leaves")
# The kinds of cause that attribute a verdict to the budget, the scale or the stand-in: each must name
# the measurement behind it (Cause.measurement).
ATTRIBUTING = ("budget", "not a budget artefact", "φ-epoch budget", "untestable")
KINDS = ("", "noise", "seeds", "budget not ruled out", *ATTRIBUTING)


@dataclass(frozen=True)
class Cause:
    """A claim's likely cause: its ``kind`` (:data:`KINDS`; "" for none), its ``text`` for the pages,
    and the ``measurement`` behind it, which every kind of :data:`ATTRIBUTING` must name: a cause that
    blames the budget, the scale or the stand-in without a measurement is refused. (A cause of another
    kind that adds such a note, a noisy FAIL's φ-epoch budget, names the note's measurement too.)"""

    kind: str
    text: str
    measurement: str = ""

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ConfigError(f"invalid cause kind={self.kind!r}; valid: {', '.join(map(repr, KINDS))}")
        if self.kind in ATTRIBUTING and not self.measurement:
            raise ConfigError(f"cause {self.kind!r} names no measurement; valid: a cause that attributes a "
                              "verdict to budget, scale or stand-in names what was measured")

    def __str__(self) -> str:
        return self.text


NO_CAUSE = Cause("", "")


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


# ---------------------------------------------------------------------------------------------
# Longer runs: the claim read on runs of the same configs trained past the budget
@dataclass(frozen=True)
class Longer:
    """A claim's verdicts on runs of the same configs trained longer than the profile's budget
    (:func:`save_longer`): ``cuts`` are ``(round, verdict, interval)`` in round order."""

    name: str
    budget: int
    cuts: tuple[tuple[int, str, str], ...]

    @property
    def last(self) -> int:
        return max((r for r, _, _ in self.cuts), default=0)

    @property
    def measured(self) -> bool:
        """Whether it reaches :data:`LONGER_FACTOR` × the budget (shorter runs measure nothing)."""
        return self.budget > 0 and self.last >= LONGER_FACTOR * self.budget

    @property
    def past_budget(self) -> tuple[tuple[int, str, str], ...]:
        return tuple(c for c in self.cuts if c[0] >= self.budget)

    @property
    def held(self) -> bool:
        """Whether it FAILs at every cut from the budget on."""
        return bool(self.past_budget) and all(v == "FAIL" for _, v, _ in self.past_budget)

    def text(self) -> str:
        """The run, its rounds and the claim's effect and verdict at each budget (at most six cuts)."""
        cuts = list(self.past_budget)
        if len(cuts) > 6:
            step = (len(cuts) - 1) / 5
            cuts = [cuts[round(i * step)] for i in range(6)]
        said = []
        for r, verdict, interval in cuts:
            read = read_mean(interval)
            said.append(f"{verdict} at {r} rounds" + (f" ({read[0]:+.2f}{read[1]})" if read else ""))
        first, last = read_mean(cuts[0][2]) if cuts else None, read_mean(cuts[-1][2]) if cuts else None
        moved = (f"; the effect moved {last[0] - first[0]:+.2f}{last[1]} from {cuts[0][0]} to {cuts[-1][0]} rounds"
                 if first and last and len(cuts) > 1 else "")
        times = self.last / self.budget
        return (f"the claim read on runs of the same configs trained to {self.last} rounds ({times:g}× the "
                f"{self.budget}-round budget; `{self.name}`): " + ", ".join(said) + moved)


def _longer_dir(claims_dir: Path) -> Path:
    return Path(claims_dir) / "longer"


def save_longer(verdicts: pd.DataFrame, name: str, profile: str, budget: int) -> Path:
    """Record claims' verdicts on runs of the same configs trained past the profile's ``budget`` of
    rounds and cut at several rounds (``verdicts``: ``round``, ``claim_id``, ``verdict``, ``interval``,
    as :func:`fedrepro.papers.verdicts.verdicts_by_round` gives them on the longer runs), for
    :func:`causes`: the measurement that can show a FAIL is not a budget artefact. A rounds pilot
    (``bench/fedpft_rounds_pilot.py``) writes one under the output root it runs in."""
    if not isinstance(budget, int) or isinstance(budget, bool) or budget < 1:
        raise ConfigError(f"invalid budget={budget!r}; valid: the profile's rounds, an integer >= 1")
    if verdicts.empty or int(verdicts["round"].max()) < budget:
        raise ConfigError(f"longer run {name!r} holds no cut at or past budget={budget} rounds; valid: verdicts "
                          "of runs trained past the budget")
    d = _longer_dir(claims_dir(profile))
    d.mkdir(parents=True, exist_ok=True)
    rows = [{"round": int(r["round"]), "claim_id": str(r["claim_id"]), "verdict": str(r["verdict"]),
             "interval": str(r.get("interval") or "")} for r in verdicts.to_dict(orient="records")]
    path = d / f"{name}.json"
    atomic_write_json(path, {"name": name, "profile": profile, "budget": budget, "verdicts": rows})
    return path


def longer_runs(profile: str, root: Path | None = None) -> dict[str, Longer]:
    """Per claim, the longest run past the budget recorded by :func:`save_longer` (under the output
    root ``root``); empty where none is."""
    out: dict[str, Longer] = {}
    for f in sorted(_longer_dir(claims_dir(profile, root)).glob("*.json")):
        record = read_json_file(f, "longer-run file", "delete it and run its pilot again, which records it anew",
                                {"budget": int, "verdicts": list, "name": MayLack(str)},
                                ("verdicts", {"round": int, "claim_id": str, "verdict": VERDICT_FIELD,
                                              "interval": MayLack(str)}))
        by_claim: dict[str, list] = {}
        for row in record["verdicts"]:
            by_claim.setdefault(row["claim_id"], []).append((row["round"], row["verdict"], row.get("interval") or ""))
        for cid, cuts in by_claim.items():
            run = Longer(record.get("name") or f.stem, record["budget"], tuple(sorted(cuts)))
            if cid not in out or run.last > out[cid].last:
                out[cid] = run
    return out


# ---------------------------------------------------------------------------------------------
# The feature extractor's budget: epochs of φ on the classification loss, read off a run's config
def extractor_epochs(cfg: RunConfig, rounds: int) -> int | None:
    """How many epochs a client trains the feature extractor φ on the classification loss over
    ``rounds`` rounds of ``cfg``'s method, read off the method's own schedule; None for a method whose
    schedule this does not read.

    - the FedPFT family and FedAvg+Linear (:class:`fedrepro.methods.pft.PFTMethod`): the epochs of each
      round's phases (``plan``) whose classification route trains φ (``CE_ROUTES``): R_a a round when
      alternating, R_f + R_a when not (ICLR Table 4's Setting II), none in the two-stage baseline's
      contrastive stage;
    - FedRep: its body epochs (``train.local_epochs`` when ``None``);
    - a method that keeps :class:`fedrepro.methods.base.ModelMethod`'s local training (FedAvg, FedPer,
      FedBN, Local): ``train.local_epochs``, every parameter trained.
    """
    cls = METHODS.get(cfg.method.name)
    params = cls.parse_params(cfg.method.args)
    if issubclass(cls, PFTMethod):
        # plan() reads only the parameters and the config (the schedule, not the model): a method
        # object without a model is enough to ask it.
        schedule = object.__new__(cls)
        schedule.p, schedule.ctx = params, SimpleNamespace(cfg=cfg)
        return sum(epochs for rnd in range(rounds) for phase, epochs, _ in schedule.plan(rnd)
                   if "phi" in CE_ROUTES.get(phase, ()))
    names = {f.name for f in dataclasses.fields(params)} if dataclasses.is_dataclass(params) else set()
    if {"head_epochs", "body_epochs"} <= names:  # FedRep: head epochs with φ frozen, then body epochs
        return rounds * (cfg.train.local_epochs if params.body_epochs is None else params.body_epochs)
    if issubclass(cls, ModelMethod) and cls.local_train is ModelMethod.local_train \
            and cls.client_update is ModelMethod.client_update:
        return rounds * cfg.train.local_epochs
    return None


@dataclass(frozen=True)
class Arm:
    """The runs of one arm of a comparison: its label, φ's epochs a round (mean over its rounds) and
    over each run (fewest, most), its rounds (fewest, most), SGD steps an epoch (0 when unknown), and
    whether it is the claim's method (None when the claim does not say)."""

    label: str
    per_round: float
    total: tuple[int, int]
    rounds: tuple[int, int]
    steps: int = 0
    method: bool | None = None

    def text(self) -> str:
        def span(pair: tuple[int, int]) -> str:
            return f"{pair[0]}" if pair[0] == pair[1] else f"{pair[0]}-{pair[1]}"

        steps = self.per_round * self.steps
        said = f", {steps:g} SGD step{'s' if steps != 1 else ''} a round" if self.steps else ""
        return f"{self.label} {self.per_round:g} a round ({span(self.total)} over its {span(self.rounds)} rounds{said})"


@dataclass(frozen=True)
class ExtractorBudget:
    """The feature-extractor budgets of the arms a claim compares (:func:`extractor_budget`)."""

    arms: tuple[Arm, ...]
    unread: tuple[str, ...] = ()  # methods whose schedule extractor_epochs does not read

    @property
    def applies(self) -> bool:
        """Whether the arm with the fewest φ epochs a round trains fewer than another, and (where the
        claim names its method) that arm is the method's: then the method's φ had less training."""
        if len(self.arms) < 2:
            return False
        fewest = min(a.per_round for a in self.arms)
        if fewest >= max(a.per_round for a in self.arms):
            return False
        if all(a.method is None for a in self.arms):
            return True
        return any(a.method and a.per_round == fewest for a in self.arms) and \
            any(a.method is False and a.per_round > fewest for a in self.arms)

    def text(self) -> str:
        arms = sorted(self.arms, key=lambda a: (a.per_round, a.label))
        unread = f" ({', '.join(self.unread)}: schedule not read)" if self.unread else ""
        lead = ("the method's feature extractor trains on the classification loss for fewer epochs than the "
                "baselines it is compared with" if any(a.method for a in self.arms) else
                "the runs it compares train their feature extractor on the classification loss for unequal epochs")
        return f"φ-epoch budget: {lead}, read off their configs: " + ", ".join(a.text() for a in arms) + unread


def _labels(groups: dict[tuple[str, str], dict]) -> dict[tuple[str, str], str]:
    """Each group's label: its method's name, with the parameters that tell it from another group of
    the same method (``fedpft (alternate=False)``)."""
    out = {}
    for key, g in groups.items():
        twins = [o for k, o in groups.items() if k[0] == key[0] and k != key]
        differ = sorted({n for o in twins for n in g["params"] if o["params"].get(n) != g["params"][n]})
        values = ", ".join(f"{n}={g['params'][n]}" for n in differ)
        out[key] = key[0] + (f" ({values})" if differ else "")
    return out


def extractor_budget(hashes, runs_dir: Path, methods: frozenset[str] | None = None,
                     cache: dict | None = None) -> ExtractorBudget | None:
    """The φ budgets of the stored runs ``hashes``, one :class:`Arm` per method and parameters
    (missing or unreadable runs are skipped); ``methods``: the claim's method names (its arms'),
    to tell its arms from the baselines'. None when no run is readable."""
    cache = {} if cache is None else cache
    groups: dict[tuple[str, str], dict] = {}
    unread = set()
    for h in sorted(set(hashes)):
        key = ("config", h)
        if key not in cache:
            folder = Path(runs_dir) / h
            try:
                res = RunResult(folder)
                cache[key] = (res.config, int(res.summary["rounds"]))
            except Exception:  # a missing or unfinished run tells nothing about its schedule
                cache[key] = None
        if cache[key] is None:
            continue
        cfg, rounds = cache[key]
        try:
            epochs = extractor_epochs(cfg, rounds)
        except Exception:  # a method no longer registered, or parameters it no longer takes
            epochs = None
        if epochs is None:
            unread.add(cfg.method.name)
            continue
        params = dataclasses.asdict(METHODS.get(cfg.method.name).parse_params(cfg.method.args))
        g = groups.setdefault((cfg.method.name, json.dumps(params, sort_keys=True, default=str)),
                              {"params": params, "totals": [], "rounds": [], "steps": set()})
        g["totals"].append(epochs)
        g["rounds"].append(rounds)
        n = (cfg.data.partition_args or {}).get("train_per_client")
        g["steps"].add(math.ceil(n / cfg.train.batch_size) if isinstance(n, int) and n > 0 else 0)
    if not groups:
        return None
    labels = _labels(groups)
    arms = tuple(Arm(labels[k], sum(g["totals"]) / sum(g["rounds"]) if sum(g["rounds"]) else 0.0,
                     (min(g["totals"]), max(g["totals"])), (min(g["rounds"]), max(g["rounds"])),
                     next(iter(g["steps"])) if len(g["steps"]) == 1 else 0,
                     None if not methods else k[0] in methods)
                 for k, g in groups.items())
    return ExtractorBudget(arms, tuple(sorted(unread)))


def claim_methods(claim_id: str) -> frozenset[str]:
    """The method names a registered claim's arms put on its method's side (``Rows`` arms whose method
    and control name different methods); empty where its arms do not name methods."""
    reg = registered()
    if claim_id not in reg.names():
        return frozenset()
    names = set()
    for arm in reg.get(claim_id).arms:
        if isinstance(arm, Rows):
            mine, theirs = arm.method.get("method.name"), arm.control.get("method.name")
            if mine is not None and theirs is not None and mine != theirs:
                names.update(mine if isinstance(mine, (tuple, list)) else (mine,))
    return frozenset(names)


# ---------------------------------------------------------------------------------------------
# The rules
def cause_of(verdict: str, evidence: str, moved: Movement | None, changed: tuple[int, int, int] | None = None,
             needed: float = math.nan, seeds: int = 0, longer: Longer | None = None,
             extractor: ExtractorBudget | None = None, room: str = "") -> Cause:
    """The likely :class:`Cause` of a verdict other than PASS (rules: module doc); none for PASS, NOT
    RUN and REHEARSAL (its numbers mean nothing), and for a claim with nothing stored to inspect.
    ``changed`` is the claim's entry of :func:`last_change`; ``needed`` the shift in points that would
    change the verdict of its interval (NaN for an effect in other units) and ``seeds`` how many seeds
    it read, for :func:`reach`; ``longer`` its longest run past the budget (:func:`longer_runs`);
    ``extractor`` its arms' φ budgets (:func:`extractor_budget`); ``room`` an UNTESTABLE claim's
    required gain against its room (``ClaimResult.room``)."""
    if verdict in ("PASS", "NOT RUN", "REHEARSAL"):
        return NO_CAUSE
    if verdict == UNTESTABLE:
        return Cause("untestable", f"untestable at this profile: the stand-in leaves no room ({room})", room) \
            if room else NO_CAUSE
    phi = extractor if verdict == "FAIL" and extractor is not None and extractor.applies else None
    if verdict == "FAIL" and longer is not None and longer.measured:
        # A measured longer run outranks what the budget's own curves suggest.
        said = longer.text()
        if longer.held:
            return Cause("not a budget artefact", f"not a budget artefact up to {longer.last} rounds: {said}"
                         + (f"; {phi.text()}" if phi else ""), said)
        return Cause("budget", f"budget: {said}" + (f"; {phi.text()}" if phi else ""), said)
    also = f"; {phi.text()}" if phi else ""
    last_round, cuts, flips = changed if changed else (0, 0, 0)
    late = bool(changed) and last_round > (1 - LATE_SHARE) * cuts
    moving = bool(moved and moved.moving)
    if late and flips > 1:
        # Back and forth, not a drift: each round's final scores straddle the bound.
        flipped = (f"noise: the verdict changed {flips} times in the last quarter of the rounds (last at round "
                   f"{last_round} of {cuts}), so one round's scores sit on either side of the bound")
        if verdict == "FAIL":  # the seeds agree at the last round: which round is last decides it, not seeds
            return Cause("noise", flipped + "; the seeds agree at the last round, so the round chosen as final "
                         "decides it" + also, phi.text() if phi else "")
        return Cause("noise", flipped + "; more seeds, not more rounds, would steady it")
    settled = bool(changed) and last_round <= (1 - SETTLED_SHARE) * cuts
    held = ((f"its verdict has been the same at every cut since round {last_round} of {cuts}" if last_round
             else f"its verdict was the same at every cut of rounds 1 to {cuts}") if changed else "")
    far = reach(moved, seeds)
    outpaced = moving and far < needed  # the runs move, but too slowly to carry the interval across
    if moving and not settled and not outpaced:
        if late:
            said = f"the verdict changed at round {last_round} of {cuts}, and {moved.text()}"
            return Cause("budget", f"budget: {said}" + also, said)
        return Cause("budget", f"budget: {moved.text()}" + (f", though {held}" if changed else "") + also,
                     moved.text())
    if late:
        said = f"the verdict changed at round {last_round} of {cuts}"
        return Cause("budget", f"budget: {said}" + also, said)
    if _one_seed(evidence):
        return Cause("seeds", "seeds: it rests on one seed, so there is no interval")
    if moving:  # settled (the verdict has not moved for half the rounds) or outpaced
        why = (f"{held}, though {moved.text()}" if settled else moved.text()) + (
            f", but {REACH_WINDOWS} more windows at that pace would move its effect by at most {far:.2f} pts, "
            f"less than the {needed:.2f} pts that would change its verdict" if outpaced else "")
    elif moved and moved.runs:
        why = f"the {moved.runs} runs {moved.whose} are flat" + (" and the verdict settled" if changed else "")
    else:
        why = held
    if verdict == "INCONCLUSIVE":
        return Cause("seeds", "seeds: the per-seed effects straddle the bound" + (f" ({why})" if why else ""))
    if phi:
        return Cause("φ-epoch budget", f"{phi.text()}; no longer run measured, so the budget is not ruled out"
                     + (f" ({why})" if why else ""), phi.text())
    if why:
        return Cause("budget not ruled out",
                     f"budget not ruled out: no longer run measured ({why}); a curve flat over {FLAT_WINDOW}-round "
                     f"windows can still gain a point over many more rounds, so only a run of the same configs to "
                     f"{LONGER_FACTOR}× the rounds can show the effect is absent at this profile")
    return NO_CAUSE  # nothing stored to inspect: the page says so


def likely_cause(verdict: str, evidence: str, moved: Movement | None,
                 changed: tuple[int, int, int] | None = None, needed: float = math.nan, seeds: int = 0,
                 longer: Longer | None = None, extractor: ExtractorBudget | None = None, room: str = "") -> str:
    """The text of :func:`cause_of` ("" for none)."""
    return cause_of(verdict, evidence, moved, changed, needed, seeds, longer, extractor, room).text


def cause_details(profile: str, claims: pd.DataFrame, runs_dir: Path | None = None,
                  root: Path | None = None) -> pd.Series:
    """A :class:`Cause` per row of ``claims`` (:func:`fedrepro.papers.verdicts.collect_claims`), indexed
    like it.

    Reads ``output/<profile>/trace/<notebook>.jsonl`` under the output root ``root`` (written by
    ``fedrepro reproduce``) for the runs each notebook read; a notebook rendered outside ``reproduce``
    has no trace and gets only the seed-based causes. The longer runs are :func:`longer_runs`'; the φ
    budgets are read off the configs of the runs each claim compares."""
    runs_dir = Path(runs_dir) if runs_dir is not None else output_path("runs", profile, root)
    trace_dir = output_path("trace", profile, root)
    changed: dict[str, tuple[int, int, int]] = {}
    for f in sorted(_by_round_dir(claims_dir(profile, root)).glob("*.json")):
        record = read_json_file(f, "verdicts-by-round file", "delete it and render its notebook again (`fedrepro "
                                f"reproduce --profile {profile} --only <notebook>`), which records them anew",
                                {"verdicts": list},
                                ("verdicts", {"round": int, "claim_id": str, "verdict": VERDICT_FIELD}))
        changed.update(last_change(pd.DataFrame(record["verdicts"], columns=["round", "claim_id", "verdict"])))
    longer = longer_runs(profile, root)
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
        # The φ budgets only of the runs the claim compares: a notebook's runs hold arms of other claims.
        phi = extractor_budget(own, runs_dir, claim_methods(row["claim_id"]), judged) \
            if own and row["verdict"] == "FAIL" else None
        out[i] = cause_of(row["verdict"], evidence, here, changed.get(row["claim_id"]),
                          needed_shift(row.get("interval")), seed_count(evidence, row.get("seeds")),
                          longer.get(row["claim_id"]), phi,
                          row.get("room") if isinstance(row.get("room"), str) else "")
    return pd.Series(out, dtype=object)


def causes(profile: str, claims: pd.DataFrame, runs_dir: Path | None = None,
           root: Path | None = None) -> pd.Series:
    """The text of each :func:`cause_details` ("" for none), indexed like ``claims``."""
    return cause_details(profile, claims, runs_dir, root).map(str)


def _trace_name(notebook: str) -> str:
    """The trace file of the notebook whose claims are saved as ``notebook``:
    ``"pfedcspc_01_global_and_personalized"`` → ``"pfedcspc__01_global_and_personalized.ipynb.jsonl"``,
    ``"00_tour"`` → ``"00_tour.ipynb.jsonl"``."""
    return trace.notebook_file(notebook_path(notebook) + ".ipynb")
