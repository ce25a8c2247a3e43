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

from ...claims.core import Claim, MissingResults, Test, compare, exceeds, gap_larger_in, paired, register_claim

ROW, METRIC = "row", "final"
ALPHA, SHOTS, GAMMA = "data.partition_args.alpha", "data.partition_args.shots", "method.args.gamma"
# "≫" under pathological label shift: Table 1's FedOTP − PromptFL is +19.5 points on average and
# at least +4.8 per dataset; we require +10 on every dataset.
MUCH_PATHOLOGICAL = 0.10
# "≫" at the strongest Dirichlet skew: Table A5's gap at α = 0.1 is +8.1 points; we require +5.
MUCH_DIRICHLET = 0.05
# "single-prompt FL collapses under feature + label shift": Tables 2 and A3 put FedOTP 37.8 and 20.5
# points above PromptFL; we require +10.
MUCH_FEATURE_LABEL = 0.10
# "≫ global-only": the shared prompt alone cannot learn a client's label set; at least +5 points.
MUCH_GLOBAL_ONLY = 0.05
# "≥" / "not worse": the gap may fall short by at most one point.
NOT_WORSE = 0.01


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


def _beats_promptfl_pathological(r):
    return _all([_beats(g, "fedotp", "promptfl", MUCH_PATHOLOGICAL, "FedOTP", "PromptFL", str(d))
                 for d, g in _col(r, "dataset").groupby("dataset", sort=False)])


def _alpha(r: pd.DataFrame, alpha: float) -> pd.DataFrame:
    out = _col(r, ALPHA)[np.isclose(r[ALPHA].astype(float), alpha)]
    if out.empty:
        raise MissingResults(f"no runs at α={alpha:g}")
    return out


def _beats_promptfl_low_alpha(r):
    return _beats(_alpha(r, 0.1), "fedotp", "promptfl", MUCH_DIRICHLET, "FedOTP", "PromptFL", "α=0.1")


def _beats_promptfl_feature_label(r):
    return _beats(r, "fedotp", "promptfl", MUCH_FEATURE_LABEL, "FedOTP", "PromptFL")


def _lead_grows(r):
    """Table A5: the lead at the smallest α run minus the lead at the largest, per seed, exceeds 0."""
    lo, hi = float(_col(r, ALPHA)[ALPHA].min()), float(r[ALPHA].max())
    return gap_larger_in(_alpha(r, lo), _alpha(r, hi), {ROW: "fedotp"}, {ROW: "promptfl"}, METRIC,
                         (f"α={lo:g}", f"α={hi:g}"), "FedOTP − PromptFL")


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


def _mass_rises(r):
    """Figs. 2, A4: the object patches' share of the plan mass rises at every step down in γ, per seed
    (differences of a share in percentage points)."""
    if not {"seed", "gamma", "object_mass"} <= set(r.columns):
        raise MissingResults("no planted-patch table (fedrepro.analysis planted measurement)")
    gammas = sorted(set(r["gamma"]), reverse=True)
    if len(gammas) < 2:
        raise MissingResults("fewer than two γ values")
    checks = [_rises(r, "gamma", after, before, "object_mass", f"object mass at γ={after:g} − at γ={before:g}")
              for before, after in zip(gammas, gammas[1:])]
    path = r.sort_values("gamma", ascending=False).groupby("seed", sort=True)["object_mass"]
    per_seed = "; ".join(f"seed {s}: " + " → ".join(f"{v:.3f}" for v in m) for s, m in path)
    tests, ev = _all(checks)
    return tests, f"object-patch share of the plan mass as γ falls ({per_seed}); {ev}"


def _cluster(r):
    """Fig. A5: per seed, the mean cosine similarity of local prompts within a data group minus across
    groups exceeds 0."""
    if not {"seed", "cluster_gap"} <= set(r.columns):
        raise MissingResults("no local-prompt cluster table (fedrepro.analysis)")
    gaps = r.groupby("seed")["cluster_gap"].mean()
    test = exceeds("within − across cosine", gaps, gaps.index, scale=1.0, unit="")
    return test, ("local prompts, " + ", ".join(f"seed {s}: {v:+.3f}" for s, v in gaps.items())
                  + f"; {test.text()}")


def _claim(id_, source, statement, check, likely_cause=""):
    register_claim(Claim(id=f"fedotp.{id_}", paper="fedotp", source=source, statement=statement, check=check,
                         likely_cause=likely_cause))


# What notebooks 06 and 08 measure on the CLIP stand-in, which bears on the two claims about the
# transport's mass (docs/results/fedotp.md, "What the stand-in changes, and why").
_MASS_NOT_ON_OBJECTS = (
    "on real stand-in images the true class's plan puts about as much mass on the garment at γ = 1 as at "
    "γ = 0.5 (notebook 06), so dropping mass (γ < 1) drops evidence rather than background clutter; and "
    "a different few-shot draw moves FedOTP by up to 20 points (notebook 08), far more than the paper's "
    "gaps of about 1 point")


_claim("beats_promptfl_pathological", "Table 1",
       f"FedOTP ≫ PromptFL under pathological label shift (> {100 * MUCH_PATHOLOGICAL:.0f} pts on every dataset)",
       _beats_promptfl_pathological)
_claim("beats_promptfl_low_alpha", "Tables 3, A5",
       f"FedOTP ≫ PromptFL at the strongest Dirichlet skew, α = 0.1 (> {100 * MUCH_DIRICHLET:.0f} pts)",
       _beats_promptfl_low_alpha)
_claim("beats_promptfl_feature_label_shift", "Tables 2, A3",
       f"FedOTP ≫ PromptFL under feature + label shift (> {100 * MUCH_FEATURE_LABEL:.0f} pts)",
       _beats_promptfl_feature_label)
_claim("lead_grows_as_alpha_shrinks", "Table A5", "FedOTP's lead over PromptFL grows as α shrinks", _lead_grows)
_claim("global_local_vs_one_prompt", "§4.1; ablation (ours)",
       f"global+local ≥ local-only (within {100 * NOT_WORSE:.0f} pt) ≫ global-only (> {100 * MUCH_GLOBAL_ONLY:.0f} pts)",
       _prompt_sets)
_claim("uot_ot_average_order", "Table 4",
       f"UOT ≥ classical OT ≥ similarity averaging, each 'not worse' within {100 * NOT_WORSE:.0f} pt, at 2 and 8 shots",
       _ot_order, _MASS_NOT_ON_OBJECTS)
_claim("gamma_inverted_u", "Table A4", "Accuracy over γ is an inverted U: the best γ is neither 1 nor the smallest",
       _inverted_u, _MASS_NOT_ON_OBJECTS)
_claim("plan_mass_on_objects", "Figs. 2, A4",
       "The plan's mass on object patches rises as γ falls (planted-patch task, object masks known)", _mass_rises)
_claim("local_prompts_cluster", "Fig. A5",
       "Local prompts of clients with the same data group are more alike than across groups", _cluster)
