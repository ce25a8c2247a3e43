"""Likely causes of a claim's verdict, read off stored runs and verdicts by round."""
import json

import numpy as np
import pandas as pd
import pytest

import fedrepro
from fedrepro.claims import core
from fedrepro.claims.core import exceeds, near_zero, read_interval, shift_to_change
from fedrepro.papers.diagnose import (FLAT_WINDOW, REACH_WINDOWS, Movement, _trace_name, cause_of, causes,
                                      last_change, likely_cause, movement, needed_shift, reach, seed_count)
from tests.support import tiny_config


def test_trace_names_follow_reproduce():
    assert _trace_name("pfedcspc_01_global_and_personalized") == "pfedcspc__01_global_and_personalized.ipynb.jsonl"
    assert _trace_name("pep_fedpt_03_x") == "pep_fedpt__03_x.ipynb.jsonl"
    assert _trace_name("00_tour") == "00_tour.ipynb.jsonl"


def test_last_change_finds_the_last_flip():
    v = pd.DataFrame({"round": [1, 2, 3, 4, 1, 2, 3, 4], "claim_id": ["a"] * 4 + ["b"] * 4,
                      "verdict": ["FAIL", "PASS", "PASS", "FAIL", "PASS", "PASS", "PASS", "PASS"]})
    assert last_change(v) == {"a": (4, 4, 1), "b": (0, 4, 0)}  # a: FAIL→PASS at 2, PASS→FAIL at 4


def test_causes_by_rule():
    flat, moving = Movement(6, 0, 0.001), Movement(6, 2, 0.03)
    assert likely_cause("PASS", "", moving) == ""
    assert likely_cause("FAIL", "seeds [0, 1, 2]", moving).startswith("budget: 2 of 6 runs")
    assert "changed at round 19 of 20" in likely_cause("FAIL", "seeds [0, 1, 2]", flat, (19, 20, 1))
    assert likely_cause("FAIL", "seeds [0, 1, 2]", flat, (19, 20, 1)).startswith("budget: the verdict changed")
    # Back and forth in the last quarter: noise, not a drift.
    assert likely_cause("INCONCLUSIVE", "seeds [0, 1, 2]", flat, (19, 20, 3)).startswith(
        "noise: the verdict changed 3 times in the last quarter of the rounds (last at round 19 of 20)")
    # Moving runs under a verdict that changed in the third quarter: budget, and since when it held.
    assert likely_cause("FAIL", "seeds [0, 1, 2]", moving, (12, 20, 0)) == (
        "budget: " + moving.text() + ", though its verdict has been the same at every cut since round 12 of 20")
    assert "though" not in likely_cause("FAIL", "seeds [0, 1, 2]", moving, (19, 20, 1))
    # Moving runs under a verdict that held over the last half: settled, but no longer run measured, so
    # the budget is not ruled out (issue 54: a settled or flat curve cannot clear a budget).
    assert likely_cause("FAIL", "seeds [0, 1, 2]", moving, (8, 20, 0)).startswith(
        "budget not ruled out: no longer run measured (its verdict has been the same at every cut since round 8 "
        "of 20, though " + moving.text() + ")")
    assert likely_cause("FAIL", "seeds [0, 1, 2]", moving, (0, 20, 0)).startswith(
        "budget not ruled out: no longer run measured (its verdict was the same at every cut of rounds 1 to 20, "
        "though 2 of 6 runs")
    assert likely_cause("INCONCLUSIVE", "seeds [0, 1, 2]", moving, (10, 20, 0)).startswith(
        "seeds: the per-seed effects straddle the bound (its verdict has been the same at every cut since "
        "round 10 of 20, though 2 of 6 runs")
    assert likely_cause("FAIL", "seeds [0, 1, 2]", flat, (5, 20, 0)).startswith("budget not ruled out")
    assert likely_cause("INCONCLUSIVE", "seeds [0, 1, 2]", flat).startswith("seeds: the per-seed effects")
    assert likely_cause("INCONCLUSIVE", "(per seed +1.0; seeds [0])", flat).startswith("seeds: it rests on one seed")
    assert likely_cause("FAIL", "", None) == ""
    # A FAIL whose seeds agree is never sent to more seeds.
    assert "more seeds" not in likely_cause("FAIL", "seeds [0, 1, 2]", flat, (19, 20, 3))


@pytest.mark.parametrize("verdict", ["FAIL", "INCONCLUSIVE"])
@pytest.mark.parametrize("changed", [None, (0, 20, 0), (8, 20, 0), (12, 20, 0), (19, 20, 1), (19, 20, 3)])
@pytest.mark.parametrize("moving", [0, 2])
def test_one_cause_per_claim_consistent_with_its_verdict(verdict, changed, moving):
    cause = cause_of(verdict, "seeds [0, 1, 2]", Movement(6, moving, 0.03 if moving else 0.001), changed)
    assert cause.kind and cause.text.startswith(cause.kind + ":"), cause
    if verdict == "FAIL":
        assert cause.kind != "seeds" and "more seeds" not in cause.text
        assert cause.kind != "not a budget artefact"  # no longer run measured here
    else:
        assert cause.kind not in ("not a budget artefact", "budget not ruled out")


