"""train.stop_when_flat: rounds by convergence. A run stops at the first evaluated round whose curve
meets the flatness rule (fedrepro.fl.flatness), up to train.rounds; the option is hashed only when on,
and off, a run is the engine's as before."""
from __future__ import annotations

import pytest
from support import interrupt_at, setup

import fedrepro
import fedrepro.fl.engine as engine
from fedrepro.errors import ConfigError
from fedrepro.fl.converge import next_stop, simulate_until_flat
from fedrepro.fl.engine import simulate
from fedrepro.fl.flatness import FLAT_WINDOW

ON = {"train.stop_when_flat": True, "train.flat_window": 2}


def _scripted(monkeypatch, curve):
    """Make the engine's evaluated accuracy at round r be ``curve(r)`` (training is real; only the
    round's score is replaced), so a test fixes the curve the rule reads."""
    real = engine.summarize_round

    def fake(rows):
        return {**real(rows), "acc_mean": float(curve(rows[0]["round"]))}

    monkeypatch.setattr(engine, "summarize_round", fake)


def _without_times(df):
    return df[[c for c in df.columns if not c.startswith("time_")]]


def test_the_option_is_hashed_only_when_on_and_its_window_only_with_it(tiny):
    cfg = tiny()
    train = cfg.hashed_dict()["train"]
    assert "stop_when_flat" not in train and "flat_window" not in train  # old run folders keep their keys
    assert cfg.replace(**{"train.flat_window": 7}).hash() == cfg.hash()  # a window alone changes nothing
    on = cfg.replace(**ON)
    assert on.hash() != cfg.hash() and on.hashed_dict()["train"]["flat_window"] == 2
    assert on.replace(**{"train.flat_window": 3}).hash() != on.hash()
    # flat_from likewise: nothing alone, hashed with the option once set away from 0.
    assert cfg.replace(**{"train.flat_from": 6}).hash() == cfg.hash()
    assert "flat_from" not in on.hashed_dict()["train"]
    assert on.replace(**{"train.flat_from": 3}).hashed_dict()["train"]["flat_from"] == 3
    assert cfg.train.flat_window == FLAT_WINDOW  # the config's default window is the rule's
    with pytest.raises(ConfigError, match="flat_window"):
        cfg.replace(**{"train.flat_window": 1})
    # A first round past the maximum is never reached: named, with the valid range.
    with pytest.raises(ConfigError, match=r"train\.flat_from=.*\[0, train\.rounds="):
        on.replace(**{"train.flat_from": on.train.rounds + 1})
    assert on.replace(**{"train.flat_from": on.train.rounds}).train.flat_from == on.train.rounds
    cfg.replace(**{"train.flat_from": cfg.train.rounds + 1})  # without the option it is not read


def test_next_stop_is_the_next_evaluated_round():
    assert [next_stop(d, 10, 3) for d in (0, 2, 3, 8, 9)] == [3, 3, 6, 9, 10]
    assert [next_stop(d, 4, 1) for d in range(4)] == [1, 2, 3, 4]


def test_a_curve_that_flattens_stops_and_one_that_keeps_rising_does_not(tiny, monkeypatch):
    method, clients, _ = setup(tiny())
    # Flat from the start: the rule can first judge (and is met) at 2 windows of 2 evaluated rounds.
    _scripted(monkeypatch, lambda r: 0.5)
    flat = simulate_until_flat(method, clients, seed=0, rounds=12, window=2, progress=False)
    assert flat.next_round == 4 and [r["round"] for r in flat.round_rows] == [1, 2, 3, 4]
    # Rising by 5 points a round up to round 7, then flat: at round 8 the windows (6, 7) -> (7, 8)
    # still moved 7.5 points; at round 9, (6, 7) -> (8, 9) moved 2.5, within twice the noise that
    # the one step in those four rounds gives (2 × 2.04 points): the rule is met there.
    method, clients, _ = setup(tiny())
    _scripted(monkeypatch, lambda r: min(r, 7) / 20)
    late = simulate_until_flat(method, clients, seed=0, rounds=30, window=2, progress=False)
    assert late.next_round == 9
    # Rising by a point a round, noiselessly: never flat, so it trains to the maximum.
    method, clients, _ = setup(tiny())
    _scripted(monkeypatch, lambda r: r / 100)
    rising = simulate_until_flat(method, clients, seed=0, rounds=12, window=2, progress=False)
    assert rising.next_round == 12
    # With eval_every, the rule reads evaluated rounds only and stops on one.
    method, clients, _ = setup(tiny())
    _scripted(monkeypatch, lambda r: 0.5)
    sparse = simulate_until_flat(method, clients, seed=0, rounds=20, window=2, eval_every=3, progress=False)
    assert sparse.next_round == 12  # the 4th evaluated round (3, 6, 9, 12)
    # flat_from: a curve flat from the start is trained to that round, then stops at once.
    method, clients, _ = setup(tiny())
    _scripted(monkeypatch, lambda r: 0.5)
    held = simulate_until_flat(method, clients, seed=0, rounds=12, window=2, first=7, progress=False)
    assert held.next_round == 7


