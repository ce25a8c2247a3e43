"""FEDREPRO_SHARE_PREFIX: a run starts from a stored run of its config with fewer rounds, and ends
bit for bit where training it from scratch ends."""
from __future__ import annotations

import pytest
import torch

import fedrepro
from fedrepro.runs.prefix import ENV_SHARE, reads_total_rounds
from support import setup


def _without_times(df):
    return df[[c for c in df.columns if not c.startswith("time_")]]


def _same_state(a, b):
    if isinstance(a, torch.Tensor):
        return torch.equal(a, b)
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same_state(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same_state(x, y) for x, y in zip(a, b))
    return a == b


def _assert_same_run(res, scratch):
    """Bit for bit the run trained from scratch: every round and client metric, the final state and
    the summary, all but their timings."""
    assert _without_times(res.rounds).equals(_without_times(scratch.rounds))
    assert res.clients.equals(scratch.clients)
    assert _same_state(res.final_state(), scratch.final_state())
    assert {k: v for k, v in res.summary.items() if not k.startswith("time_")} == \
        {k: v for k, v in scratch.summary.items() if not k.startswith("time_")}


def test_a_longer_run_starts_from_the_shorter_one_and_ends_as_from_scratch(tiny, tmp_path, monkeypatch):
    cfg = tiny(**{"train.rounds": 5, **{"model.name": "cnn", "model.args": {"width": 4, "feature_dim": 16,
                                                                            "norm": "bn"}}})
    scratch = fedrepro.run(cfg.replace(runs_dir=str(tmp_path / "scratch")))
    shared = cfg.replace(runs_dir=str(tmp_path / "shared"))
    fedrepro.run(shared.replace(**{"train.rounds": 2}))
    fedrepro.run(shared.replace(**{"train.rounds": 3}))
    monkeypatch.setenv(ENV_SHARE, "1")
    res = fedrepro.run(shared)
    assert res.meta["started_from"] == {"run": shared.replace(**{"train.rounds": 3}).hash(), "round": 3}
    _assert_same_run(res, scratch)


def test_off_or_where_a_prefix_is_not_one_a_run_starts_from_round_0(tiny, monkeypatch):
    cfg = tiny(**{"train.rounds": 4})
    fedrepro.run(cfg.replace(**{"train.rounds": 2}))
    assert "started_from" not in fedrepro.run(cfg).meta  # off by default
    monkeypatch.setenv(ENV_SHARE, "1")
    # Evaluated every 3 rounds: the 2-round run holds an evaluation at round 2 the longer one lacks.
    sparse = cfg.replace(**{"train.eval_every": 3, "train.rounds": 6})
    fedrepro.run(sparse.replace(**{"train.rounds": 2}))
    assert "started_from" not in fedrepro.run(sparse).meta
    # FedSoup's soup phase begins at a share of train.rounds: its rounds depend on the run's length.
    soup = cfg.replace(**{"method.name": "fedsoup"})
    assert reads_total_rounds(setup(soup)[0]) and not reads_total_rounds(setup(cfg)[0])
    fedrepro.run(soup.replace(**{"train.rounds": 2}))
    assert "started_from" not in fedrepro.run(soup).meta


def test_a_run_that_stops_when_flat_starts_from_the_fixed_run_up_to_flat_from(tiny, tmp_path, monkeypatch):
    # A rate too small to move the model: flat from the start, so the rule stops a run at flat_from.
    cfg = tiny(**{"train.rounds": 10, "train.lr": 1e-9, "train.stop_when_flat": True, "train.flat_window": 2,
                  "train.flat_from": 6})
    scratch = fedrepro.run(cfg.replace(runs_dir=str(tmp_path / "scratch")))
    assert scratch.summary["rounds"] == 6 and scratch.summary["stopped_early"]
    shared = cfg.replace(runs_dir=str(tmp_path / "shared"))
    fixed = shared.replace(**{"train.stop_when_flat": False})
    fedrepro.run(fixed.replace(**{"train.rounds": 7}))  # past flat_from: the rule would have stopped before
    fedrepro.run(fixed.replace(**{"train.rounds": 5}))
    monkeypatch.setenv(ENV_SHARE, "1")
    res = fedrepro.run(shared)
    assert res.meta["started_from"] == {"run": fixed.replace(**{"train.rounds": 5}).hash(), "round": 5}
    _assert_same_run(res, scratch)
    # A fixed run of exactly flat_from rounds whose curve is flat there: the run ends where it ended.
    at = cfg.replace(runs_dir=str(tmp_path / "at"))
    fedrepro.run(at.replace(**{"train.stop_when_flat": False, "train.rounds": 6}))
    ended = fedrepro.run(at)
    assert ended.meta["started_from"]["round"] == 6 and ended.summary["rounds"] == 6
    assert _without_times(ended.rounds).equals(_without_times(scratch.rounds))


