"""FedOTP's claims, checked on our results.

Each claim is a sign or an ordering read off the paper's tables and figures, the kind of finding that
should survive a small-scale run. Result tables are those of :mod:`.tables` (a ``row`` column naming
the setting, ``seed``, ``final``); Table 1's claim reads :func:`label_results` (a ``dataset``
column); the plan-mass claim reads the planted-patch table and the clustering claim the local-prompt
table of :mod:`fedrepro.analysis`.

Each check turns its claim into effects measured once per seed (mostly a difference paired by seed)
with the claim's bound, so that the verdict (PASS, INCONCLUSIVE or FAIL) rests on their interval over
the seeds; an ordering or a shape becomes several such effects, all needed. Bounds are fixed before
looking at results and never tuned to pass. "Not worse" allows a gap down to −:data:`NOT_WORSE` (the
paper's own OT-variant gaps are about one point, within a seed's spread at this scale).
"""
from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from ...claims import arms
from ...claims.core import (DEFAULT_MAX_SEEDS, Claim, MissingResults, Test, compare, exceeds, gap_larger_in, paired,
                            register_claim)
from ..reference import quarter_of_smallest_gap
from .tables import BUDGET, OLD_STANDIN, PAPER_LR, STUDY_PAIRS
from .variants import COOP_EQUAL, PFEDPROMPT_UNSCALED

ROW, METRIC = "row", "final"
ALPHA, SHOTS, GAMMA = "data.partition_args.alpha", "data.partition_args.shots", "method.args.gamma"
# "≫" under pathological label shift: Table 1's FedOTP − PromptFL is +19.49 points on average and at
# least +9.12 per dataset (Caltech101; +17.92, +37.21, +22.55 and +10.65 on the others), so "more than 10
# on every dataset" would fail the paper's own table. We require what the other Table 1 claims require:
# a quarter of the smallest gap (T1_MARGIN["promptfl"], 2.28 points), on every dataset.
# "≫" at the strongest Dirichlet skew: Table A5's gap at α = 0.1 is +8.1 points; we require +5.
MUCH_DIRICHLET = 0.05
# "single-prompt FL collapses under feature + label shift": Tables 2 and A3 put FedOTP 37.8 and 20.5
# points above PromptFL; we require +10.
MUCH_FEATURE_LABEL = 0.10
# "≫ global-only": the shared prompt alone cannot learn a client's label set; at least +5 points.
MUCH_GLOBAL_ONLY = 0.05
# "≥" / "not worse": the gap may fall short by at most one point.
NOT_WORSE = 0.01
# "outperforms state-of-the-art algorithms by a large margin across all datasets" (Table 1), "consistently
# outperforms the baseline methods" (Table 3) and "in every case" (Table A5), "consistently achieves the
# highest average accuracy" (Tables 2, A3): against each baseline, a quarter of the smallest gap the
# paper's own table reports for it (the rule of the other papers' "outperforms" claims).
T1_COLUMNS = ("Food101", "DTD", "Caltech101", "Flowers102", "OxfordPets")
T1_BASELINES = ("zeroshot_clip", "coop", "promptfl_ft", "promptfl_fedprox", "promptfl_fedper", "promptfl_fedamp",
                "pfedprompt")
T1_MARGIN = {b: quarter_of_smallest_gap("fedotp", "T1", "fedotp", b, T1_COLUMNS) for b in ("promptfl", *T1_BASELINES)}
DOMAIN_BASELINES = ("zeroshot_clip", "coop", "promptfl_fedprox")
DOMAIN_MARGIN = {b: min(quarter_of_smallest_gap("fedotp", "T2", "fedotp", b, ["Avg"]),
                        quarter_of_smallest_gap("fedotp", "TA3", "fedotp", b, ["Avg"])) for b in DOMAIN_BASELINES}
