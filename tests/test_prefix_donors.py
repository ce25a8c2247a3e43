"""A prefix donor (FEDREPRO_SHARE_PREFIX) is input from whoever wrote the store: it is checked, and its
state read, before the new run's folder is published; a damaged one is passed over with a warning,
and the run's meta never names a donor it did not use. Finding donors costs the same whatever
``train.rounds`` is. ``fedrepro verify`` compares the final state too, so a swapped one is found."""
from __future__ import annotations

import logging
import shutil
import stat
import time

import pytest

import fedrepro
from fedrepro.app.verify import compare_states, verify
from fedrepro.methods import METHODS
from fedrepro.runs import prefix
from fedrepro.runs.prefix import ENV_SHARE
from fedrepro.runs.store import RunResult, RunStore
from support import tiny_config
from test_payloads import plant_final_state


def _without_times(df):
    return df[[c for c in df.columns if not c.startswith("time_")]]


@pytest.fixture
def stored(tmp_path):
    """``(cfg, donor path, path of another run of the same model)``: cfg trains 3 rounds; its 2-round
    run is stored, and the 2-round run of another seed (its final state has the same size)."""
    cfg = tiny_config(tmp_path, **{"train.rounds": 3})
    donor = fedrepro.run(cfg.replace(**{"train.rounds": 2})).path
    other = fedrepro.run(cfg.replace(seed=1, **{"train.rounds": 2})).path
    return cfg, donor, other


def test_a_donor_whose_final_state_was_swapped_is_passed_over_and_not_named(stored, tmp_path, monkeypatch, caplog):
    cfg, donor, other = stored
    f = donor / "final_state.pt"
    assert f.stat().st_size == (other / "final_state.pt").stat().st_size  # a size check cannot tell
    f.chmod(f.stat().st_mode | stat.S_IWUSR)
    shutil.copyfile(other / "final_state.pt", f)
    monkeypatch.setenv(ENV_SHARE, "1")
    with caplog.at_level(logging.WARNING, logger="fedrepro"):
        res = fedrepro.run(cfg)
    assert "started_from" not in res.meta  # trained from round 0: the meta names no donor
    assert any(str(f) in r.getMessage() and "sha256" in r.getMessage() for r in caplog.records), caplog.text
    scratch = fedrepro.run(cfg.replace(runs_dir=str(tmp_path / "scratch")))
    assert _without_times(res.rounds).equals(_without_times(scratch.rounds))
    assert res.clients.equals(scratch.clients)


def test_a_damaged_donor_leaves_the_next_longest_one(tmp_path, monkeypatch, caplog):
    cfg = tiny_config(tmp_path, **{"train.rounds": 4})
    one = fedrepro.run(cfg.replace(**{"train.rounds": 1}))
    two = fedrepro.run(cfg.replace(**{"train.rounds": 2})).path
    (two / "clients.jsonl").chmod(0o644)
    (two / "clients.jsonl").write_text("{}\n")  # damaged (its recorded sha256 no longer matches)
    monkeypatch.setenv(ENV_SHARE, "1")
    with caplog.at_level(logging.WARNING, logger="fedrepro"):
        res = fedrepro.run(cfg)
    assert res.meta["started_from"] == {"run": one.summary["config_hash"], "round": 1}
    assert str(two / "clients.jsonl") in caplog.text


def test_verify_compares_the_final_state_and_finds_a_swapped_one(stored):
    cfg, donor, other = stored
    assert compare_states(donor, donor) == ("identical", 0.0, "")
    # The other seed's state, with the record rewritten to match: every hash check passes.
    plant_final_state(donor, RunResult(other).final_state())
    RunResult(donor).verify(deep=True)
    assert compare_states(donor, other)[0] == "identical"  # it is the other run's state now
    [v] = verify([donor], progress=False)  # trained again, compared with what it holds
    assert v.outcome == "different" and v.worst.startswith("final_state.pt"), v


def test_finding_donors_does_not_grow_with_the_rounds(tmp_path, monkeypatch):
    """A million rounds used to list a million candidate configs (about an hour) before round 1."""
    cfg = tiny_config(tmp_path, **{"train.rounds": 2})
    short = fedrepro.run(cfg)
    big = cfg.replace(**{"train.rounds": 10**6})
    method = METHODS.get(cfg.method.name)
    t0 = time.perf_counter()
    found = prefix.donor(big, RunStore(cfg.runs_dir), method, short.meta["partition_hash"], lambda c: False)
    monkeypatch.setenv(ENV_SHARE, "1")
    waits = prefix.waits_for({big.hash(): big, cfg.hash(): cfg, cfg.replace(seed=3).hash(): cfg.replace(seed=3)})
    elapsed = time.perf_counter() - t0
    assert found is not None and found[0].path == short.path and found[1].next_round == 2
    assert waits == {big.hash(): frozenset({cfg.hash()})}
    assert elapsed < 10, f"{elapsed:.1f} s"