def test_a_run_without_the_rule_starts_from_its_twin_that_stopped_when_flat(tiny, tmp_path, monkeypatch):
    # The same config with the rule on stopped at flat_from; the full budget trains on from there.
    cfg = tiny(**{"train.rounds": 8, "train.lr": 1e-9, "train.flat_window": 2, "train.flat_from": 4})
    scratch = fedrepro.run(cfg.replace(runs_dir=str(tmp_path / "scratch")))
    assert scratch.summary["rounds"] == 8
    shared = cfg.replace(runs_dir=str(tmp_path / "shared"))
    twin = fedrepro.run(shared.replace(**{"train.stop_when_flat": True}))
    assert twin.summary["rounds"] == 4 and twin.summary["stopped_early"]
    fedrepro.run(shared.replace(**{"train.rounds": 3}))  # shorter than the twin: not chosen
    monkeypatch.setenv(ENV_SHARE, "1")
    res = fedrepro.run(shared)
    assert res.meta["started_from"] == {"run": shared.replace(**{"train.stop_when_flat": True}).hash(), "round": 4}
    _assert_same_run(res, scratch)


def test_a_twin_that_trained_every_round_or_another_budget_is_no_donor(tiny, tmp_path, monkeypatch):
    # The twin reached the last round (flat_from = rounds): it did not stop early, so no donor.
    cfg = tiny(**{"train.rounds": 4, "train.lr": 1e-9, "train.flat_window": 2, "train.flat_from": 4,
                  "runs_dir": str(tmp_path)})
    twin = fedrepro.run(cfg.replace(**{"train.stop_when_flat": True}))
    assert twin.summary["rounds"] == 4 and not twin.summary["stopped_early"]
    monkeypatch.setenv(ENV_SHARE, "1")
    assert "started_from" not in fedrepro.run(cfg).meta
    # A twin with another budget is another config: a run of 6 rounds does not start from it.
    other = cfg.replace(runs_dir=str(tmp_path / "other"))
    assert fedrepro.run(other.replace(**{"train.stop_when_flat": True, "train.rounds": 5})).summary["stopped_early"]
    assert "started_from" not in fedrepro.run(other.replace(**{"train.rounds": 6})).meta


def test_a_table_that_reads_the_final_models_runs_the_full_budget_it_lists(tiny):
    from pathlib import Path

    from fedrepro.papers.tables import Rows, TableDef

    base = tiny(**{"train.rounds": 3, "train.stop_when_flat": True, "train.flat_window": 2, "train.flat_from": 2})
    for final in (True, False):
        table = TableDef("tour", "probed", "a probed table", [Rows({"method.name": ["fedavg", "local"]})],
                         final_models=final)
        listed = table.configs("smoke", seeds=[0], base=base)
        assert [c.train.stop_when_flat for c in listed] == [not final] * 2
        results = table.run("smoke", seeds=[0], base=base, progress=False)
        assert [Path(p).name for p in results["path"]] == [c.hash() for c in listed]


def test_the_pool_trains_a_run_after_the_runs_that_may_be_its_prefix(tiny, tmp_path, monkeypatch):
    from fedrepro.execute.local import run_pool
    from fedrepro.runs.prefix import waits_for
    from fedrepro.runs.store import RunStore

    cfg = tiny(**{"train.rounds": 8, "train.lr": 1e-9, "train.flat_window": 2, "train.flat_from": 4,
                  "runs_dir": str(tmp_path)})
    twin, shorter = cfg.replace(**{"train.stop_when_flat": True}), cfg.replace(**{"train.rounds": 2})
    runs = {c.hash(): c for c in (cfg, twin, shorter)}
    assert waits_for(runs) == {}  # off by default
    monkeypatch.setenv(ENV_SHARE, "1")
    waits = waits_for(runs)
    assert waits == {cfg.hash(): frozenset({twin.hash(), shorter.hash()}), twin.hash(): frozenset({shorter.hash()})}
    # Longest first would start the full run at once beside the twin; it waits, then starts from the twin.
    assert not run_pool(runs, workers=2, progress=False, after=waits).failed
    store = RunStore(str(tmp_path))
    assert store.load(twin).meta["started_from"] == {"run": shorter.hash(), "round": 2}
    assert store.load(cfg).meta["started_from"] == {"run": twin.hash(), "round": 4}


def test_a_table_that_reads_the_final_models_refuses_the_early_stop_asked_of_it(tiny):
    from fedrepro.errors import ConfigError
    from fedrepro.papers import fedpft

    with pytest.raises(ConfigError, match="train.stop_when_flat=True for table fedpft/probe.*valid: False"):
        fedpft.TABLES["probe"].configs("laptop", train__stop_when_flat=True)
    fixed = fedpft.TABLES["probe"].configs("laptop", train__stop_when_flat=False)
    assert fixed and not any(c.train.stop_when_flat for c in fixed)
