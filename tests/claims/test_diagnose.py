"""Likely causes of a claim's verdict, read off stored runs and verdicts by round."""
import json

import pandas as pd
import pytest

import fedrepro
from fedrepro.papers.diagnose import FLAT_WINDOW, Movement, _trace_name, causes, last_change, likely_cause, movement
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
    # Moving runs under a verdict that held over the last half: settled, not budget.
    assert likely_cause("FAIL", "seeds [0, 1, 2]", moving, (8, 20, 0)) == (
        "not a budget artefact: its verdict has been the same at every cut since round 8 of 20, though "
        + moving.text() + "; the effect is absent at this profile's scale (data, model and rounds differ "
        "from the paper's)")
    assert likely_cause("FAIL", "seeds [0, 1, 2]", moving, (0, 20, 0)).startswith(
        "not a budget artefact: its verdict was the same at every cut of rounds 1 to 20, though 2 of 6 runs")
    assert likely_cause("INCONCLUSIVE", "seeds [0, 1, 2]", moving, (10, 20, 0)).startswith(
        "seeds: the per-seed effects straddle the bound (its verdict has been the same at every cut since "
        "round 10 of 20, though 2 of 6 runs")
    assert likely_cause("FAIL", "seeds [0, 1, 2]", flat, (5, 20, 0)).startswith("not a budget artefact")
    assert likely_cause("INCONCLUSIVE", "seeds [0, 1, 2]", flat).startswith("seeds: the per-seed effects")
    assert likely_cause("INCONCLUSIVE", "(per seed +1.0; seeds [0])", flat).startswith("seeds: it rests on one seed")
    assert likely_cause("FAIL", "", None) == ""
    # A FAIL whose seeds agree is never sent to more seeds.
    assert "more seeds" not in likely_cause("FAIL", "seeds [0, 1, 2]", flat, (19, 20, 3))


@pytest.mark.parametrize("verdict", ["FAIL", "INCONCLUSIVE"])
@pytest.mark.parametrize("changed", [None, (0, 20, 0), (8, 20, 0), (12, 20, 0), (19, 20, 1), (19, 20, 3)])
@pytest.mark.parametrize("moving", [0, 2])
def test_one_cause_per_claim_consistent_with_its_verdict(verdict, changed, moving):
    cause = likely_cause(verdict, "seeds [0, 1, 2]", Movement(6, moving, 0.03 if moving else 0.001), changed)
    kinds = [k for k in ("budget:", "noise:", "seeds:", "not a budget artefact:") if k in cause]
    assert len(kinds) == 1 and cause.startswith(kinds[0]), cause
    if verdict == "FAIL":
        assert not cause.startswith("seeds:") and "more seeds" not in cause
    else:
        assert not cause.startswith("not a budget artefact")


def test_movement_reads_stored_rounds(tmp_path):
    cfg = tiny_config(tmp_path, **{"train.rounds": 2 * FLAT_WINDOW})
    fedrepro.run(cfg)
    m = movement([cfg.hash(), "0" * 16], tmp_path / "runs")  # a missing run is skipped
    acc = fedrepro.run(cfg).rounds["acc_mean"].dropna().to_numpy()
    change = acc[-FLAT_WINDOW:].mean() - acc[-2 * FLAT_WINDOW:-FLAT_WINDOW].mean()
    assert m.runs == 1 and m.moving == int(abs(change) >= 0.005) and abs(m.largest - abs(change)) < 1e-12
    short = tiny_config(tmp_path, **{"train.rounds": 3})
    fedrepro.run(short)
    assert movement([short.hash()], tmp_path / "runs").runs == 0  # too few rounds to judge


def test_causes_join_traces_and_verdicts_by_round(tmp_path, monkeypatch):
    cfg = tiny_config(tmp_path, **{"train.rounds": 2 * FLAT_WINDOW})
    fedrepro.run(cfg)
    trace = tmp_path / "output" / "laptop" / "trace"
    trace.mkdir(parents=True)
    (trace / "fedpft__02_x.ipynb.jsonl").write_text(json.dumps({"event": "run", "hash": cfg.hash()}) + "\n")
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
    (trace / "fedpft__02_x.ipynb.jsonl").write_text(json.dumps({"event": "run", "hash": flat_cfg.hash()}) + "\n")
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