TA5_COLUMNS = ("α=0.1", "α=0.3", "α=0.5", "α=1", "α=5", "α=10")
DIRICHLET_MARGIN = {b: quarter_of_smallest_gap("fedotp", "TA5", "fedotp", b, TA5_COLUMNS) for b in DOMAIN_BASELINES}
# Ours, over clutter (the feature_shift_cluttered table): FedOTP ahead of local CoOp by a quarter of Table A2's
# smaller domain-average gap over CoOp (Office-Caltech10's and DomainNet's), the paper's own feature-shift table.
CLUTTER_MARGIN = quarter_of_smallest_gap("fedotp", "TA2", "fedotp", "coop", ("Office Avg", "DN Avg"))
# Local CoOp at two budgets (fedrepro.papers.fedotp.variants): the paper's claims read the official one
# (one session of 10 epochs), and each has a twin marked "(ours)" on our equal-budget CoOp (trained every
# round, FedOTP's budget), whose claim ids say "coop_equal_budget".
COOP_EQUAL_ID = "coop_equal_budget"
LABEL = {"zeroshot_clip": "zero-shot CLIP", "coop": "CoOp (official budget)", COOP_EQUAL: "CoOp (equal budget, ours)",
         "promptfl": "PromptFL", "promptfl_ft": "PromptFL+FT", "promptfl_fedprox": "PromptFL+FedProx",
         "promptfl_fedper": "PromptFL+FedPer", "promptfl_fedamp": "PromptFL+FedAMP",
         "pfedprompt": "pFedPrompt (our reading)", PFEDPROMPT_UNSCALED: "pFedPrompt (our reading, unscaled cache)"}
# A claim on local CoOp and its twin on our equal-budget CoOp: (row, the claim id's name for it).
COOP_BUDGETS = (("coop", "coop"), (COOP_EQUAL, COOP_EQUAL_ID))


def _beats(r, a: str, b: str, margin: float, la: str, lb: str, where: str = "") -> tuple[Test, str]:
    """Row ``a`` − row ``b`` > ``margin``, paired by seed; ``where`` names the slice of ``r``."""
    test, ev = compare(r, {ROW: a}, {ROW: b}, metric=METRIC, margin=margin, label_a=la, label_b=lb)
    if not where:
        return test, ev
    return dataclasses.replace(test, name=f"{where}: {test.name}"), f"{where}: {ev}"


def _all(checks: list[tuple[Test, str]]) -> tuple[list[Test], str]:
    """Checks that must all hold: their tests and evidence side by side."""
    if not checks:
        raise MissingResults("nothing to check")
    return [t for t, _ in checks], "; ".join(e for _, e in checks)


def _rises(r: pd.DataFrame, col: str, a, b, metric: str, name: str) -> tuple[Test, str]:
    """``metric`` at ``col`` = ``a`` minus at ``col`` = ``b``, paired by seed, exceeds 0."""
    seeds, va, vb = paired(r, {col: a}, {col: b}, metric)
    test = exceeds(name, va - vb, seeds)
    return test, test.text()


def _col(r: pd.DataFrame, col: str) -> pd.DataFrame:
    if col not in r:
        raise MissingResults(f"column {col!r} absent")
    return r


def _on_every_dataset(r, a: str, b: str, margin: float):
    """Row ``a`` − row ``b`` > ``margin`` on every dataset of Table 1's results (a ``dataset`` column)."""
    la, lb = LABEL.get(a, "FedOTP"), LABEL.get(b, "FedOTP")
    return _all([_beats(g, a, b, margin, la, lb, str(d)) for d, g in _col(r, "dataset").groupby("dataset", sort=False)])


def _beats_promptfl_pathological(r):
    return _on_every_dataset(r, "fedotp", "promptfl", T1_MARGIN["promptfl"])


def _alpha(r: pd.DataFrame, alpha: float) -> pd.DataFrame:
    out = _col(r, ALPHA)[np.isclose(r[ALPHA].astype(float), alpha)]
    if out.empty:
        raise MissingResults(f"no runs at α={alpha:g}")
    return out


def _beats_promptfl_low_alpha(r):
    return _beats(_alpha(r, 0.1), "fedotp", "promptfl", MUCH_DIRICHLET, "FedOTP", "PromptFL", "α=0.1")


