"""How firm a verdict is (fedrepro.claims.replication): the chance that an independent re-run at as many
seeds returns it again, its invariants, a check of its quadrature against a Monte Carlo of its model and
of the model against simulated re-runs, its combination over a claim's tests, and its place in the
claim records (kept with the tests, or read off an older record's printed evidence)."""
from __future__ import annotations

import itertools
import json
import math
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from fedrepro.claims import Claim, claims_dir, compare_each, exceeds, recorded_claims, save_claims
from fedrepro.claims.core import (LEVEL, below, combined, exact, near_zero, printed_tests, recorded_test,
                                  record_rerun, spread_test)
from fedrepro.claims.core import Test as ClaimTest
from fedrepro.claims.replication import (FAIL, INCONCLUSIVE, NOT_ESTIMATED, PASS, STRENGTHS, UNTESTABLE,
                                         claim_chances, rerun_chances, said, strength)
from fedrepro.errors import CorruptCacheError

from support import claim_table

FIRM, LIKELY = (floor for floor, _ in STRENGTHS[:2])


def _factor(n: int, level: float = LEVEL) -> float:
    """The rule's half-width per SD at ``n`` seeds, computed here apart from the code."""
    return stats.t.ppf(0.5 + level / 2, n - 1) / math.sqrt(n)


def _at(mean: float, n: int, bound: float = 0.0, requires: str = ">") -> ClaimTest:
    """A test of ``n`` seeds with SD 1 and the given mean."""
    return spread_test({"name": "A − B", "mean": mean, "sd": 1.0, "requires": requires, "bound": bound}, n, LEVEL)


def _same(test: ClaimTest) -> float:
    return test.rerun().get(test.verdict, 0.0)


# ---------------------------------------------------------------------------------------------
# Invariants

def test_a_verdict_far_past_its_bound_is_firm_either_way():
    far = exceeds("A − B", [0.10, 0.11, 0.12], range(3), 0.0)
    short = exceeds("A − B", [-0.10, -0.11, -0.12], range(3), 0.0)
    assert far.verdict == PASS and short.verdict == FAIL
    assert _same(far) > 0.99 and _same(short) > 0.99 and strength(_same(far)) == "firm"


@pytest.mark.parametrize("n", [3, 5, 8, 12])
def test_a_verdict_whose_interval_ends_on_its_bound_is_fragile(n):
    """An interval that clears the bound by a hair: a re-run's interval lands either side of it,
    a little more often on the same side (a re-run's half-width tends to be narrower than one that
    only just reached the bound), so below LIKELY and near a coin, never firm."""
    edge = _at(_factor(n) + 1e-6, n)
    assert edge.verdict == PASS
    assert 0.5 <= _same(edge) < LIKELY and strength(_same(edge)) == "fragile"


@pytest.mark.parametrize("mean", [-3.0, -1.2, 0.3, 1.7, 2.4])
@pytest.mark.parametrize("requires", [">", "<"])
def test_pass_and_fail_are_mirror_images_about_the_bound(mean, requires):
    """The effects mirrored about the bound swap PASS and FAIL and keep every chance."""
    bound = 0.5
    one, mirrored = _at(bound + mean, 3, bound, requires), _at(bound - mean, 3, bound, requires)
    a, b = one.rerun(), mirrored.rerun()
    assert a.get(PASS, 0) == pytest.approx(b.get(FAIL, 0), abs=1e-9)
    assert a.get(FAIL, 0) == pytest.approx(b.get(PASS, 0), abs=1e-9)
    assert a.get(INCONCLUSIVE, 0) == pytest.approx(b.get(INCONCLUSIVE, 0), abs=1e-9)


@pytest.mark.parametrize("n", [3, 5, 12])
def test_an_inconclusive_centred_on_its_bound_is_likely_to_stay_so(n):
    centred = _at(0.0, n)
    assert centred.verdict == INCONCLUSIVE and _same(centred) >= LIKELY
    assert centred.rerun()[PASS] == pytest.approx(centred.rerun()[FAIL], abs=1e-9)


@pytest.mark.parametrize("verdict, mean", [(PASS, 2.5), (FAIL, -2.5)])
def test_more_seeds_make_a_verdict_firmer_at_the_same_effect_and_spread(verdict, mean):
    chances = [_same(t) for t in (_at(mean, n) for n in (3, 5, 8, 12)) if t.verdict == verdict]
    assert len(chances) == 4 and all(a < b for a, b in zip(chances, chances[1:])), chances


