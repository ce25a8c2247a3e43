"""Notebook 05's study of why FedOTP trails local CoOp on the stand-in (the ``vs_coop`` table): each
pair differs from the reference pair in the factor it names alone, only the rate factor searches,
study_label names every arm, study_summary pairs the gaps by seed, study_findings names the factor
that moves the gap most from the numbers it is given, and the claim on the study can fail."""
import pandas as pd
import pytest

from fedrepro.papers import paper, setup
from fedrepro.papers.fedotp.claims import CLAIM_PAIRS
from fedrepro.papers.fedotp.tables import (BACKBONE, BATCH_FACTOR, BUDGET, COOP_REF, FACTOR_KEYS, GAP, LONGER_SESSION,
                                           PAPER_LR, RATE, REFERENCE, SMOKE_ARMS, STUDY_ARMS, STUDY_PAIRS,
                                           STUDY_SHOTS, study_by_pair, study_findings, study_label, study_summary)
from fedrepro.papers.fedotp.variants import COOP_SESSION_EPOCHS, LR_GRID
from fedrepro.papers.verdicts import evaluate_claims

SEEDS = (0, 1, 2)
TABLE = paper("fedotp").TABLES["vs_coop"]


def _flat(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):  # an empty mapping adds no key: {} and {"a": 1} differ in "a" alone
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def _diff(a, b) -> set[str]:
    fa, fb = _flat(a.to_dict()), _flat(b.to_dict())
    return {k for k in fa.keys() | fb.keys() if fa.get(k) != fb.get(k)}


def _arms(profile: str) -> dict:
    """Arm name -> its seed-0 config before the search, named by study_label."""
    return {study_label(c): c for c in TABLE.configs(profile, tuned=False) if c.seed == 0}


@pytest.mark.parametrize("profile", ["smoke", "laptop", "paper"])
def test_study_label_names_every_arm_the_profile_runs(profile):
    cfgs = TABLE.configs(profile, tuned=False)
    names = {study_label(c) for c in cfgs}
    want = {"smoke": set(SMOKE_ARMS), "laptop": set(STUDY_ARMS)}.get(profile)
    if want is None:  # paper: no stand-in, no search, so neither the backbone nor the rate factor
        want = set(STUDY_ARMS) - {a for f, _, c, o in STUDY_PAIRS if f in (RATE, BACKBONE) for a in (c, o)}
    assert names == want
    # Each arm runs every seed once: no two arms are one config.
    assert len({c.hash() for c in cfgs}) == len(cfgs)


@pytest.mark.parametrize("profile", ["laptop", "paper"])
def test_each_pair_differs_from_the_reference_in_its_factor_alone(profile):
    arms = _arms(profile)
    ref = {"coop": arms[COOP_REF], "fedotp": arms["fedotp"]}
    assert ref["fedotp"].train.lr == ref["coop"].train.lr == PAPER_LR  # the common rate
    assert _diff(ref["coop"], ref["fedotp"]) == {"method.name"}
    changed = set()
    for factor, _, coop, otp in STUDY_PAIRS:
        if factor == REFERENCE or coop not in arms:
            continue
        for method, arm in (("coop", coop), ("fedotp", otp)):
            diff = _diff(arms[arm], ref[method])
            assert diff <= set(FACTOR_KEYS[factor]), (arm, diff)
            changed |= {factor} if diff else set()
        if factor == BUDGET:  # CoOp's budget: CoOp's arm alone, FedOTP's is the reference's
            assert otp == "fedotp" and arms[coop].method.args["session_epochs"] in (COOP_SESSION_EPOCHS,
                                                                                    LONGER_SESSION)
        else:  # both methods change alike
            assert _diff(arms[coop], arms[otp]) == {"method.name"}
    assert changed == ({RATE, BUDGET, BACKBONE, BATCH_FACTOR} if profile == "laptop" else {BUDGET, BATCH_FACTOR})