def _beats_promptfl_feature_label(r):
    return _beats(r, "fedotp", "promptfl", MUCH_FEATURE_LABEL, "FedOTP", "PromptFL")


def _at_every_alpha(r, a: str, b: str, margin: float):
    """Row ``a`` − row ``b`` > ``margin`` at every α of the results."""
    alphas = sorted(float(x) for x in _col(r, ALPHA)[ALPHA].unique())
    return _all([_beats(_alpha(r, x), a, b, margin, LABEL.get(a, "FedOTP"), LABEL.get(b, "FedOTP"), f"α={x:g}")
                 for x in alphas])


def _lead_grows(r):
    """Table A5, both halves of the statement: FedOTP leads PromptFL at every α run, and the lead at
    the smallest α minus the lead at the largest, per seed, exceeds 0 (a lead that "grows" from below
    zero is not the paper's finding)."""
    lo, hi = float(_col(r, ALPHA)[ALPHA].min()), float(r[ALPHA].max())
    leads, ev_leads = _at_every_alpha(r, "fedotp", "promptfl", 0.0)
    grows, ev_grows = gap_larger_in(_alpha(r, lo), _alpha(r, hi), {ROW: "fedotp"}, {ROW: "promptfl"}, METRIC,
                                    (f"α={lo:g}", f"α={hi:g}"), "FedOTP − PromptFL")
    return [*leads, grows], f"{ev_leads}; {ev_grows}"


def _prompt_sets(r):
    return _all([_beats(r, "fedotp", "fedotp_local_only (ours)", -NOT_WORSE, "global+local", "local-only"),
                 _beats(r, "fedotp_local_only (ours)", "fedotp_global_only (ours)", MUCH_GLOBAL_ONLY,
                        "local-only", "global-only")])


def _ot_order(r):
    """Table 4's ordering UOT ≥ OT ≥ averaging as its two steps, each 'not worse', at every shot count."""
    checks = []
    for shots, g in _col(r, SHOTS).groupby(SHOTS, sort=True):
        where = f"{shots} shots"
        checks.append(_beats(g, "fedotp", "fedotp_ot", -NOT_WORSE, "UOT", "OT", where))
        checks.append(_beats(g, "fedotp_ot", "fedotp_average", -NOT_WORSE, "OT", "averaging", where))
    return _all(checks)


def _inverted_u(r):
    """Table A4's inverted U: the interior γ with the best mean accuracy beats each end of the γ range,
    paired by seed. Fixing one peak γ for all seeds (as the paper reports one best γ) rather than each
    seed's own interior maximum keeps a flat curve from passing on the noise of picking a maximum."""
    means = _col(r, GAMMA).groupby(GAMMA)[METRIC].mean().sort_index()
    if len(means) < 3:
        raise MissingResults("fewer than three γ values")
    lo, hi = means.index[0], means.index[-1]
    peak = means.iloc[1:-1].idxmax()
    checks = [_rises(r, GAMMA, peak, end, METRIC, f"acc at γ={peak:g} − at γ={end:g}") for end in (hi, lo)]
    cells = ", ".join(f"γ={g:g}: {100 * v:.2f}" for g, v in means.items())
    tests, ev = _all(checks)
    return tests, f"mean final acc: {cells}; {ev}"


# Figs. 2, A4 draw the plan on the object at γ < 1: of the rise the mass constraint allows (from the
# object share ρ, where γ = 1 pins it, up to the ceiling min(1, ρ/γ)), the plan takes more than half
# (ours: the figures give no number).
OBJECT_SHARE = 0.5


def _mass_rises(r):
    """Figs. 2, A4, against the ceiling: at every γ < 1, per seed, the share of the attainable rise
    that the plan takes, (mass − ρ) / (min(1, ρ/γ) − ρ), exceeds :data:`OBJECT_SHARE`. Not the rise
    from γ = 1: there the mass equals ρ exactly (every patch carries 1/M), and on the planted task any
    prompt trained by cross-entropy tracks the ceiling, so a rise alone could not fail."""
    if not {"seed", "gamma", "object_mass", "object_fraction", "mass_ceiling"} <= set(r.columns):
        raise MissingResults("no planted-patch table (fedrepro.analysis planted measurement)")
    return _share_of_rise(r, "object_mass", "object_fraction", "object-patch")


