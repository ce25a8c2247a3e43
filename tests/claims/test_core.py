"""The claim machinery: compare, select, and saved claims collected (unchecked ones NOT RUN)."""
import dataclasses

import pandas as pd
import pytest
from support import claim_table

import fedrepro.claims  # noqa: F401  (registers every paper's claims)
from fedrepro.claims import MissingResults, compare, select
from fedrepro.papers.verdicts import evaluate_claims

A = "data.partition_args.alpha"


def test_compare_judges_the_interval_of_the_paired_differences():
    t = claim_table([0.9, 0.8, 0.85], [0.6, 0.5, 0.55], 0.1)  # +30 points at every seed: no spread
    test, ev = compare(t, {"method.name": "local"}, {"method.name": "fedavg"}, margin=0.05)
    assert test.verdict == "PASS" and "+30.00 pts [+30.00, +30.00], required > +5.00 pts" in ev and "3/3" in ev
    test, _ = compare(t, {"method.name": "local"}, {"method.name": "fedavg"}, margin=0.35)
    assert test.verdict == "FAIL"
    noisy = claim_table([0.9, 0.7, 0.82], [0.6, 0.75, 0.7], 0.1)  # +30, -5, +12: the seeds disagree
    test, _ = compare(noisy, {"method.name": "local"}, {"method.name": "fedavg"}, margin=0.05)
    assert test.verdict == "INCONCLUSIVE"


def test_t_interval_matches_the_textbook_and_one_seed_proves_nothing():
    from scipy import stats

    from fedrepro.claims import exceeds, t_interval

    mean, low, high = t_interval([1.0, 2.0, 3.0])
    half = stats.t.ppf(0.95, 2) * 1.0 / 3 ** 0.5  # sd 1, n 3, 90% two-sided
    assert mean == 2.0 and low == pytest.approx(2 - half) and high == pytest.approx(2 + half)
    assert exceeds("one seed", [0.5], [0], 0.0).verdict == "INCONCLUSIVE"


def test_verdicts_of_each_requirement_and_of_several_tests():
    from fedrepro.claims import below, combined, exceeds, near_zero

    up, down, mixed = [0.10, 0.11, 0.12], [-0.10, -0.11, -0.12], [0.10, -0.10, 0.02]
    assert [exceeds("e", v, [0, 1, 2], 0.0).verdict for v in (up, down, mixed)] == ["PASS", "FAIL", "INCONCLUSIVE"]
    assert [below("b", v, [0, 1, 2], 0.0).verdict for v in (up, down, mixed)] == ["FAIL", "PASS", "INCONCLUSIVE"]
    assert near_zero("n", [0.01, -0.01, 0.0], [0, 1, 2], 0.05).verdict == "PASS"
    assert near_zero("n", up, [0, 1, 2], 0.05).verdict == "FAIL"
    assert near_zero("n", mixed, [0, 1, 2], 0.05).verdict == "INCONCLUSIVE"
    p, f, i = (exceeds("t", v, [0, 1, 2]) for v in (up, down, mixed))
    assert combined([p, p]) == "PASS" and combined([p, i]) == "INCONCLUSIVE" and combined([i, f, p]) == "FAIL"
    with pytest.raises(TypeError, match="several verdicts"):
        bool(p)


def test_select_raises_on_missing_rows():
    with pytest.raises(MissingResults):
        select(claim_table([0.9], [0.6], 0.1), {"method.name": "fedprox"}, "best")


def test_saved_claims_are_collected_and_unchecked_ones_are_not_run(tmp_path, monkeypatch):
    import fedrepro.claims.core as claims_mod
    import fedrepro.papers.verdicts as verdicts

    for mod in (claims_mod, verdicts):
        monkeypatch.setattr(mod, "claims_dir", lambda profile, root=None: tmp_path)
    t = pd.concat([claim_table([0.9, 0.9], [0.6, 0.6], 0.1)])  # +30 at both seeds
    out = evaluate_claims(t, paper="tour")
    claims_mod.save_claims(out, "00_tour", "smoke")
    collected = verdicts.collect_claims("smoke").set_index("claim_id")
    assert collected.loc["tour.local_beats_fedavg_skewed", "verdict"] == "PASS"
    assert collected.loc["tour.local_beats_fedavg_skewed", "notebook"] == "00_tour"
    assert collected.loc["tour.local_beats_fedavg_skewed", "interval"].startswith("+30.00 pts [+30.00, +30.00]")
    assert collected.loc["tour.fedavg_beats_local_iid", "verdict"] == "NOT RUN"
    (tmp_path / "00_tour.json").unlink()
    assert (verdicts.collect_claims("smoke")["verdict"] == "NOT RUN").all()


