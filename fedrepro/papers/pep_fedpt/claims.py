"""PEP-FedPT's claims, checked on our results.

Each claim is a sign or an ordering read off the paper's tables and figures, the kind of finding
that should survive a small-scale run. Result tables are those of :mod:`.tables` (a ``row`` column
naming the setting, ``seed``, ``final``, ``final_worst``, ``final_heldout``); the label-skew claims
read both splits at once, with a ``split`` column (:func:`label_results`). Soft-weight claims read
the table of :func:`soft_weight_table`.

Each check turns its claim into effects measured once per seed (mostly a difference paired by
seed) with the claim's bound, so that the verdict (PASS, INCONCLUSIVE or FAIL) rests on their
interval over the seeds. Bounds are fixed before looking at results and never tuned to pass.
"""
from __future__ import annotations

import pandas as pd

from ...claims import arms
from ...claims.core import (DEFAULT_MAX_SEEDS, Claim, MissingResults, below, compare, exceeds, gap_larger_in, paired,
                            register_claim, select)
from ..reference import quarter_of_smallest_gap
from ...methods.pep_fedpt import PAPER_DEPTH
from .setup import PAPER_LR
from .tables import CCMP_BLOCKS, MANY_PROMPTS, STAND_IN_DEPTH
from .variants import BASELINES, CONTROL, PPT_PAPER_RATE, PPT_TUNED, PRIOR_MIX, position_arms

ROW, SPLIT = "row", "split"
METRIC = "final"
# "≫" (Table 1: +11.8 points over FedVPT on CIFAR-100 pathological, +17.3 on Tiny-ImageNet): at
# least 5 points.
MUCH = 0.05
# "erases most of the gain" (Tables 5, 8): the priors' part of the gain over FedVPT exceeds half of it.
MOST = 0.5
# "costs little" (Table 7: −2.2 points at most): a drop of at most 3 points.
DP_TOL = 0.03
# "keeps most of the accuracy" (Tables 3, 13: −2.0 and −1.9 points on CIFAR-100 and Tiny-ImageNet,
# −1.6 DomainNet): PEP-FedPT's held-out drop exceeds FedVPT's on the same clients by less than 5
# points. FedVPT is one global model, so its own drop measures how much harder the held-out clients
# are than the participating ones at this scale; what is left is PEP-FedPT's own loss.
HELDOUT_TOL = 0.05
# "the soft weights peak on the true class" (Fig. 8): the class-averaged s has its argmax at the
# true class for at least 80% of the classes.
PEAK_SHARE = 0.8
# "PEP-FedPT outperforms all the baselines" (Table 1) and "consistently achieves the best results" on
# the held-out clients (Table 3): against each baseline, a quarter of the smallest gap the paper's
# table reports for it, over the columns the claim reads (CIFAR-100 and Tiny-ImageNet).
T1_OTHERS = tuple(b for b in BASELINES if b != "fedvpt")  # FedVPT's claim is ≫ (MUCH)
T1_MARGIN = {b: quarter_of_smallest_gap("pep_fedpt", "T1", "pep_fedpt", b, ["C100 Path Mean", "Tiny Path Mean"])
             for b in T1_OTHERS}
HELDOUT_ROWS = ("fedvpt", "p_pt")  # the held-out table's rows over the claim seeds
T3_MARGIN = {b: quarter_of_smallest_gap("pep_fedpt", "T3", "pep_fedpt", b, ["C100 Testing", "Tiny Testing"])
             for b in HELDOUT_ROWS}
NAME = {"head_tuning": "Head tuning", "fedvpt": "FedVPT", "fedvpt_d": "FedVPT-D", "fedpr": "FedPR", "sgpt": "SGPT",
        "pfedpg": "pFedPG", "p_pt": "P-PT", CONTROL: "FedVPT + log-prior (ours)",
        PRIOR_MIX: "PEP-FedPT, prior-only mix (ours)", PPT_PAPER_RATE: "P-PT (paper's rate)",
        PPT_TUNED: "P-PT (ours, tuned)"}
