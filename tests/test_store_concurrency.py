"""Two processes on the same config: one trains, the other waits, reuses or stops, as asked."""
from __future__ import annotations

import json
import multiprocessing as mp
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

import fedrepro
from fedrepro.errors import RunBusyError
from fedrepro.runs.store import RunStore

ROUNDS = 3


def _child(cfg_dict: dict, on_busy: str, round_sleep: float, report: str) -> None:
    """A launcher in its own process; it reports how many rounds it trained itself."""
    trained = []

    def slow(state):
        trained.append(state.next_round)
        time.sleep(round_sleep)

    try:
        res = fedrepro.run(fedrepro.config.from_dict(cfg_dict), on_busy=on_busy, on_round_end=slow)
        out = {"trained": len(trained), "path": str(res.path), "final": res.summary["final_acc_mean"]}
    except RunBusyError as e:
        out = {"busy": str(e)}
    Path(report).write_text(json.dumps(out))


def _launch(cfg, report: Path, on_busy="wait", round_sleep=0.3):
    # fork: both launchers start at once, without re-importing torch
    p = mp.get_context("fork").Process(target=_child, args=(cfg.to_dict(), on_busy, round_sleep, str(report)))
    p.start()
    return p


def _wait_until(pred, timeout=60.0):
    end = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.02)


def _holding(cfg, proc) -> bool:
    """Whether ``proc`` holds the run's lock (the lock file names its holder)."""
    f = Path(cfg.runs_dir) / ".locks" / f"{cfg.hash()}.lock"
    return f.is_file() and f.read_text().startswith(f"pid {proc.pid} ")


def _rounds(res):
    return res.rounds.drop(columns=["time_train_s", "time_eval_s"])


@pytest.fixture
def cfg_and_ref(tiny, tmp_path):
    cfg = tiny(**{"train.rounds": ROUNDS})
    ref = fedrepro.run(cfg.replace(runs_dir=str(tmp_path / "ref")))
    return cfg, ref


def test_two_launchers_at_once_train_once_and_agree(cfg_and_ref, tmp_path):
    cfg, ref = cfg_and_ref
    a, b = _launch(cfg, tmp_path / "a.json"), _launch(cfg, tmp_path / "b.json")
    a.join(120), b.join(120)
    assert a.exitcode == 0 and b.exitcode == 0
    ra, rb = (json.loads((tmp_path / n).read_text()) for n in ("a.json", "b.json"))
    assert sorted([ra["trained"], rb["trained"]]) == [0, ROUNDS]  # one trained, the other reused
    assert ra["path"] == rb["path"] and ra["final"] == rb["final"]
    res = RunStore(cfg.runs_dir).load(cfg)
    pd.testing.assert_frame_equal(_rounds(res), _rounds(ref), check_exact=True)
    assert res.meta["torch_threads"] == ref.meta["torch_threads"]


def test_error_mode_stops_at_once_and_leaves_the_run_alone(cfg_and_ref, tmp_path):
    cfg, ref = cfg_and_ref
    a = _launch(cfg, tmp_path / "a.json")
    _wait_until(lambda: _holding(cfg, a))
    t0 = time.monotonic()
    with pytest.raises(RunBusyError, match=f"pid {a.pid}") as e:
        fedrepro.run(cfg, on_busy="error")
    assert time.monotonic() - t0 < 10 and cfg.hash() in str(e.value) and "on_busy" in str(e.value)
    a.join(120)
    assert a.exitcode == 0 and json.loads((tmp_path / "a.json").read_text())["trained"] == ROUNDS
    pd.testing.assert_frame_equal(_rounds(RunStore(cfg.runs_dir).load(cfg)), _rounds(ref), check_exact=True)


def test_reuse_mode_waits_for_the_result_and_never_trains(cfg_and_ref, tmp_path):
    cfg, ref = cfg_and_ref
    a = _launch(cfg, tmp_path / "a.json")
    _wait_until(lambda: _holding(cfg, a))
    trained = []
    res = fedrepro.run(cfg, on_busy="reuse", on_round_end=lambda s: trained.append(s.next_round))
    a.join(120)
    assert trained == [] and a.exitcode == 0
    pd.testing.assert_frame_equal(_rounds(res), _rounds(ref), check_exact=True)


def _kill_after_first_checkpoint(cfg, proc) -> threading.Thread:
    ckpt = RunStore(cfg.runs_dir).path(cfg) / "checkpoint.pt"

    def kill():
        _wait_until(ckpt.exists)
        proc.kill()

    t = threading.Thread(target=kill)
    t.start()
    return t


def test_waiting_launcher_resumes_a_run_whose_writer_died(cfg_and_ref, tmp_path):
    cfg, ref = cfg_and_ref
    a = _launch(cfg, tmp_path / "a.json", round_sleep=1.0)
    _wait_until(lambda: _holding(cfg, a))
    killer = _kill_after_first_checkpoint(cfg, a)
    trained = []
    res = fedrepro.run(cfg, on_busy="wait", on_round_end=lambda s: trained.append(s.next_round))
    killer.join()
    a.join()
    assert a.exitcode != 0 and 0 < len(trained) < ROUNDS  # resumed from the dead writer's checkpoint
    pd.testing.assert_frame_equal(_rounds(res), _rounds(ref), check_exact=True)


def test_reuse_mode_reports_a_writer_that_died(cfg_and_ref, tmp_path):
    cfg, _ = cfg_and_ref
    a = _launch(cfg, tmp_path / "a.json", round_sleep=1.0)
    _wait_until(lambda: _holding(cfg, a))
    killer = _kill_after_first_checkpoint(cfg, a)
    with pytest.raises(RunBusyError, match="stopped before finishing"):
        fedrepro.run(cfg, on_busy="reuse")
    killer.join()
    a.join()
    assert RunStore(cfg.runs_dir).status(cfg) == "partial"  # still resumable


def test_on_busy_must_be_a_known_mode(tiny):
    from fedrepro.errors import ConfigError

    with pytest.raises(ConfigError, match="on_busy"):
        fedrepro.run(tiny(), on_busy="later")