def _garment_mass_rises(r):
    """Figs. 2, A4 on real stand-in images, by the rule of :func:`_mass_rises`: the true class's plan
    under the trained prompts, garment (inked) patches standing in for the object, the mass, ρ and
    the ceiling averaged over a run's clients first."""
    cols = ["foreground_mass", "foreground_fraction", "mass_ceiling"]
    if not {"seed", "gamma", *cols} <= set(r.columns):
        raise MissingResults("no foreground-mass table (fedrepro.papers.fedotp.internals.foreground_table)")
    per_run = r.groupby(["seed", "gamma"], as_index=False)[cols].mean()
    return _share_of_rise(per_run, "foreground_mass", "foreground_fraction", "garment-patch")


def _share_of_rise(r, mass: str, share: str, what: str):
    below_one = r[r["gamma"] < 1.0]
    if below_one.empty:
        raise MissingResults("no γ < 1")
    tests = []
    for gamma, g in below_one.groupby("gamma", sort=False):
        g = g.sort_values("seed")
        rise = (g[mass] - g[share]) / (g["mass_ceiling"] - g[share])
        tests.append(exceeds(f"share of the attainable rise at γ={gamma:g}", rise, g["seed"], OBJECT_SHARE,
                             unit="%"))
    path = r.sort_values("gamma", ascending=False).groupby("seed", sort=True)
    per_seed = "; ".join(f"seed {s}: " + " → ".join(f"{m:.3f} (ceiling {c:.3f})" for m, c in
                                                    zip(g[mass], g["mass_ceiling"])) for s, g in path)
    return tests, (f"{what} share of the plan mass as γ falls ({per_seed}); "
                   + "; ".join(t.text() for t in tests))


# The study's pairs with CoOp at our equal budget (fedrepro.papers.fedotp.tables.STUDY_PAIRS): all but CoOp's
# budget, the factor that decides the sign by construction (CoOp's official one short session against
# FedOTP's rounds × E epochs; the paper's own order is claimed on it, coop_beats_fedotp_pathological).
CLAIM_PAIRS = tuple((c, f) for factor, _, c, f in STUDY_PAIRS if factor != BUDGET)


def _coop_ahead_every_factor(r):
    """Per pair of :data:`CLAIM_PAIRS` that the results hold (both arms run): CoOp − FedOTP > 0,
    paired by seed; every one must hold."""
    present = set(_col(r, ROW)[ROW])
    pairs = [(c, f) for c, f in CLAIM_PAIRS if c in present and f in present]
    return _all([_beats(r, c, f, 0.0, c, f) for c, f in pairs])


def _cluster(r):
    """Fig. A5: per seed, the mean cosine similarity of local prompts within a data group minus across
    groups exceeds 0."""
    if not {"seed", "cluster_gap"} <= set(r.columns):
        raise MissingResults("no local-prompt cluster table (fedrepro.analysis)")
    gaps = r.groupby("seed")["cluster_gap"].mean()
    test = exceeds("within − across cosine", gaps, gaps.index, scale=1.0, unit="",
                   reads=("cosine within a data group {} above across groups", "cosine within a data group {} below "
                          "across groups"))
    return test, ("local prompts, " + ", ".join(f"seed {s}: {v:+.3f}" for s, v in gaps.items())
                  + f"; {test.text()}")


def _claim(id_, source, statement, check, likely_cause="", arms=(), max_seeds=DEFAULT_MAX_SEEDS):
    register_claim(Claim(id=f"fedotp.{id_}", paper="fedotp", source=source, statement=statement, check=check,
                         likely_cause=likely_cause, arms=arms, max_seeds=MEASURED_MAX_SEEDS.get(id_, max_seeds)))