# The row a claim against a paper's baseline reads: P-PT at the paper's one rate, as the paper ran it
# (variants.PPT_PAPER_RATE); its tuned row is read by the claims marked "(ours)".
READS = {"p_pt": PPT_PAPER_RATE}
PAPER_RATE_TEXT = f"P-PT at the paper's one rate ({PAPER_LR:g} for prompts and head, App. A.3.2)"


def _split(r: pd.DataFrame, name: str) -> pd.DataFrame:
    if SPLIT not in r:
        raise MissingResults(f"column {SPLIT!r} absent (use label_results)")
    out = r[r[SPLIT] == name]
    if out.empty:
        raise MissingResults(f"no {name} runs")
    return out


def _beats(r: pd.DataFrame, a: str, b: str, margin: float, la: str, lb: str):
    return compare(r, {ROW: a}, {ROW: b}, metric=METRIC, margin=margin, label_a=la, label_b=lb)


def _ccmp_beats_fedvpt(r):
    return _beats(_split(r, "pathological"), "pep_fedpt", "fedvpt", MUCH, "PEP-FedPT", "FedVPT")


def _priors_carry_gain(r):
    """The gain over FedVPT is positive, and the part the priors carry (PEP-FedPT − no-CP) exceeds
    half of it. Per seed as ``prior − MOST · full`` rather than a ratio, which blows up at a seed whose
    gain is near zero."""
    p = _split(r, "pathological")
    pep, vpt, no_cp = (select(p, {ROW: row}, METRIC) for row in ("pep_fedpt", "fedvpt", "pep_fedpt_no_cp"))
    seeds = sorted(set(pep.index) & set(vpt.index) & set(no_cp.index))
    if not seeds:
        raise MissingResults("no seed run for PEP-FedPT, FedVPT and no-CP")
    full = (pep - vpt).loc[seeds].to_numpy()
    prior = (pep - no_cp).loc[seeds].to_numpy()
    gain = exceeds("PEP-FedPT − FedVPT", full, seeds)
    most = exceeds(f"(PEP-FedPT − no-CP) − {MOST:g} × (PEP-FedPT − FedVPT)", prior - MOST * full, seeds)
    share = prior.mean() / full.mean() if full.mean() > 0 else float("nan")
    return [gain, most], f"{gain.text()}; {most.text()}; on the means the priors carry {share:.0%} of the gain"


def _gain_shrinks(r):
    return gap_larger_in(_split(r, "pathological"), _split(r, "dirichlet"), {ROW: "pep_fedpt"}, {ROW: "fedvpt"},
                         METRIC, ("pathological", "Dir(0.3)"), "gain over FedVPT")


def _drop(r: pd.DataFrame, row: str) -> pd.Series:
    """Participating − held-out accuracy of ``row``, by seed."""
    _, part, held = paired(r, {ROW: row}, {ROW: row}, "final", "final_heldout")
    drop = part - held
    if drop.isna().any():
        raise MissingResults("no held-out scores (run the heldout setup)")
    return drop


def _heldout(r):
    """PEP-FedPT's held-out drop against FedVPT's. The paper's text says personalised methods such as
    pFedPG fail held-out (PEP-FedPT (arXiv) §4, Table 3); it does not say P-PT drops more than
    PEP-FedPT, and its own Tables 3 and 13 would fail that (Tiny-ImageNet: P-PT −0.35, PEP-FedPT −1.93
    pts), so P-PT's drop (the paper's-rate row, :data:`READS`) is shown beside it, untested."""
    pep, vpt = _drop(r, "pep_fedpt"), _drop(r, "fedvpt")
    seeds = sorted(set(pep.index) & set(vpt.index))
    if not seeds:
        raise MissingResults("no seed run for both PEP-FedPT and FedVPT")
    pep, vpt = (d.loc[seeds].to_numpy() for d in (pep, vpt))
    small = below("PEP-FedPT's drop − FedVPT's drop", pep - vpt, seeds, HELDOUT_TOL)
    context = f"; drops (participating − held-out): PEP-FedPT {100 * pep.mean():+.2f}, FedVPT {100 * vpt.mean():+.2f}"
    ppt = r[(r[ROW] == READS["p_pt"]) & r["seed"].isin(seeds)]
    if not ppt.empty:  # read without recording its runs: no test compares them
        context += f", {NAME[READS['p_pt']]} {100 * (ppt['final'] - ppt['final_heldout']).mean():+.2f}"
    tuned = r[(r[ROW] == PPT_TUNED) & r["seed"].isin(seeds)]
    if not tuned.empty:
        context += f", {NAME[PPT_TUNED]} {100 * (tuned['final'] - tuned['final_heldout']).mean():+.2f}"
    return [small], f"{small.text()}{context} pts (P-PT's and the tuned P-PT's drops not tested)"