def test_factor_settings_are_what_their_labels_say():
    arms = _arms("laptop")
    assert arms["coop, 10 epochs (official)"].method.args["session_epochs"] == COOP_SESSION_EPOCHS
    assert arms[COOP_REF].method.args.get("session_epochs") is None  # trained every round: FedOTP's budget
    assert arms[f"{COOP_REF}, arch standin"].model.args["arch"] == "standin"
    assert arms[COOP_REF].model.args["arch"] == "standin_patch"
    for arm in (f"{COOP_REF}, batch = shots", "fedotp, batch = shots"):
        cfg = arms[arm]
        assert cfg.train.batch_size == cfg.data.partition_args["shots"] == STUDY_SHOTS


@pytest.mark.parametrize("profile", ["smoke", "laptop"])
def test_default_batch_is_one_full_batch_step_an_epoch(profile):
    # Why batch = shots is a factor: the default batch holds a client's whole training set.
    cfg = setup("fedotp", profile, "pathological")
    parts = cfg.data.partition_args
    assert parts["shots"] == STUDY_SHOTS
    assert cfg.train.batch_size >= parts["shots"] * parts["classes_per_client"] > STUDY_SHOTS


def test_only_the_rate_arms_search_and_each_on_its_own_config():
    search = TABLE.search("laptop")
    by_arm = {study_label(c): search.search_configs(c) for c in TABLE.configs("laptop", tuned=False) if c.seed == 0}
    searched = {a for a, runs in by_arm.items() if runs}
    assert searched == {c for f, _, c, o in STUDY_PAIRS if f == RATE} | {o for f, _, c, o in STUDY_PAIRS if f == RATE}
    for arm in searched:
        runs = by_arm[arm]
        assert len(runs) == len(LR_GRID) * len(search.seeds)
        n = STUDY_SHOTS
        assert {c.data.partition_args["shots"] for c in runs} == {2 * n}
        assert {study_label(c.replace(**{"data.partition_args.shots": n, "train.lr": 0.01})) for c in runs} == {arm}
    # The smoke study trains in seconds: at most 3 arms, no search.
    assert len(SMOKE_ARMS) <= 3 and TABLE.search_configs("smoke") == []


def _runs(acc: dict) -> pd.DataFrame:
    """Final accuracy per arm and seed (fractions), as the table's run() returns it."""
    return pd.DataFrame([{"row": a, "seed": s, "final": v[i], "lr": PAPER_LR} for a, v in acc.items()
                         for i, s in enumerate(SEEDS)])


def _study(ref=(-6, -6, -6), own=(-3, -3, -3), budget10=(8, 8, 8), budget25=(-1, -1, -1), standin=(-16, -16, -16),
           batch=(-4, -4, -4)) -> pd.DataFrame:
    """A whole study with CoOp at 0.8 (0.75 at 10 epochs, 0.78 at 25) and FedOTP at CoOp + the gap."""
    acc, coop = {}, {}
    for factor, setting, c, o in STUDY_PAIRS:
        gap = {REFERENCE: ref, RATE: own, BACKBONE: standin, BATCH_FACTOR: batch}.get(factor)
        if factor == BUDGET:
            base = 0.75 if "10" in setting else 0.78
            acc[c] = [base + 0.01 * s for s in SEEDS]
            continue
        acc[c] = [0.8 + 0.01 * s for s in SEEDS]
        acc[o] = [0.8 + 0.01 * s + g / 100 for s, g in zip(SEEDS, gap)]
        coop[factor] = acc[c]
    # CoOp's budget: FedOTP's reference arm minus the gap gives each CoOp session's accuracy.
    for factor, setting, c, o in STUDY_PAIRS:
        if factor == BUDGET:
            gap = budget10 if "10" in setting else budget25
            acc[c] = [f - g / 100 for f, g in zip(acc["fedotp"], gap)]
    return _runs(acc)