def test_one_seed_no_spread_an_exact_quantity_and_a_nonfinite_effect():
    one = exceeds("A − B", [0.5], [0], 0.0)   # unbounded interval: a one-seed re-run is INCONCLUSIVE too
    assert one.verdict == INCONCLUSIVE and one.rerun() == {INCONCLUSIVE: 1.0}
    flat = exceeds("A − B", [0.2, 0.2, 0.2], range(3), 0.0)   # every seed the same: nothing varies
    assert flat.rerun() == {PASS: 1.0}
    assert exact("params", 3.0, "<", 5.0).rerun() == {PASS: 1.0}
    broken = exceeds("A − B", [0.2, math.nan, 0.3], range(3), 0.0)
    assert broken.rerun() is None and claim_chances([broken.rerun(), flat.rerun()]) is None
    assert said(None) == NOT_ESTIMATED == strength(math.nan)


def test_the_strengths_and_how_the_pages_say_a_chance():
    assert [strength(p) for p in (0.97, FIRM, FIRM - 1e-9, LIKELY, LIKELY - 1e-9, 0.0)] == \
        ["firm", "firm", "likely", "likely", "fragile", "fragile"]
    assert said(0.9734) == "firm, 0.97" and said(0.5) == "fragile, 0.50"
    assert said(0.9999) == "firm, 0.99" and said(1.0) == "firm, 1.00"   # 1.00 only when certain


# ---------------------------------------------------------------------------------------------
# The quadrature against its model, the model against re-runs

SHAPES = {
    "above": exceeds("A − B", [0.02, 0.035, 0.01], range(3), 0.01),
    "below": below("A − B", [0.01, 0.03, -0.02, 0.0, 0.015], range(5), 0.02),
    "within": near_zero("A − B", [0.01, -0.02, 0.015], range(3), 0.03),
    # A required gain larger than the room: UNTESTABLE unless it passes, or falls below 0.
    "no room": exceeds("A − B", [0.02, 0.005, 0.03], range(3), 0.03, room=0.02),
    # A share, cut to [0, 1], against a bound near its top.
    "limits": ClaimTest("share", (0.97, 0.93, 1.0), (0, 1, 2), ">", 0.95, limits=(0.0, 1.0)),
}


@pytest.mark.parametrize("shape", list(SHAPES))
def test_the_chances_are_those_of_their_model_drawn_at_random(shape):
    """A Monte Carlo of the model (module doc of fedrepro.claims.replication): σ given s, the
    re-run's SD and mean, judged by the claim's own rule, gives the quadrature's chances."""
    test = SHAPES[shape]
    v = np.asarray(test.values)
    n, m, s = v.size, v.mean(), v.std(ddof=1)
    rng = np.random.default_rng(11)
    k = 20000
    sigma = s * np.sqrt((n - 1) / rng.chisquare(n, k))
    s_new = sigma * np.sqrt(rng.chisquare(n - 1, k) / (n - 1))
    m_new = m + sigma * math.sqrt(2 / n) * rng.standard_normal(k)
    h = _factor(n, test.level) * s_new
    drawn = pd.Series([test.judge(a - b, a + b) for a, b in zip(m_new, h)]).value_counts(normalize=True)
    chances = test.rerun()
    assert set(drawn.index) <= set(chances)
    for verdict, p in chances.items():
        assert drawn.get(verdict, 0.0) == pytest.approx(p, abs=0.015), (verdict, dict(drawn), chances)
    if shape == "no room":
        assert UNTESTABLE in chances and FAIL in chances   # a loss is still a FAIL