def _similarity_helps(r):
    """PEP-FedPT against the same model whose CCMP mix is the client's prior alone, under Dir(0.3):
    there a client holds several classes, so the prior no longer names the image's class and only
    the cls-prototype similarity can tell them apart (PEP-FedPT (arXiv) §4.2)."""
    return _beats(_split(r, "dirichlet"), "pep_fedpt", PRIOR_MIX, 0.0, "PEP-FedPT", NAME[PRIOR_MIX])


def _many_prompts(r):
    return _beats(r, "pep_fedpt", MANY_PROMPTS, MUCH, "PEP-FedPT", "FedVPT with |C| prompts")


def _arm_blocks(r: pd.DataFrame, name: str) -> list[int]:
    """The CCMP blocks (0-indexed) of a Table 12 row, read off its runs (:data:`CCMP_BLOCKS`)."""
    found = r.loc[r[ROW] == name, CCMP_BLOCKS].dropna().unique()
    if len(found) != 1:
        raise MissingResults(f"{name}: CCMP blocks {list(found)} over its runs; the claim reads one placement")
    return [int(b) for b in str(found[0]).split(",")]


def _middle_beats_first(r):
    """Table 12's middle arm beats its first. Where the results name each run's CCMP blocks (the position
    table's), the arms must not share one, else the placements cannot be told apart and the claim is not
    checked (the message names the blocks); the labels name them."""
    la, lb = "CCMP middle", "CCMP first"
    if CCMP_BLOCKS in r:
        middle, first = _arm_blocks(r, "ccmp middle"), _arm_blocks(r, "ccmp first")
        shared = sorted(set(middle) & set(first))
        if shared:
            raise MissingResults(f"untestable with these arms: first (blocks {first}) and middle (blocks {middle}) "
                                 f"share block(s) {shared}, so Table 12's placements cannot be told apart")
        la, lb = (f"CCMP {name} (block {', '.join(map(str, blocks))})" for name, blocks in (("middle", middle),
                                                                                            ("first", first)))
    return _beats(r, "ccmp middle", "ccmp first", 0.0, la, lb)


def _dp_costs_little(r):
    seeds, pep, dp = paired(r, {ROW: "pep_fedpt"}, {ROW: "pep_fedpt_dp"}, METRIC)
    test = below("PEP-FedPT − with DP noise (ε = 0.2)", pep - dp, seeds, DP_TOL,
                 reads=("DP noise (ε = 0.2) costs PEP-FedPT {}", "DP noise (ε = 0.2) raises PEP-FedPT by {}"))
    return test, test.text()


def _peaks(r):
    """Per seed, the share of classes whose class-averaged s peaks on the true class at the last
    CCMP block (Fig. 8 shows the last block's diagonal), s without the client's class prior (the
    similarity term of CCMP): a client's test images come from its own classes, which the prior
    alone ranks first, so with the prior the share is 100% whatever the prompts learned."""
    need = {"seed", "block", "true_class", "peak_class_similarity"}
    if not need <= set(r.columns):
        raise MissingResults("no soft-weight table with the similarity term's peak (soft_weight_table)")
    last = r[r["block"] == r["block"].max()]
    share = last.assign(hit=last["true_class"] == last["peak_class_similarity"]).groupby("seed")["hit"].mean()
    if len(share) == 0:
        raise MissingResults("no soft-weight rows")
    test = exceeds("share of classes peaking on the true class", share, share.index, PEAK_SHARE, unit="%",
                   limits=(0.0, 1.0))  # a share: its interval stays in [0, 100]%
    return test, f"last CCMP block, {test.text()}"