# Claims added since the last laptop pass have no measured spread yet: two looks (3, then 5 seeds) until a
# pass measures it (bench/seed_needs.py reads the last pass's pages).
NEW_MAX_SEEDS = 5
# Where a pass measured the spread: the most seeds at which the claim's mean and spread would decide,
# one stage more for margin (bench/seed_needs.py on the pages of the laptop pass of 2026-11-27, kept in
# bench/seed_needs_pass42.json). The INCONCLUSIVE claims that would not decide by 12 seeds keep theirs.
# beats_promptfl_feature_label_shift: from the pages of 2026-11-29 (bench/seed_needs_pass51.json), its
# mean 1.14 SDs past the bound at 3 seeds.
# coop_equal_budget_beats_fedotp_pathological: measured as coop_beats_fedotp_pathological, which read the
# equal-budget CoOp then. beats_pfedprompt_pathological's 12 was measured on the unscaled cache, which it no
# longer reads (a new claim's two looks until a pass measures it).
MEASURED_MAX_SEEDS = {"beats_promptfl_fedprox_pathological": 12,
                      "beats_promptfl_ft_pathological": 12, "coop_equal_budget_beats_fedotp_pathological": 8,
                      "beats_promptfl_low_alpha": 8, "beats_promptfl_fedprox_feature_label_shift": 12,
                      "beats_promptfl_feature_label_shift": 12}


def _rows(a: str, b: str, where: dict | None = None, **kw) -> arms.Rows:
    return arms.Rows({ROW: a, **(where or {})}, {ROW: b, **(where or {})}, **kw)


# What notebooks 06 and 08 measure on the CLIP stand-in, which bears on the two claims about the
# transport's mass (docs/results/fedotp.md, "What the stand-in changes, and why").
_MASS_NOT_ON_OBJECTS = (
    "on real stand-in images the true class's plan puts about as much mass on the garment at γ = 1 as at "
    "γ = 0.5 (notebook 06), so dropping mass (γ < 1) drops evidence rather than background clutter; and "
    "a different few-shot draw moves FedOTP by up to 20 points (notebook 08), far more than the paper's "
    "gaps of about 1 point")


_claim("beats_promptfl_pathological", "Table 1",
       f"FedOTP ≫ PromptFL under pathological label shift on every dataset (> {100 * T1_MARGIN['promptfl']:.2f} pts, "
       "a quarter of Table 1's smallest gap, +9.12 on Caltech101; +19.49 on average)",
       _beats_promptfl_pathological, arms=(_rows("fedotp", "promptfl"),))
_SOURCE = {"pfedprompt": " (our reading of pFedPrompt)", COOP_EQUAL: " (ours: CoOp at FedOTP's budget)"}
for _b in (*T1_BASELINES, COOP_EQUAL):
    _id = COOP_EQUAL_ID if _b == COOP_EQUAL else _b
    _m = T1_MARGIN["coop" if _b == COOP_EQUAL else _b]
    _claim(f"beats_{_id}_pathological", "Table 1" + _SOURCE.get(_b, ""),
           f"FedOTP > {LABEL[_b]} under pathological label shift on every dataset (> {100 * _m:.2f} pts, "
           "a quarter of Table 1's smallest gap)",
           lambda r, b=_b, m=_m: _on_every_dataset(r, "fedotp", b, m), arms=(_rows("fedotp", _b),),
           max_seeds=NEW_MAX_SEEDS)
for _row, _id in COOP_BUDGETS:
    _claim(f"{_id}_beats_fedotp_pathological", "Table 1 (ours)",
           f"{LABEL[_row]} beats FedOTP under pathological label shift on every dataset, on the CLIP stand-in (ours: "
           "the reverse of the paper's order)",
           lambda r, c=_row: _on_every_dataset(r, c, "fedotp", 0.0), arms=(_rows(_row, "fedotp"),),
           max_seeds=NEW_MAX_SEEDS)
_claim("coop_ahead_at_every_factor", "Table 1 (ours)",
       "Local CoOp at the equal budget (ours: trained every round, FedOTP's rounds × E epochs) beats FedOTP on the "
       "CLIP stand-in (noisy pathological split, 4 shots) in each pair of notebook 05's study that keeps that "
       f"budget: both at the paper's rate {PAPER_LR:g} on the attention-pool stand-in (standin_patch) at batch 32; "
       f"each at its own rate from validation; on the first stand-in ({OLD_STANDIN}); and at batch = shots (ours)",
       _coop_ahead_every_factor, arms=tuple(_rows(c, f) for c, f in CLAIM_PAIRS), max_seeds=NEW_MAX_SEEDS)