def test_the_estimate_matches_how_often_an_independent_draw_keeps_the_verdict():
    """Claims whose true effects lie anywhere within ±12 seed SDs of their bound (the flat prior the
    model assumes), 3 seeds each: the chance each verdict is given matches, on average and within each
    strength, how often an independent draw of 3 new seeds got the same verdict. Plugging the seeds'
    SD in for the true one, and ignoring the re-run's own SD, would not: it calls verdicts firmer than
    they are."""
    rng = np.random.default_rng(2024)
    n, k = 3, 2000
    truth = rng.uniform(-12, 12, k)
    chance, plug, same = np.empty(k), np.empty(k), np.empty(k, dtype=bool)
    c = _factor(n)
    rule = exceeds("A − B", [0.0, 1.0], range(2))   # the claim's rule, judging any interval
    for i, mu in enumerate(truth):
        (m, s), (m2, s2) = ((x.mean(), x.std(ddof=1)) for x in mu + rng.standard_normal((2, n)))
        verdict = rule.judge(m - c * s, m + c * s)
        same[i] = rule.judge(m2 - c * s2, m2 + c * s2) == verdict
        chance[i] = rerun_chances(m, s, n, c, rule.judge, rule.edges).get(verdict, 0.0)
        up = stats.norm.sf((c * s - m) / (s * math.sqrt(2 / n)))
        down = stats.norm.cdf((-c * s - m) / (s * math.sqrt(2 / n)))
        plug[i] = {PASS: up, FAIL: down, INCONCLUSIVE: 1 - up - down}[verdict]

    def off(estimate, where) -> tuple[float, float]:
        freq = same[where].mean()
        return abs(estimate[where].mean() - freq), 3 * math.sqrt(freq * (1 - freq) / where.sum()) + 0.01
    gap, tol = off(chance, np.ones(k, dtype=bool))
    assert gap < tol
    bands = [(chance >= lo) & (chance < hi) for lo, hi in ((0, LIKELY), (LIKELY, FIRM), (FIRM, 2))]
    for band in bands:
        assert band.sum() >= 100
        gap, tol = off(chance, band)
        assert gap < tol, (chance[band].mean(), same[band].mean())
    # The plug-in's firm and likely verdicts hold less often than it says.
    plug_bands = [(plug >= lo) & (plug < hi) for lo, hi in ((LIKELY, FIRM), (FIRM, 2))]
    assert any(plug[b].mean() - same[b].mean() > off(plug, b)[1] for b in plug_bands)


def test_a_claims_chances_follow_how_it_combines_its_tests():
    """claim_chances is core.combined applied to every joint outcome of independent tests."""
    rng = np.random.default_rng(4)
    verdicts = (PASS, INCONCLUSIVE, FAIL, UNTESTABLE)
    for n_tests in (1, 2, 3):
        per = [dict(zip(verdicts, rng.dirichlet(np.ones(4) * 0.7))) for _ in range(n_tests)]
        brute = dict.fromkeys(verdicts, 0.0)
        for outcome in itertools.product(verdicts, repeat=n_tests):
            p = math.prod(t[v] for t, v in zip(per, outcome))
            brute[combined([SimpleNamespace(verdict=v) for v in outcome])] += p
        got = claim_chances(per)
        for v in verdicts:
            assert got.get(v, 0.0) == pytest.approx(brute[v], abs=1e-12)


# ---------------------------------------------------------------------------------------------
# Records

def _two_alphas() -> pd.DataFrame:
    return pd.concat([claim_table([0.9, 0.85, 0.88], [0.6, 0.62, 0.58], 0.1),
                      claim_table([0.71, 0.66, 0.7], [0.65, 0.64, 0.66], 1.0)], ignore_index=True)


def _claim(max_seeds: int = 3) -> Claim:
    return Claim("tour.replication_probe", "tour", "Table 1", "Local beats FedAvg at every α",
                 lambda r: compare_each(r, {"method.name": "local"}, {"method.name": "fedavg"},
                                        "data.partition_args.alpha", margin=0.02, label_a="Local",
                                        label_b="FedAvg"), max_seeds=max_seeds)


def test_a_claim_record_keeps_its_tests_and_gives_its_estimate_back(tmp_path, monkeypatch):
    monkeypatch.setenv("FEDREPRO_OUTPUT", str(tmp_path))
    result = _claim().evaluate(_two_alphas())
    kept = result.replication
    assert len(kept["tests"]) == 2 and kept["same_verdict"] == kept["rerun"][result.verdict]
    assert kept["strength"] == strength(kept["same_verdict"])
    save_claims(pd.DataFrame([result.__dict__]), "00_tour", "laptop")
    row = recorded_claims(claims_dir("laptop"))[result.claim_id]
    assert row["replication"]["rerun"] == pytest.approx(kept["rerun"])
    assert [t["name"] for t in row["replication"]["tests"]] == [t["name"] for t in kept["tests"]]
    first = row["replication"]["tests"][0]
    assert first["values"] == pytest.approx([0.3, 0.23, 0.3]) and first["bound"] == 0.02
    assert first["requires"] == ">" and first["seeds"] == [0, 1, 2] and first["room"] is None
    again = recorded_test(first)
    assert again.verdict == first["verdict"] and again.values == tuple(first["values"])
    assert record_rerun(row) == (pytest.approx(kept["same_verdict"], abs=1e-12), "record")


