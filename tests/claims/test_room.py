"""No FAIL where the stand-in leaves no room: a test that declares a ceiling is UNTESTABLE when the gain it
requires exceeds the room its control leaves (issue 54), and is judged as before otherwise."""
import json

import pandas as pd
import pytest

from fedrepro.claims.core import (UNTESTABLE, VERDICT_FIELD, VERDICTS, Ceiling, Claim, ClaimResult, combined,
                                  compare, compare_each, exceeds, next_stage, recorded_claims, shown_verdicts)
from fedrepro.env.jsonfiles import _type_ok
from fedrepro.errors import ConfigError

M, A = "method.name", "data.partition_args.alpha"


def _rows(means: dict, alpha: float = 0.1, spread: float = 0.004) -> list[dict]:
    """Three seeds per method around ``means`` (fractions), at ``alpha``."""
    return [{M: m, A: alpha, "seed": s, "best": mu + spread * (s - 1)} for m, mu in means.items() for s in range(3)]


def test_a_gain_larger_than_the_room_is_untestable_and_one_with_room_that_misses_still_fails():
    # Local sits at 98.5: a +3-point gain over it would need 101.5, so no result here could show it.
    crowded = pd.DataFrame(_rows({"fedpft": 0.986, "local": 0.985}))
    test, evidence = compare(crowded, {M: "fedpft"}, {M: "local"}, margin=0.03, label_a="FedPFT", label_b="Local",
                             ceiling=Ceiling(value=1.0, label="100%"))
    assert test.verdict == UNTESTABLE
    assert test.room == pytest.approx(0.015)
    assert "required +3.00 pts against a room of +1.50 pts (100% 100.00 − Local 98.50)" in test.room_text
    assert "→ UNTESTABLE (required +3.00 pts" in evidence
    # The same miss where Local leaves room (it sits at 80): FAIL, as without a ceiling.
    roomy = pd.DataFrame(_rows({"fedpft": 0.795, "local": 0.80}))
    test, _ = compare(roomy, {M: "fedpft"}, {M: "local"}, margin=0.03, ceiling=Ceiling(value=1.0))
    assert test.verdict == "FAIL" and test.room == pytest.approx(0.20)
    # And the normal verdicts with room: PASS and INCONCLUSIVE as before.
    assert compare(pd.DataFrame(_rows({"fedpft": 0.90, "local": 0.80})), {M: "fedpft"}, {M: "local"}, margin=0.03,
                   ceiling=Ceiling(value=1.0))[0].verdict == "PASS"
    wide = pd.DataFrame(_rows({"fedpft": 0.83}, spread=0.03) + _rows({"local": 0.80}, spread=0.0))
    assert compare(wide, {M: "fedpft"}, {M: "local"}, margin=0.03, ceiling=Ceiling(value=1.0))[0].verdict == \
        "INCONCLUSIVE"
    # Without a ceiling the crowded claim is the FAIL it was before the rule.
    assert compare(crowded, {M: "fedpft"}, {M: "local"}, margin=0.03)[0].verdict == "FAIL"
    # No room excuses a miss, not a loss: FedPFT wholly below Local stays FAIL under the same ceiling.
    below_control = pd.DataFrame(_rows({"fedpft": 0.975, "local": 0.985}))
    test, _ = compare(below_control, {M: "fedpft"}, {M: "local"}, margin=0.03, ceiling=Ceiling(value=1.0))
    assert test.no_room and test.verdict == "FAIL"