def _heldout_beats(b: str, reads: str | None = None):
    """PEP-FedPT against the paper's baseline ``b`` on the held-out clients, read on row ``reads``
    (default :data:`READS`' row of ``b``) at the margin of ``b``'s Table 3 gaps."""
    reads = reads or READS.get(b, b)
    return lambda r: compare(r, {ROW: "pep_fedpt"}, {ROW: reads}, metric="final_heldout", margin=T3_MARGIN[b],
                             label_a="PEP-FedPT held-out", label_b=f"{NAME[reads]} held-out")


def _claim(id_, source, statement, check, arms=(), max_seeds=DEFAULT_MAX_SEEDS, likely_cause=""):
    register_claim(Claim(id=f"pep_fedpt.{id_}", paper="pep_fedpt", source=source, statement=statement, check=check,
                         arms=arms, max_seeds=max_seeds, likely_cause=likely_cause))


# Claims added since the last laptop pass have no measured spread yet: two looks (3, then 5 seeds) until a
# pass measures it (bench/seed_needs.py reads the last pass's pages).
NEW_MAX_SEEDS = 5


def _rows(a: str, b: str, where: dict | None = None, **kw) -> arms.Rows:
    return arms.Rows({ROW: a, **(where or {})}, {ROW: b, **(where or {})}, **kw)


PATH = {SPLIT: "pathological"}


def _control_gap(r: pd.DataFrame) -> str:
    """The prior-only control's lead over PEP-FedPT on the pathological split, paired by seed, as a
    note for the evidence ("" where the control did not run beside it): the measurement behind
    :data:`T1_CAUSES`. Read here without recording runs: the claim compares its own two rows."""
    if SPLIT not in r:
        return ""
    p = r[r[SPLIT] == "pathological"]
    ctrl, pep = (p[p[ROW] == name].groupby("seed")[METRIC].mean() for name in (CONTROL, "pep_fedpt"))
    seeds = sorted(set(ctrl.index) & set(pep.index))
    if not seeds:
        return ""
    gap = (ctrl - pep).loc[seeds]
    return (f"; beside it, the prior-only control: {NAME[CONTROL]} − PEP-FedPT {100 * gap.mean():+.2f} pts "
            f"(per seed {', '.join(f'{100 * g:+.1f}' for g in gap)}; seeds {seeds}; pep_fedpt.prior_control_beats_"
            "pep_fedpt tests it)")


def _beats_t1(b: str, reads: str | None = None):
    """PEP-FedPT against Table 1's baseline ``b`` on the pathological split, read on row ``reads``
    (default :data:`READS`' row of ``b``) at ``b``'s margin; the evidence adds the prior-only control's
    lead over PEP-FedPT where the claim records a cause on it (:data:`T1_CAUSES`)."""
    reads = reads or READS.get(b, b)

    def check(r):
        p = _split(r, "pathological")
        test, evidence = _beats(p, "pep_fedpt", reads, T1_MARGIN[b], "PEP-FedPT", NAME[reads])
        return test, evidence + (_control_gap(p) if b in T1_CAUSES else "")
    return check


# The likely causes our analysis records where PEP-FedPT trails a personalised baseline on the
# pathological split (issue 55's audit, finding 7), each naming its measurement: the prior-only
# control's lead over PEP-FedPT, which the claim's evidence gives on its own seeds.
_BELOW_CONTROL = ("PEP-FedPT sits below the prior-only control (FedVPT with the client's log-prior added to its "
                  "logits), by the gap the evidence gives beside the verdict (pep_fedpt.prior_control_beats_pep_"
                  "fedpt tests it; 5.76 pts, 93.84 against 88.08, at the laptop pass of commit e1250b2, "
                  "docs/results/laptop/pep_fedpt.md): with 2 "
                  "classes per client the label set alone nearly decides the image's class, and CCMP passes the "
                  "prior to the prediction only through one mixed token at blocks 2-4 of the 6-block stand-in, "
                  "which moves the final cls little")