def test_a_check_that_returns_a_bare_bool_is_refused():
    from fedrepro.claims import Claim

    claim = Claim("x.y", "x", "s", "a statement", check=lambda r: (True, "fine"))
    with pytest.raises(TypeError, match="x.y"):
        claim.evaluate(pd.DataFrame())


def test_paper_columns_must_be_a_tuple_of_names_not_a_string():
    from fedrepro.claims import Claim
    from fedrepro.errors import ConfigError

    with pytest.raises(ConfigError, match="paper_columns='C10'; valid: a tuple of column names"):
        Claim("x.y", "x", "s", "a statement", check=lambda r: None, paper_columns="C10")


def test_an_effect_says_what_its_sign_means_in_the_claims_words():
    from fedrepro.claims.core import below, exceeds, near_zero

    seeds = (0, 1, 2)
    # A difference "A − B" reads as A above or below B, the requirement in the same words.
    lost = exceeds("pFedCSPC − FedAvg", [-0.010, -0.012, -0.014], seeds)
    assert lost.words == "pFedCSPC 1.20 pts below FedAvg (required: pFedCSPC more than 0.00 pts above FedAvg)"
    # A negative bound on ">" allows a small loss; a positive bound on "<" a small gain.
    assert exceeds("50% − 100%", [0.002, 0.003, 0.004], seeds, -0.005).words == \
        "50% 0.30 pts above 100% (required: 50% less than 0.50 pts below 100%)"
    assert below("A − B", [0.01, 0.02, 0.03], seeds, 0.03).words == \
        "A 2.00 pts above B (required: A less than 3.00 pts above B)"
    assert below("A − B", [0.01, 0.02, 0.03], seeds, -0.01).words == \
        "A 2.00 pts above B (required: A more than 1.00 pts below B)"
    assert near_zero("probe − match", [-0.01, -0.005, 0.0], seeds, 0.01).words == \
        "probe 0.50 pts below match (required: at most 1.00 pts either way)"
    # A claim's own words, where the name's sign would not say which way is better.
    rounds = exceeds("FedAvg − pFedCSPC rounds", [7, 8, 8], seeds, scale=1.0, unit=" rounds",
                     reads=("pFedCSPC needs {} fewer than FedAvg", "pFedCSPC needs {} more than FedAvg"))
    assert rounds.words == ("pFedCSPC needs 7.67 rounds fewer than FedAvg (required: pFedCSPC needs more than 0 "
                            "rounds fewer than FedAvg)")
    assert "more than FedAvg (required" in dataclasses.replace(rounds, values=(-2.0, -1.0, -3.0)).words
    # A level, not a difference: its value and bound, no sign to explain.
    assert exceeds("share peaking on the true class", [0.9, 0.8, 1.0], seeds, 0.5, unit="%").words == \
        "share peaking on the true class: 90.00% (required: more than 50.00%)"


def test_an_effects_words_must_be_two_templates_with_one_place_for_its_size():
    from fedrepro.claims.core import exceeds
    from fedrepro.errors import ConfigError

    for bad in (("A above B",), ("A {} above B", "A below B"), "A {} above B"):
        with pytest.raises(ConfigError, match="reads"):
            exceeds("A − B", [0.1, 0.2], (0, 1), reads=bad)


def test_a_claim_records_its_deciding_effect_in_words():
    from fedrepro.claims.core import Claim

    check = lambda r: compare(r, {"method.name": "fedavg"}, {"method.name": "local"},  # noqa: E731
                              label_a="FedAvg", label_b="Local")
    got = Claim("x.words", "x", "T", "FedAvg beats Local", check).evaluate(
        claim_table([0.60, 0.61, 0.62], [0.70, 0.72, 0.71], 0.1))
    assert got.effect == "FedAvg 10.00 pts above Local (required: FedAvg more than 0.00 pts above Local)"


def test_a_test_takes_one_distinct_seed_per_value():
    from fedrepro.claims.core import Test
    from fedrepro.errors import ConfigError

    Test("a − b", (0.1, 0.2), (0, 1), ">", 0.0)
    with pytest.raises(ConfigError, match=r"seed 1 twice"):  # one run counted twice narrows the interval
        Test("a − b", (0.1, 0.1), (1, 1), ">", 0.0)
    with pytest.raises(ConfigError, match=r"seeds=\[0\] for 2 values"):
        Test("a − b", (0.1, 0.2), (0,), ">", 0.0)
    assert Test("count", (5.0,), (), "<", 9.0, exact=True).verdict == "PASS"  # no seeds: exact