def test_a_ceiling_of_named_rows_takes_the_best_of_them_and_never_the_methods_own():
    # The best any baseline reaches at α = 0.1 is FedPer's 94.6; Local at 94.0 leaves 0.6 points.
    t = pd.DataFrame(_rows({"fedpft": 0.945, "local": 0.940, "fedper": 0.946, "fedavg": 0.80}))
    test, _ = compare(t, {M: "fedpft"}, {M: "local"}, margin=0.0133, label_b="Local",
                      ceiling=Ceiling(rows={M: ("fedper", "fedavg", "local")}, label="best baseline"))
    assert test.verdict == UNTESTABLE and test.room == pytest.approx(0.006)
    assert "best baseline method.name=fedper 94.60 − Local 94.00" in test.room_text
    # A method that clears the bound anyway passes: the room was larger than the baselines showed.
    ahead = t.assign(best=[b + 0.03 if m == "fedpft" else b for m, b in zip(t[M], t["best"])])
    assert compare(ahead, {M: "fedpft"}, {M: "local"}, margin=0.0133,
                   ceiling=Ceiling(rows={M: ("fedper", "fedavg", "local")}))[0].verdict == "PASS"
    # "Beats the best baseline" (margin 0, that baseline its own ceiling: room 0) stays testable, both ways.
    best = Ceiling(rows={M: ("fedper", "local")})
    assert compare(t, {M: "fedpft"}, {M: "fedper"}, ceiling=best)[0].verdict == "FAIL"
    assert compare(ahead, {M: "fedpft"}, {M: "fedper"}, ceiling=best)[0].verdict == "PASS"
    # A ceiling read off the method itself would let it never fail: refused.
    with pytest.raises(ConfigError, match="ceiling rows .* hold the method's own rows"):
        compare(t, {M: "fedpft"}, {M: "local"}, margin=0.03, ceiling=Ceiling(rows={M: ("fedpft", "fedper")}))
    # Where the table holds none of the ceiling's rows, no room is measured: judged as without a ceiling.
    test, _ = compare(t, {M: "fedpft"}, {M: "local"}, margin=0.03, ceiling=Ceiling(rows={M: "fedrod"}))
    assert test.verdict == "FAIL" and not test.room_text
    assert compare(t, {M: "fedpft"}, {M: "local"}, margin=0.03,
                   ceiling=Ceiling(rows={"setting": "II"}))[0].verdict == "FAIL"
    with pytest.raises(ConfigError, match="ceiling"):
        Ceiling()
    with pytest.raises(ConfigError, match="ceiling"):
        Ceiling(value=1.0, rows={M: "local"})


def test_each_alpha_reads_its_own_room_and_a_fail_anywhere_decides_the_claim():
    t = pd.DataFrame(_rows({"fedpft": 0.945, "local": 0.940, "fedper": 0.946}, alpha=0.1)
                     + _rows({"fedpft": 0.90, "local": 0.80, "fedper": 0.86}, alpha=0.5))
    ceiling = Ceiling(rows={M: ("fedper", "local")})
    tests, evidence = compare_each(t, {M: "fedpft"}, {M: "local"}, A, margin=0.0133, ceiling=ceiling)
    assert [x.verdict for x in tests] == [UNTESTABLE, "PASS"] and combined(tests) == UNTESTABLE
    assert "[α=0.1: UNTESTABLE]" in evidence and "[α=0.5: PASS]" in evidence
    # A miss where there is room is a FAIL, and the claim FAILs whatever the room elsewhere.
    missed = pd.DataFrame(_rows({"fedpft": 0.945, "local": 0.940, "fedper": 0.946}, alpha=0.1)
                          + _rows({"fedpft": 0.80, "local": 0.80, "fedper": 0.86}, alpha=0.5))
    tests, _ = compare_each(missed, {M: "fedpft"}, {M: "local"}, A, margin=0.0133, ceiling=ceiling)
    assert [x.verdict for x in tests] == [UNTESTABLE, "FAIL"] and combined(tests) == "FAIL"
    inconclusive = exceeds("x", [0.1, -0.1, 0.02], [0, 1, 2])
    assert combined([inconclusive, tests[0]]) == UNTESTABLE  # more seeds would not give it room


def test_an_untestable_claim_records_its_numbers_goes_to_no_more_seeds_and_is_read_back(tmp_path):
    claim = Claim("x.rises", "x", "Fig. 1", "FedPFT beats Local by 3 points",
                  lambda r: compare(r, {M: "fedpft"}, {M: "local"}, margin=0.03, label_a="FedPFT", label_b="Local",
                                    ceiling=Ceiling(value=1.0)), max_seeds=12)
    res = claim.evaluate(pd.DataFrame(_rows({"fedpft": 0.986, "local": 0.985})))
    assert isinstance(res, ClaimResult) and res.verdict == UNTESTABLE
    assert res.room.startswith("required +3.00 pts against a room of +1.50 pts")
    assert next_stage(res.verdict, 3, 12) is None  # seeds cannot make room
    # The claims files, the by-round files and the pages accept and count the verdict.
    assert UNTESTABLE in VERDICTS and UNTESTABLE in shown_verdicts(["PASS"]) and _type_ok(UNTESTABLE, VERDICT_FIELD)
    folder = tmp_path / "claims"
    folder.mkdir()
    row = {k: v for k, v in res.__dict__.items() if k not in ("runs", "seeds")}
    (folder / "x_01_rises.json").write_text(json.dumps({"notebook": "x_01_rises", "claims": [row]}))
    assert recorded_claims(folder)["x.rises"]["verdict"] == UNTESTABLE