T1_CAUSES = {
    "pfedpg": ("pFedPG keeps a personal head per client (our reading), a near-binary classifier on 2-class "
               f"clients, while {_BELOW_CONTROL}"),
    "p_pt": ("P-PT at the paper's rate still trains a personal prompt with the shared head, a near-binary "
             f"classifier on 2-class clients, while {_BELOW_CONTROL}"),
}
PPT_TUNED_CAUSE = ("Our P-PT has its rates searched and is a trained, competent baseline, where the paper's, at its "
                   "one rate, sits below FedVPT (Table 1: 75.37 against 83.62; it \"struggles to converge\", Fig. 11). "
                   "A personal prompt with the shared head is a near-binary classifier on 2-class clients, while "
                   f"{_BELOW_CONTROL}")


def _arms_text(depth: int) -> str:
    """Table 12's middle and first arms on a ``depth``-block ViT, 0-indexed (variants.position_arms)."""
    arms = position_arms(depth)
    return f"{arms['ccmp middle']} against {arms['ccmp first']}"


_claim("ccmp_beats_fedvpt_pathological", "Tables 1, 4",
       f"CCMP + class priors ≫ FedVPT (shared prompt only) on the pathological split (> {100 * MUCH:.0f} pts)",
       _ccmp_beats_fedvpt, arms=(_rows("pep_fedpt", "fedvpt", PATH),),
       # At the last laptop pass's mean and spread it decides by 8 of these seeds (bench/seed_needs.py).
       max_seeds=12)
for _b in T1_OTHERS:
    _claim(f"beats_{_b}_pathological", "Table 1",
           f"PEP-FedPT > {PAPER_RATE_TEXT if _b == 'p_pt' else NAME[_b]} on the pathological split "
           f"(> {100 * T1_MARGIN[_b]:.2f} pts, a quarter of Table 1's smallest gap)",
           _beats_t1(_b), arms=(_rows("pep_fedpt", READS.get(_b, _b), PATH),), max_seeds=NEW_MAX_SEEDS,
           likely_cause=T1_CAUSES.get(_b, ""))
_claim("beats_p_pt_tuned_pathological", "Table 1 (ours)",
       f"PEP-FedPT > P-PT with its head and prompt rates searched as every other row's (ours; the paper runs P-PT at "
       f"its one rate) on the pathological split (> {100 * T1_MARGIN['p_pt']:.2f} pts, a quarter of Table 1's "
       "smallest gap)",
       _beats_t1("p_pt", PPT_TUNED), arms=(_rows("pep_fedpt", PPT_TUNED, PATH),), max_seeds=NEW_MAX_SEEDS,
       likely_cause=PPT_TUNED_CAUSE)
_claim("prior_control_beats_pep_fedpt", "Table 1 (ours)",
       "FedVPT scored with the client's log-prior (our prior-only control) beats PEP-FedPT on the pathological split "
       "(ours: the label set alone explains the gain)",
       lambda r: _beats(_split(r, "pathological"), CONTROL, "pep_fedpt", 0.0, NAME[CONTROL], "PEP-FedPT"),
       arms=(_rows(CONTROL, "pep_fedpt", PATH),), max_seeds=NEW_MAX_SEEDS)
_claim("priors_carry_the_gain", "Tables 5, 8",
       f"Removing the class priors erases most (> {MOST:.0%}) of PEP-FedPT's pathological gain over FedVPT",
       _priors_carry_gain, arms=(_rows("pep_fedpt", "fedvpt", PATH), _rows("pep_fedpt_no_cp", "pep_fedpt", PATH)))
_claim("gain_shrinks_under_dirichlet", "Tables 1, 4",
       "PEP-FedPT's gain over FedVPT is smaller under Dir(0.3) than under the pathological split",
       _gain_shrinks, arms=(_rows("pep_fedpt", "fedvpt", PATH),))