def test_a_run_that_stops_early_holds_the_first_rounds_of_the_same_run_without_the_rule(tiny, monkeypatch):
    # A learning rate too small to move the model: the curve is flat from the start.
    cfg = tiny(**{"train.rounds": 10, "train.lr": 1e-9})
    off = fedrepro.run(cfg)
    on = fedrepro.run(cfg.replace(**ON))
    assert on.summary["rounds"] == 4 and on.summary["stopped_early"] and on.summary["max_rounds"] == 10
    assert "stopped_early" not in off.summary and off.summary["rounds"] == 10
    # Bit for bit the first 4 rounds of the run trained to 10, every round and client metric.
    cut = _without_times(off.rounds)[off.rounds["round"] <= 4].reset_index(drop=True)
    assert _without_times(on.rounds).equals(cut)
    assert on.clients.equals(off.clients[off.clients["round"] <= 4].reset_index(drop=True))
    # "final" is the last evaluated round, the stop.
    assert on.summary["final_acc_mean"] == on.rounds["acc_mean"].iloc[-1] == off.rounds["acc_mean"].iloc[3]


def test_off_the_run_is_the_engines_as_before(tiny):
    cfg = tiny(**{"train.rounds": 4})
    res = fedrepro.run(cfg)
    method, clients, state = setup(cfg)
    direct = simulate(method, clients, seed=cfg.seed, rounds=4, state=state, progress=False)
    assert res.rounds["acc_mean"].tolist() == [r["acc_mean"] for r in direct.round_rows]
    assert res.rounds["train_loss"].tolist() == [r["train_loss"] for r in direct.round_rows]
    # And with the option on, a run that does not flatten is that same run.
    on = fedrepro.run(cfg.replace(**{"train.stop_when_flat": True}))  # window 5: 4 rounds cannot flatten
    assert not on.summary["stopped_early"] and _without_times(on.rounds).equals(_without_times(res.rounds))


def test_a_run_that_stops_when_flat_resumes_bit_for_bit(tiny, tmp_path):
    cfg = tiny(**{"train.rounds": 10, "train.lr": 1e-9, **ON})
    full = fedrepro.run(cfg.replace(runs_dir=str(tmp_path / "full")))
    cut = cfg.replace(runs_dir=str(tmp_path / "cut"))
    interrupt_at(cut, 3)
    resumed = fedrepro.run(cut)
    assert resumed.summary["rounds"] == full.summary["rounds"] == 4
    assert _without_times(resumed.rounds).equals(_without_times(full.rounds))


def test_the_rule_is_part_of_the_code_of_a_run_that_stops_by_it_only(tiny):
    from fedrepro.runs import fingerprint

    off, on = fingerprint.code_files(tiny()), fingerprint.code_files(tiny(**ON))
    assert "fedrepro/fl/engine.py" in off  # the fingerprint sees the engine at all
    assert {"fedrepro/fl/converge.py", "fedrepro/fl/flatness.py"} <= set(on)
    assert not {"fedrepro/fl/converge.py", "fedrepro/fl/flatness.py"} & set(off)  # stored runs stay fresh


def test_a_method_whose_schedule_reads_the_rounds_trains_them_all(tiny):
    from fedrepro.runs.prefix import reads_total_rounds

    # FedSoup's soup phase starts at a share of train.rounds: stopping early would cut the phase.
    cfg = tiny(**{"train.rounds": 10, "train.lr": 1e-9, "method.name": "fedsoup", **ON})
    assert reads_total_rounds(fedrepro.methods.METHODS.get("fedsoup"))
    res = fedrepro.run(cfg)
    assert res.summary["rounds"] == 10 and not res.summary["stopped_early"]
    assert res.summary["flat_rule_applied"] is False
    assert fedrepro.run(tiny(**{"train.rounds": 10, "train.lr": 1e-9, **ON})).summary["flat_rule_applied"] is True
