"""Optional TensorBoard logging (fedrepro.runs.tensorboard): off by default, the switches that turn it on,
what it writes, and that a run's stored numbers do not depend on it."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

import fedrepro
from fedrepro.env import settings
from fedrepro.app.cli import main
from fedrepro.errors import ConfigError
from fedrepro.runs.tensorboard import TENSORBOARD_PIN, run_dir_name
from support import tiny_config

pytest.importorskip("tensorboard", reason="tensorboard is not installed (pip install -r requirements.txt)")
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def _off(monkeypatch):
    monkeypatch.delenv(settings.ENV_TENSORBOARD, raising=False)
    settings.configure(tensorboard=None)
    yield
    settings.configure(tensorboard=None)


def _cfg(tmp_path, **overrides):
    return tiny_config(tmp_path, **{"train.global_eval": True, **overrides})


def _event_files(folder: Path) -> list[Path]:
    return sorted(folder.rglob("events.out.tfevents.*"))


def _scalars(folder: Path) -> dict[str, list[tuple[int, float]]]:
    acc = EventAccumulator(str(folder), size_guidance={"scalars": 0, "histograms": 0})
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def _assert_log_equals_stored(folder: Path, res) -> None:
    """Every numeric column of the stored round records, once per round, equal to the stored value
    (as float32: a TensorBoard scalar is one). The store writes NaN as null (a held-out mean with no
    held-out clients), which the log holds as NaN."""
    rows = [json.loads(line) for line in (res.path / "rounds.jsonl").read_text().splitlines()]
    keys = {k for r in rows for k in r} - {"round"}
    columns = sorted(k for k in keys if all(r.get(k) is None or isinstance(r[k], (int, float))
                                            and not isinstance(r[k], bool) for r in rows))
    logged = _scalars(folder)
    assert sorted(logged) == columns
    for c in columns:
        assert [s for s, _ in logged[c]] == [r["round"] for r in rows if c in r], c
        stored = np.array([np.nan if r[c] is None else r[c] for r in rows if c in r], dtype=np.float32)
        np.testing.assert_array_equal(np.array([v for _, v in logged[c]], dtype=np.float32), stored, err_msg=c)


def test_off_by_default_writes_nothing_and_needs_no_package(tmp_path, monkeypatch):
    assert settings.tensorboard_dir() is None
    monkeypatch.setitem(sys.modules, "tensorboard", None)  # as if not installed: off must not care
    res = fedrepro.run(_cfg(tmp_path))
    assert res.summary["rounds"] == 3
    assert not _event_files(tmp_path)


def test_on_writes_the_stored_rounds_with_the_round_as_step(tmp_path):
    settings.configure(tensorboard=tmp_path / "tb")
    res = fedrepro.run(_cfg(tmp_path))
    folder = tmp_path / "tb" / run_dir_name(res.config)
    assert folder.name.endswith(res.config.hash()) and folder.name.startswith("fedavg-synthetic-s0-")
    assert len(_event_files(tmp_path / "tb")) == 1
    _assert_log_equals_stored(folder, res)
    assert {"acc_mean", "acc_weighted", "train_loss", "global_acc", "f1_mean"} <= set(_scalars(folder))
    acc = EventAccumulator(str(folder), size_guidance={"histograms": 0})
    acc.Reload()
    hist = acc.Histograms("clients/acc")
    assert [h.step for h in hist] == [1, 2, 3]
    last = res.clients[(res.clients["round"] == 3) & ~res.clients["held_out"]]
    assert hist[-1].histogram_value.num == len(last)


def test_stored_run_is_identical_with_and_without_logging(tmp_path):
    plain = fedrepro.run(_cfg(tmp_path / "plain"))
    settings.configure(tensorboard=tmp_path / "tb")
    logged = fedrepro.run(_cfg(tmp_path / "logged"))
    assert _event_files(tmp_path / "tb") and plain.config.hash() == logged.config.hash()
    assert sorted(p.name for p in plain.path.iterdir()) == sorted(p.name for p in logged.path.iterdir())

    def rows(res, name):  # wall-clock times differ between any two runs; every other value must not
        lines = (res.path / name).read_text().splitlines()
        return [{k: v for k, v in json.loads(line).items() if not k.startswith("time_")} for line in lines]

    assert rows(plain, "rounds.jsonl") == rows(logged, "rounds.jsonl")
    assert (plain.path / "clients.jsonl").read_bytes() == (logged.path / "clients.jsonl").read_bytes()
    _assert_same(plain.final_state(), logged.final_state())


def _assert_same(a, b) -> None:
    assert type(a) is type(b)
    if isinstance(a, torch.Tensor):
        assert torch.equal(a, b)
    elif isinstance(a, dict):
        assert a.keys() == b.keys()
        for k in a:
            _assert_same(a[k], b[k])
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _assert_same(x, y)
    else:
        assert a == b


def test_a_reused_run_writes_nothing(tmp_path):
    fedrepro.run(_cfg(tmp_path))
    settings.configure(tensorboard=tmp_path / "tb")
    fedrepro.run(_cfg(tmp_path))
    assert not _event_files(tmp_path / "tb")


class _Stop(Exception):
    pass


def test_a_resumed_run_shows_each_round_once_as_stored(tmp_path):
    """The interrupted process logged round 3, past its last checkpoint (round 2); the resumed one
    trains round 3 again (other wall-clock times), and TensorBoard keeps only the resumed values."""
    settings.configure(tensorboard=tmp_path / "tb")
    cfg = _cfg(tmp_path, **{"train.rounds": 4, "train.checkpoint_every": 2})

    def stop_after_round_3(state):
        if state.next_round == 3:
            raise _Stop

    with pytest.raises(_Stop):
        fedrepro.run(cfg, on_round_end=stop_after_round_3)
    res = fedrepro.run(cfg)
    assert len(_event_files(tmp_path / "tb")) == 2
    _assert_log_equals_stored(tmp_path / "tb" / run_dir_name(cfg), res)


def test_the_environment_variable_turns_it_on(tmp_path, monkeypatch):
    monkeypatch.setenv(settings.ENV_TENSORBOARD, str(tmp_path / "tb"))
    res = fedrepro.run(_cfg(tmp_path))
    _assert_log_equals_stored(tmp_path / "tb" / run_dir_name(res.config), res)


def test_the_setting_reaches_spawned_workers(tmp_path):
    settings.configure(tensorboard=tmp_path / "tb")
    assert settings.child_env({})[settings.ENV_TENSORBOARD] == str(tmp_path / "tb")
    code = f"import os; print(os.environ.get({settings.ENV_TENSORBOARD!r}))"
    with settings.for_children():
        seen = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert seen.strip() == str(tmp_path / "tb")
    assert settings.ENV_TENSORBOARD not in os.environ  # put back as it was


def test_a_pool_worker_logs_the_runs_it_trains(tmp_path):
    from fedrepro.execute.local import run_pool

    settings.configure(tensorboard=tmp_path / "tb")  # the setting only: workers see it through the env
    cfg = _cfg(tmp_path)
    report = run_pool([cfg], workers=1, progress=False)
    assert not report.failed
    assert _event_files(tmp_path / "tb" / run_dir_name(cfg))


def _config_file(tmp_path) -> Path:
    d = _cfg(tmp_path).to_dict()
    f = tmp_path / "tiny.yaml"
    f.write_text(yaml.safe_dump({k: d[k] for k in ("runs_dir", "progress", "data", "model", "train")}))
    return f


def test_cli_run_flag(tmp_path, capsys):
    assert main(["run", "--profile", "smoke", "--config", str(_config_file(tmp_path)),
                 "--tensorboard", str(tmp_path / "tb")]) == 0
    cfg = _cfg(tmp_path)
    assert capsys.readouterr().out.count(cfg.hash())  # the CLI trained the config the log is named by
    _assert_log_equals_stored(tmp_path / "tb" / run_dir_name(cfg), fedrepro.run(cfg))


def test_cli_reproduce_flag_sets_it_for_the_pass(tmp_path, monkeypatch):
    import fedrepro.app.cli

    seen = {}
    monkeypatch.setattr(fedrepro.app.cli, "reproduce",  # the name the CLI calls
                        lambda *a, **k: seen.setdefault("dir", settings.tensorboard_dir()))
    assert main(["reproduce", "--profile", "smoke", "--tensorboard", str(tmp_path / "tb")]) == 0
    assert seen["dir"] == (tmp_path / "tb", "fedrepro.env.settings.configure(tensorboard=...)")


@pytest.mark.parametrize("how", ["setting", "env", "cli"])
def test_a_file_as_the_folder_is_a_clear_error_before_any_write(tmp_path, monkeypatch, capsys, how):
    bad = tmp_path / "a-file"
    bad.write_text("")
    cfg = _cfg(tmp_path)
    if how == "cli":
        assert main(["run", "--profile", "smoke", "--config", str(_config_file(tmp_path)),
                     "--tensorboard", str(bad)]) == 2
        err = capsys.readouterr().err
        assert "--tensorboard" in err and "is a file" in err
    else:
        if how == "setting":
            settings.configure(tensorboard=bad)
        else:
            monkeypatch.setenv(settings.ENV_TENSORBOARD, str(bad))
        name = "configure(tensorboard=...)" if how == "setting" else "$FEDREPRO_TENSORBOARD"
        with pytest.raises(ConfigError, match=rf"TensorBoard logs .*chosen by .*{re.escape(name)}.* is a file"):
            fedrepro.run(cfg)
    assert not (tmp_path / "runs" / cfg.hash()).exists()


def test_missing_package_is_a_clear_error_when_asked_for(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "tensorboard", None)
    settings.configure(tensorboard=tmp_path / "tb")
    with pytest.raises(ConfigError, match=rf"tensorboard=.*pip install tensorboard=={TENSORBOARD_PIN}"):
        fedrepro.run(_cfg(tmp_path))


def test_bad_setting_values():
    with pytest.raises(ConfigError, match="tensorboard=5; valid: a folder path"):
        settings.configure(tensorboard=5)
    with pytest.raises(ConfigError, match="tensorboard=''"):
        settings.configure(tensorboard="")


def test_the_pin_is_requirements_txt_s():
    pins = dict(line.split("==") for line in (ROOT / "requirements.txt").read_text().splitlines()
                if line.startswith("tensorboard=="))
    assert pins == {"tensorboard": TENSORBOARD_PIN}
    assert f"tensorboard=={TENSORBOARD_PIN}" in (ROOT / "constraints.txt").read_text().splitlines()