@pytest.mark.parametrize("test", [
    exceeds("A − B", [0.01, 0.03, 0.02], [0, 1, 2], 0.05),            # FAIL
    exceeds("A − B", [0.01, 0.06, -0.02], [0, 1, 2], 0.0),            # INCONCLUSIVE
    exceeds("A − B", [0.07, 0.08, 0.09], [0, 1, 2], 0.0),             # PASS
    near_zero("A − B", [0.004, -0.003, 0.001], [0, 1, 2], 0.01),      # PASS
    near_zero("A − B", [0.03, -0.02, 0.01], [0, 1, 2], 0.01),         # INCONCLUSIVE
    near_zero("A − B", [-0.04, -0.03, -0.05], [0, 1, 2], 0.01),       # FAIL
    core.Test("A − B", (0.02, 0.01, 0.03), (0, 1, 2), "<", 0.015)])
def test_the_shift_that_changes_a_verdict_is_the_smallest_that_does(test):
    low, high, requires, bound, unit = read_interval(test.interval_text)
    assert unit == " pts" and requires == test.requires
    need = shift_to_change(low, high, requires, bound)
    values = np.asarray(test.values)
    moved = [core.Test(test.name, tuple(values + s / 100), test.seeds, test.requires, test.bound).verdict
             for s in (need - 0.02, -need + 0.02)]
    assert moved == [test.verdict] * 2  # a shift short of it, either way, leaves the verdict (read at 2 decimals)
    assert {core.Test(test.name, tuple(values + s / 100), test.seeds, test.requires, test.bound).verdict
            for s in (need + 0.02, -need - 0.02)} - {test.verdict}  # and one just past it, one way, changes it


def test_an_interval_reads_back_only_when_bounded():
    assert read_interval("name: x: -1.47 pts [-5.16, +2.23], required > +1.83 pts") == (-5.16, 2.23, ">", 1.83, " pts")
    assert read_interval("+6 rounds [-6.16, +18.2], required > +0.00 rounds")[4] == " rounds"
    assert read_interval("+1.00 pts [−∞, +∞], required > +0.00 pts") is None
    assert read_interval("") is None and np.isnan(needed_shift("+6 rounds [-6.16, +18.2], required > +0.00 rounds"))
    assert seed_count("a (seeds [0, 1, 2, 3, 4]); b (seeds [0, 1, 2])", [0, 1, 2, 3, 4]) == 3
    assert seed_count("", [0, 1, 2, 3]) == 4 and seed_count("", None) == 0


def test_runs_too_slow_to_carry_the_interval_across_are_not_budget():
    # Five seeds; one run of ten moved by 1.5 points: two more windows move the mean effect by at most 0.6.
    slow = Movement(10, 1, 0.015, "it compares", 0.015)
    assert reach(slow, 5) == pytest.approx(REACH_WINDOWS * 1.5 / 5)
    interval = "+0.68 pts [-0.98, +2.33], required > +0.00 pts"  # 0.98 from a decision
    cause = likely_cause("INCONCLUSIVE", "seeds [0, 1, 2, 3, 4]", slow, None, needed_shift(interval), 5)
    assert cause.startswith("seeds: the per-seed effects straddle the bound (1 of 10 runs it compares still moved")
    assert "at most 0.60 pts, less than the 0.98 pts" in cause
    fail = "-6.76 pts [-8.66, -4.85], required > +0.63 pts"
    assert likely_cause("FAIL", "seeds [0, 1, 2, 3, 4]", Movement(10, 3, 0.022, "it compares", 0.06), None,
                        needed_shift(fail), 5).startswith("budget not ruled out: no longer run measured (3 of 10 runs")
    # Fast enough, or an interval 0.18 from the bound: budget, as before; and so without a reach.
    near = "-1.28 pts [-2.73, +0.18], required > +0.00 pts"
    assert likely_cause("INCONCLUSIVE", "seeds [0, 1, 2, 3, 4]", slow, None, needed_shift(near),
                        5).startswith("budget:")
    assert likely_cause("INCONCLUSIVE", "", slow, None, needed_shift(interval), 0).startswith("budget:")
    assert likely_cause("INCONCLUSIVE", "seeds [0, 1, 2]", Movement(10, 1, 0.015), None,
                        needed_shift(interval), 3).startswith("budget:")  # movement not summed: no reach
    # A verdict that changed late is budget however slow the runs.
    assert likely_cause("FAIL", "seeds [0, 1, 2, 3, 4]", slow, (19, 20, 1), needed_shift(fail), 5).startswith(
        "budget: the verdict changed")