def test_study_summary_pairs_each_gap_by_seed_on_the_arm_the_pair_adds():
    runs = _study(ref=(-6, -4, -8))
    s = study_summary(runs)
    assert s.loc["fedotp", GAP] == pytest.approx(-6) and s.loc["fedotp", "vs"] == COOP_REF
    assert s.loc["fedotp", f"{GAP}, min over seeds"] == pytest.approx(-8)
    assert s.loc["fedotp", f"{GAP}, SD"] == pytest.approx(2)
    assert s.loc["fedotp", "FedOTP ahead"] == "0 of 3"
    # CoOp's budget: the gap sits on CoOp's arm, against FedOTP's reference arm.
    assert s.loc["coop, 10 epochs (official)", GAP] == pytest.approx(8)
    assert s.loc["coop, 10 epochs (official)", "vs"] == "fedotp"
    assert s.loc["coop, 10 epochs (official)", "FedOTP ahead"] == "3 of 3"
    assert s.loc["fedotp, arch standin", GAP] == pytest.approx(-16)
    assert pd.isna(s.loc[COOP_REF, GAP]) and s.loc[COOP_REF, "factor"] == REFERENCE
    assert s.loc["fedotp", "mean"] == pytest.approx(100 * runs[runs.row == "fedotp"].final.mean())
    # One row per arm, in the runs' order.
    assert list(s.index) == list(dict.fromkeys(runs["row"]))
    pairs = study_by_pair(runs)
    assert len(pairs) == 2 * len(STUDY_PAIRS) * len(SEEDS) and set(pairs["method"]) == {"coop", "fedotp"}


def test_study_findings_name_the_factor_that_moves_the_gap_most():
    text = study_findings(study_summary(_study()))
    # Reference −6; CoOp's official session +8 (a move of +14, the largest), the first stand-in −16 (−10).
    assert "**CoOp's budget** (CoOp 10 epochs (official)): +14.0 points" in text
    assert "the sign flips" in text and text.count("the sign flips") == 1  # only the 10-epoch pair crosses zero
    assert "FedOTP − CoOp −6.0 points (CoOp ahead on the mean; FedOTP ahead at 0 of 3 seeds)" in text
    # Now the first stand-in moves it most (−30: −24), CoOp's budget at most +5 (its 25-epoch session).
    other = study_findings(study_summary(_study(budget10=(-2, -2, -2), standin=(-30, -30, -30))))
    assert "most is **backbone** (stand-in standin): −24.0 points" in other
    assert "the sign flips" not in other
    # Ranked after it: each factor by its largest move.
    tail = other.split("most is", 1)[1]
    assert tail.index("then rate") < tail.index("then batch") and "then CoOp's budget (+5.0)" in tail
    # The reference's seed spread bounds what counts as more than noise.
    noisy = study_findings(study_summary(_study(ref=(-6, 14, -26), own=(-5, 15, -25), budget10=(-6, 14, -26),
                                                budget25=(-6, 14, -26), standin=(-6, 14, -26), batch=(-6, 14, -26))))
    assert "within the seeds' spread" in noisy


def test_study_findings_at_smoke_and_without_pairs():
    smoke = _study()
    smoke = smoke[smoke["row"].isin(SMOKE_ARMS) & (smoke["seed"] == 0)]
    text = study_findings(study_summary(smoke))
    assert "one seed, no spread" in text and "most is **CoOp's budget**" in text
    assert study_findings(study_summary(smoke[smoke["row"] == "fedotp"])).startswith("No pair")


def _verdict(runs):
    return evaluate_claims(runs, ids=["fedotp.coop_ahead_at_every_factor"]).iloc[0]


def test_coop_ahead_claim_reads_the_equal_budget_pairs_and_can_fail():
    assert {c for c, _ in CLAIM_PAIRS} == {c for f, _, c, _ in STUDY_PAIRS if f != BUDGET}
    # CoOp ahead in every equal-budget pair: PASS, even with FedOTP ahead of CoOp's official session.
    assert _verdict(_study()).verdict == "PASS"
    # FedOTP ahead at every seed in one pair (the first stand-in): FAIL.
    res = _verdict(_study(standin=(5, 5, 5)))
    assert res.verdict == "FAIL" and "arch standin" in res.evidence
    # FedOTP ahead at the reference: FAIL.
    assert _verdict(_study(ref=(3, 3, 3))).verdict == "FAIL"
    # No pair of it run: NOT RUN.
    only = _study()
    assert _verdict(only[only["row"].isin(["fedotp", "coop, 10 epochs (official)"])]).verdict == "NOT RUN"