def test_a_record_with_a_nonfinite_effect_or_a_damaged_estimate(tmp_path, monkeypatch):
    monkeypatch.setenv("FEDREPRO_OUTPUT", str(tmp_path))
    result = _claim().evaluate(_two_alphas())
    row = dict(result.__dict__)
    row["replication"] = {**result.replication, "tests": [dict(t) for t in result.replication["tests"]]}
    row["replication"]["tests"][1]["values"] = [0.06, math.nan, 0.04]   # JSON keeps it as null
    save_claims(pd.DataFrame([row]), "00_tour", "laptop")
    back = recorded_claims(claims_dir("laptop"))[result.claim_id]
    assert back["replication"]["tests"][1]["values"][1] is None
    assert record_rerun(back) == (None, "")
    bad = claims_dir("laptop") / "00_tour.json"
    record = json.loads(bad.read_text())
    record["claims"][0]["replication"]["tests"] = "three tests"
    bad.write_text(json.dumps(record))
    with pytest.raises(CorruptCacheError, match="replication"):
        recorded_claims(claims_dir("laptop"))


def test_an_older_record_is_read_off_the_tests_its_evidence_prints():
    """A record written before records kept their tests: the estimate is read off the tests its
    evidence prints (the reader bench/seed_needs.py shares), at the claim's per-look level; a test
    the reader cannot read, or rounded numbers that do not give the verdict back, leave it unestimated."""
    for max_seeds in (3, 8):
        result = _claim(max_seeds).evaluate(_two_alphas())
        row = {k: v for k, v in result.__dict__.items() if k != "replication"}
        chance, how = record_rerun(row)
        assert how == "evidence" and chance == pytest.approx(result.replication["same_verdict"], abs=0.02)
        assert len(printed_tests(row["evidence"])) == 2
    cut = ClaimTest("share", (0.99, 0.97, 1.0), (0, 1, 2), ">", 0.9, limits=(0.0, 1.0))
    assert "interval cut" in cut.text()
    assert record_rerun({"verdict": cut.verdict, "evidence": cut.text(), "max_seeds": 3}) == (None, "")
    no_room = exceeds("A − B", [0.02, 0.005, 0.03], range(3), 0.03, room=0.02, room_of="ceiling 100 − B 98")
    assert no_room.verdict == UNTESTABLE and "against a room of +2.00 pts" in no_room.text()
    chance, how = record_rerun({"verdict": UNTESTABLE, "evidence": no_room.text(), "max_seeds": 3})
    assert how == "evidence" and chance == pytest.approx(no_room.rerun()[UNTESTABLE], abs=0.02)
    wrong = exceeds("A − B", [0.10, 0.11, 0.12], range(3), 0.0)
    assert record_rerun({"verdict": FAIL, "evidence": wrong.text(), "max_seeds": 3}) == (None, "")
    assert record_rerun({"verdict": "NOT RUN", "evidence": "no notebook has checked it yet"}) == (None, "")


def test_every_claims_evidence_prints_each_test_it_judges():
    """So an older record's evidence gives back every test of its claim (on each claim's witness
    table, tests/papers/claim_witnesses.py), or none, and then its estimate is left out."""
    from fedrepro.papers.verdicts import registered

    from .papers.claim_witnesses import WITNESSES

    for claim_id in registered().names():
        result = registered().get(claim_id).evaluate(WITNESSES[claim_id]())
        printed = printed_tests(result.evidence, with_exact=True)
        assert len(printed) in (0, len(result.replication["tests"])), claim_id
        row = {k: v for k, v in result.__dict__.items() if k != "replication"}
        chance, how = record_rerun(row)
        if printed and how:
            assert chance == pytest.approx(result.replication["same_verdict"], abs=0.03), claim_id