def test_movement_reads_stored_rounds(tmp_path):
    cfg = tiny_config(tmp_path, **{"train.rounds": 2 * FLAT_WINDOW})
    fedrepro.run(cfg)
    m = movement([cfg.hash(), "0" * 16], tmp_path / "runs")  # a missing run is skipped
    acc = fedrepro.run(cfg).rounds["acc_mean"].dropna().to_numpy()
    change = acc[-FLAT_WINDOW:].mean() - acc[-2 * FLAT_WINDOW:-FLAT_WINDOW].mean()
    assert m.runs == 1 and m.moving == int(abs(change) >= 0.005) and abs(m.largest - abs(change)) < 1e-12
    assert m.total == pytest.approx(abs(change) if m.moving else 0.0)
    short = tiny_config(tmp_path, **{"train.rounds": 3})
    fedrepro.run(short)
    assert movement([short.hash()], tmp_path / "runs").runs == 0  # too few rounds to judge


def test_causes_join_traces_and_verdicts_by_round(tmp_path, monkeypatch):
    cfg = tiny_config(tmp_path, **{"train.rounds": 2 * FLAT_WINDOW})
    fedrepro.run(cfg)
    trace = tmp_path / "output" / "laptop" / "trace"
    trace.mkdir(parents=True)
    event = {"event": "run", "hash": cfg.hash(), "trained": True}
    (trace / "fedpft__02_x.ipynb.jsonl").write_text(json.dumps(event) + "\n")
    claims = tmp_path / "output" / "laptop" / "claims"
    (claims / "by_round").mkdir(parents=True)
    (claims / "by_round" / "fedpft_17.json").write_text(json.dumps({"verdicts": [
        {"round": 9, "claim_id": "c1", "verdict": "PASS"}, {"round": 10, "claim_id": "c1", "verdict": "FAIL"}]}))
    table = pd.DataFrame([{"claim_id": "c1", "verdict": "FAIL", "evidence": "seeds [0, 1]", "notebook": "fedpft_02_x"},
                          {"claim_id": "c2", "verdict": "PASS", "evidence": "", "notebook": "fedpft_02_x"},
                          {"claim_id": "c3", "verdict": "FAIL", "evidence": "", "notebook": "fedpft_05_untraced"}])
    out = causes("laptop", table, runs_dir=tmp_path / "runs", root=tmp_path)
    assert "changed at round 10 of 10" in out[0]
    assert out[1] == ""
    assert out[2] == ""


def test_a_claim_records_the_runs_it_compares_and_its_cause_reads_only_those(tmp_path):
    from fedrepro.papers.verdicts import evaluate_claims

    # Local vs FedAvg at α = 0.1 and α = 1.0 (the tour's claims); a third method's rows are not read.
    rows = [{"method.name": m, "data.partition_args.alpha": a, "seed": s, "best": 0.5, "final": 0.5,
             "path": f"/somewhere/runs/{m[:4]}{a}{s}"} for m in ("local", "fedavg", "fedprox")
            for a in (0.1, 1.0) for s in range(3)]
    out = evaluate_claims(pd.DataFrame(rows), ids=["tour.local_beats_fedavg_skewed"])
    runs = set(out["runs"].item())
    assert runs == {f"{m[:4]}0.1{s}" for m in ("local", "fedavg") for s in range(3)}
    # A results table without run paths records none (the cause then reads the notebook's runs).
    assert evaluate_claims(pd.DataFrame(rows).drop(columns="path"),
                           ids=["tour.local_beats_fedavg_skewed"])["runs"].item() == ()

    # The cause names the runs the claim compares, not all those its notebook read.
    flat_cfg = tiny_config(tmp_path, **{"train.rounds": 2 * FLAT_WINDOW})
    fedrepro.run(flat_cfg)
    trace = tmp_path / "output" / "laptop" / "trace"
    trace.mkdir(parents=True)
    event = {"event": "run", "hash": flat_cfg.hash(), "trained": True}
    (trace / "fedpft__02_x.ipynb.jsonl").write_text(json.dumps(event) + "\n")
    m = movement([flat_cfg.hash()], tmp_path / "runs", whose="it compares")
    table = pd.DataFrame([{"claim_id": "c1", "verdict": "FAIL", "evidence": "seeds [0, 1, 2]",
                           "notebook": "fedpft_02_x",
                           "runs": [flat_cfg.hash()]}])
    out = causes("laptop", table, runs_dir=tmp_path / "runs", root=tmp_path)
    assert ("runs it compares" in out[0]) and "its notebook read" not in out[0]
    assert out[0].startswith("budget: 1 of 1 runs it compares") == bool(m.moving)


def test_a_cause_a_claim_declares_never_sends_a_fail_to_more_seeds():
    """A claim's own likely cause stands on its page whatever its verdict (it replaces the one read off
    the runs), so it must hold for a FAIL too: it may not say that more seeds would decide it."""
    from fedrepro.papers.verdicts import registered

    reg = registered()
    declared = {n: reg.get(n).likely_cause for n in reg.names() if reg.get(n).likely_cause}
    assert declared  # the rule below reads something
    assert not [n for n, cause in declared.items() if "more seeds" in cause or "seeds would" in cause]