# 3 seeds (the default): the held-out drop sits 0.47 SDs from its bound, so one look would need 15 seeds and looks
# up to 12 would not decide it (bench/seed_needs.py).
_claim("similarity_term_helps", "§4.2, Tables 1, 5 (ours)",
       "Under Dir(0.3), PEP-FedPT beats the same model whose CCMP mix is the client's prior alone (same prompts, "
       "prototypes and budget): the cls-prototype similarity adds accuracy beyond the label set",
       _similarity_helps, arms=(_rows("pep_fedpt", PRIOR_MIX, {SPLIT: "dirichlet"}),), max_seeds=NEW_MAX_SEEDS)
_claim("heldout_keeps_accuracy", "Tables 3, 13",
       f"Held-out clients keep most of PEP-FedPT's accuracy (its drop exceeds FedVPT's on the same clients by "
       f"< {100 * HELDOUT_TOL:.0f} pts); P-PT's drop shown beside it, untested (the paper does not say it drops more, "
       f"and its own Tables 3 and 13 would fail that)", _heldout,
       arms=(_rows("pep_fedpt", "fedvpt", shift={"final_heldout": -0.1}),))
for _b in HELDOUT_ROWS:
    _claim(f"heldout_beats_{_b}", "Table 3",
           f"On held-out clients PEP-FedPT > {PAPER_RATE_TEXT if _b == 'p_pt' else NAME[_b]} "
           f"(> {100 * T3_MARGIN[_b]:.2f} pts, a quarter of Table 3's smallest gap)", _heldout_beats(_b),
           arms=(_rows("pep_fedpt", READS.get(_b, _b)),), max_seeds=NEW_MAX_SEEDS)
_claim("heldout_beats_p_pt_tuned", "Table 3 (ours)",
       f"On held-out clients PEP-FedPT > P-PT with its rates searched as every other row's (ours; the paper runs P-PT "
       f"at its one rate) (> {100 * T3_MARGIN['p_pt']:.2f} pts, a quarter of Table 3's smallest gap)",
       _heldout_beats("p_pt", PPT_TUNED), arms=(_rows("pep_fedpt", PPT_TUNED),), max_seeds=NEW_MAX_SEEDS)
_claim("many_prompts_do_not_close_gap", "Table 11",
       f"FedVPT with |C| prompts stays well below PEP-FedPT (> {100 * MUCH:.0f} pts) on the pathological split",
       _many_prompts, arms=(_rows("pep_fedpt", MANY_PROMPTS),),
       # At the last laptop pass's mean and spread it decides by 12 of these seeds (bench/seed_needs.py).
       max_seeds=12)
_claim("middle_beats_first", "Table 12",
       f"CCMP at the middle blocks beats CCMP at the first blocks (the paper's layers 5-7 against 1-3 of ViT-B/16, "
       f"0-indexed blocks {_arms_text(PAPER_DEPTH)}; on the {STAND_IN_DEPTH}-block stand-in, where those arms would "
       f"share a block, one block each, {_arms_text(STAND_IN_DEPTH)}: our reading, variants.position_arms)",
       _middle_beats_first, arms=(_rows("ccmp middle", "ccmp first"),),
       # Its arms on the stand-in changed (issue 55): a new claim's two looks until a pass measures their spread.
       max_seeds=NEW_MAX_SEEDS)
_claim("soft_weights_peak_on_true_class", "Fig. 8",
       f"The test-averaged soft weights of a class, without the class prior (CCMP's similarity term), peak on that "
       f"class (≥ {PEAK_SHARE:.0%} of classes)", _peaks,
       arms=(arms.Replaced("peak_class_similarity", lambda r: (r["true_class"] + 1) % (r["true_class"].max() + 1),
                           "the similarity term peaks on another class"),))
# 3 seeds (the default): its mean sits 0.50 SDs from the bound, so one look would need 13 seeds and looks up to
# 12 would not decide it (bench/seed_needs.py).
_claim("dp_costs_little", "Table 7",
       f"Laplace noise on the prototypes (ε = 0.2) costs little (< {100 * DP_TOL:.0f} pts)", _dp_costs_little,
       arms=(_rows("pep_fedpt_dp", "pep_fedpt", shift={METRIC: -0.1}),))