_claim("beats_promptfl_low_alpha", "Tables 3, A5",
       f"FedOTP ≫ PromptFL at the strongest Dirichlet skew, α = 0.1 (> {100 * MUCH_DIRICHLET:.0f} pts)",
       _beats_promptfl_low_alpha, arms=(_rows("fedotp", "promptfl", {ALPHA: 0.1}),))
for _b in (*DOMAIN_BASELINES, COOP_EQUAL):
    _id, _k = (COOP_EQUAL_ID, "coop") if _b == COOP_EQUAL else (_b, _b)
    _claim(f"beats_{_id}_dirichlet", "Tables 3, A5" + _SOURCE.get(_b, ""),
           f"FedOTP > {LABEL[_b]} under Dirichlet label shift at every α (> {100 * DIRICHLET_MARGIN[_k]:.2f} pts, a "
           "quarter of Table A5's smallest gap)",
           lambda r, b=_b, k=_k: _at_every_alpha(r, "fedotp", b, DIRICHLET_MARGIN[k]), arms=(_rows("fedotp", _b),),
           max_seeds=NEW_MAX_SEEDS)
_claim("beats_promptfl_feature_label_shift", "Tables 2, A3",
       f"FedOTP ≫ PromptFL under feature + label shift (> {100 * MUCH_FEATURE_LABEL:.0f} pts)",
       _beats_promptfl_feature_label, arms=(_rows("fedotp", "promptfl"),))
for _b in (*DOMAIN_BASELINES, COOP_EQUAL):
    _id, _k = (COOP_EQUAL_ID, "coop") if _b == COOP_EQUAL else (_b, _b)
    _claim(f"beats_{_id}_feature_label_shift", "Tables 2, A3" + _SOURCE.get(_b, ""),
           f"FedOTP > {LABEL[_b]} under feature + label shift (> {100 * DOMAIN_MARGIN[_k]:.2f} pts, a quarter of the "
           "smaller of Tables 2 and A3's average gaps)",
           lambda r, b=_b, k=_k: _beats(r, "fedotp", b, DOMAIN_MARGIN[k], "FedOTP", LABEL[b]),
           arms=(_rows("fedotp", _b),), max_seeds=NEW_MAX_SEEDS)
_claim("lead_grows_as_alpha_shrinks", "Table A5",
       "FedOTP leads PromptFL at every α, and its lead grows as α shrinks", _lead_grows,
       arms=(_rows("fedotp", "promptfl", {ALPHA: 0.1}),
             # the lead below zero at the largest α: the lead still "grows" towards α = 0.1
             _rows("fedotp", "promptfl", {ALPHA: 5.0}, shift={METRIC: -0.2})))
# 3 seeds (the default): global+local − local-only sits 0.24 SDs from its bound, so one look would need 47 seeds
# and looks up to 12 would not decide it (bench/seed_needs.py).
_claim("global_local_vs_one_prompt", "§4.1; ablation (ours)",
       f"global+local ≥ local-only (within {100 * NOT_WORSE:.0f} pt) "
       f"≫ global-only (> {100 * MUCH_GLOBAL_ONLY:.0f} pts)",
       _prompt_sets, arms=(_rows("fedotp", "fedotp_local_only (ours)", shift={METRIC: -0.05}),
                           _rows("fedotp_local_only (ours)", "fedotp_global_only (ours)")))
_claim("uot_ot_average_order", "Table 4",
       f"UOT ≥ classical OT ≥ similarity averaging, each 'not worse' within {100 * NOT_WORSE:.0f} pt, at 2 and 8 shots",
       _ot_order, _MASS_NOT_ON_OBJECTS, arms=(_rows("fedotp", "fedotp_ot", shift={METRIC: -0.05}),
                                              _rows("fedotp_ot", "fedotp_average", shift={METRIC: -0.05})))
# 3 seeds (the default): one of its gaps sits 0.21 SDs from its bound, so one look would need 12 seeds and looks
# up to 12 would not decide it (bench/seed_needs.py).
_claim("gamma_inverted_u", "Table A4", "Accuracy over γ is an inverted U: the best γ is neither 1 nor the smallest",
       _inverted_u, _MASS_NOT_ON_OBJECTS, arms=(arms.Rows({GAMMA: (0.9, 0.8, 0.7, 0.6)}, {GAMMA: 1.0}),))
_claim("plan_mass_on_objects", "Figs. 2, A4",
       f"At γ < 1 the plan's mass moves onto the object patches: more than {OBJECT_SHARE:.0%} of the rise from the "
       "object share ρ to the ceiling min(1, ρ/γ) (planted-patch task, object masks known)", _mass_rises,
       arms=(arms.Replaced("object_mass", lambda r: r["object_fraction"], "the plan's mass on objects stays at ρ"),))
_claim("plan_mass_on_garments", "Figs. 2, A4 (real images)",
       f"At γ < 1 the trained prompts' plan moves mass onto the garment: more than {OBJECT_SHARE:.0%} of the rise "
       "from the garment share ρ to the ceiling min(1, ρ/γ) (Fashion-MNIST, noisy style; inked patches stand in "
       "for the object)", _garment_mass_rises,
       "the stand-in's patch tokens were never trained to align with text, only its pooled embedding was "
       "(docs/backbones.md), so a background patch can match a class prompt as well as a garment patch",
       arms=(arms.Replaced("foreground_mass", lambda r: r["foreground_fraction"],
                           "the plan's mass on the garment stays at ρ"),), max_seeds=NEW_MAX_SEEDS)
# Ours: Table A2's setting with every image drawn over clutter (fedrepro.papers.fedotp.setup,
# feature_shift:cluttered), where FedOTP (CVPR 2024) §4's reason for moving only γ of the mass, leaving the
# patches unrelated to the class out, has the most to act on.
for _row, _id in COOP_BUDGETS:
    _claim(f"beats_{_id}_cluttered", "Table A2, §4 (ours: clutter)",
           f"FedOTP > {LABEL[_row]} under feature shift over clutter (> {100 * CLUTTER_MARGIN:.2f} pts, a quarter of "
           "Table A2's smaller average gap), on the CLIP stand-in with about 70% of each image's patches clutter "
           "(ours)",
           lambda r, c=_row: _beats(r, "fedotp", c, CLUTTER_MARGIN, "FedOTP", LABEL[c]),
           "on the stand-in FedOTP's gap to local CoOp moves with the rate, CoOp's budget, the backbone's patch "
           "tokens and the batch (notebook 05 measures each), and its plan puts no more mass on the garment at "
           "γ < 1 than at γ = 1 on uncluttered images (notebook 06)",
           arms=(_rows("fedotp", _row),), max_seeds=NEW_MAX_SEEDS)
_claim("plan_mass_on_garments_cluttered", "Figs. 2, A4 (ours: clutter)",
       f"Over clutter, at γ < 1 the trained prompts' plan moves mass onto the garment: more than {OBJECT_SHARE:.0%} "
       "of the rise from the garment share ρ to the ceiling min(1, ρ/γ) (the feature_shift_cluttered runs' FedOTP; "
       "each image's garment mask, clutter inked as well)", _garment_mass_rises,
       "the stand-in's patch tokens were never trained to align with text, only its pooled embedding was "
       "(docs/backbones.md), so a fragment of another garment can match a class prompt as well as the garment",
       arms=(arms.Replaced("foreground_mass", lambda r: r["foreground_fraction"],
                           "the plan's mass on the garment stays at ρ"),), max_seeds=NEW_MAX_SEEDS)
_claim("local_prompts_cluster", "Fig. A5",
       "Local prompts of clients with the same data group are more alike than across groups", _cluster,
       arms=(arms.Replaced("cluster_gap", lambda r: 0.0, "prompts as alike across groups as within"),))
