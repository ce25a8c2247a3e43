"""No pickle from a file someone else may have written: every loader of a store's, a cache's or a
weights file's tensors refuses a pickled object without running it.

Each test plants a payload, an object whose unpickling runs ``touch <marker>``, into the file a
loader reads, and rewrites whatever integrity record covers it (the checkpoint's sha256 header,
``summary.json``'s ``files_sha256``), as anyone who can write the folder can. The loader must not run
it (no marker) and must stop with one line naming the file.
"""
from __future__ import annotations

import hashlib
import io
import json
import os
import shlex
import stat
from pathlib import Path

import numpy as np
import pytest
import torch

import fedrepro
from fedrepro.app.cli import main
from fedrepro.app.verify import damaged, verify
from fedrepro.errors import ConfigError, CorruptCacheError
from fedrepro.runs.store import CHECKPOINT_HEADER, RunResult, RunStore, checkpoint_bytes, plain_state
from fedrepro.runs.train import restore
from support import tiny_config


class Payload:
    """Unpickling it runs a shell command that creates ``marker``."""

    def __init__(self, marker: Path):
        self.marker = str(marker)

    def __reduce__(self):
        return (os.system, (f"touch {shlex.quote(self.marker)}",))


class _Stop(Exception):
    pass


def _stop(state):
    raise _Stop()


def _torch_bytes(obj) -> bytes:
    buf = io.BytesIO()
    torch.save(obj, buf)  # torch's own writer: it pickles the payload as it is
    return buf.getvalue()


def _writable(path: Path) -> None:
    for f in [path, *path.iterdir()] if path.is_dir() else [path]:
        f.chmod(f.stat().st_mode | stat.S_IWUSR)


def plant_final_state(run: Path, obj) -> None:
    """Replace a finished run's final_state.pt by ``obj`` and rewrite its sha256 record to match."""
    _writable(run)
    data = _torch_bytes(obj)
    (run / "final_state.pt").write_bytes(data)
    summary = json.loads((run / "summary.json").read_text())
    summary["files_sha256"]["final_state.pt"] = {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}
    (run / "summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True))


def plant_checkpoint(run: Path, obj) -> None:
    """Replace a run's checkpoint.pt by ``obj`` behind a header whose sha256 matches it."""
    body = _torch_bytes(obj)
    (run / "checkpoint.pt").write_bytes(CHECKPOINT_HEADER + hashlib.sha256(body).hexdigest().encode() + b"\n" + body)


def one_line_naming(err: BaseException | str, path: Path) -> None:
    text = str(err)
    assert "\n" not in text.strip(), text
    assert str(path) in text, text


@pytest.fixture
def marker(tmp_path):
    m = tmp_path / "payload-ran"
    yield m
    assert not m.exists(), "the planted payload ran"


@pytest.fixture
def interrupted(tmp_path):
    """A run stopped after its first round: its folder holds config, meta and a checkpoint."""
    cfg = tiny_config(tmp_path, **{"train.rounds": 3})
    with pytest.raises(_Stop):
        fedrepro.run(cfg, on_round_end=_stop)
    path = RunStore(cfg.runs_dir).path(cfg)
    assert (path / "checkpoint.pt").is_file()
    return cfg, path


@pytest.fixture
def finished(tmp_path):
    cfg = tiny_config(tmp_path, **{"train.rounds": 2})
    return cfg, fedrepro.run(cfg).path


def _payload_state(path: Path, marker: Path):
    """A run's real final state with the payload beside its tensors."""
    state = RunResult(path).final_state()
    state["shared"]["extra"] = Payload(marker)
    return state


def test_the_payload_runs_when_unpickled(tmp_path):
    """The test's own check: the payload does run under a plain unpickler (so the tests below can fail)."""
    m = tmp_path / "ran"
    torch.load(io.BytesIO(_torch_bytes({"p": Payload(m)})), weights_only=False)  # unsafe-load-ok: the control
    assert m.exists()


def test_show_of_an_interrupted_run_refuses_a_planted_checkpoint(interrupted, marker, capsys):
    cfg, path = interrupted
    ckpt = torch.load(io.BytesIO((path / "checkpoint.pt").read_bytes()[len(CHECKPOINT_HEADER) + 65:]),
                      weights_only=True)
    ckpt["state"]["round_rows"].append(Payload(marker))
    plant_checkpoint(path, ckpt)
    assert main(["show", cfg.hash(), "--runs-dir", cfg.runs_dir]) == 0
    warnings = [ln for ln in capsys.readouterr().out.splitlines() if "WARNING" in ln]
    assert len(warnings) == 1 and "pickled Python object" in warnings[0], warnings
    one_line_naming(warnings[0], path / "checkpoint.pt")


def test_a_resume_refuses_a_planted_checkpoint_and_runs_again_once_it_is_deleted(interrupted, marker, tmp_path):
    cfg, path = interrupted
    plant_checkpoint(path, {"partition_hash": "x", "state": {"payload": Payload(marker)}})
    with pytest.raises(CorruptCacheError) as err:
        fedrepro.run(cfg)
    one_line_naming(err.value, path / "checkpoint.pt")
    assert "delete it" in str(err.value)
    (path / "checkpoint.pt").unlink()  # what the message says to do
    clean = fedrepro.run(cfg.replace(runs_dir=str(tmp_path / "clean")))
    assert fedrepro.run(cfg).rounds.drop(columns=["time_train_s", "time_eval_s"], errors="ignore").equals(
        clean.rounds.drop(columns=["time_train_s", "time_eval_s"], errors="ignore"))


def test_an_older_checkpoint_with_numpy_objects_is_refused_with_the_fix(interrupted):
    cfg, path = interrupted
    plant_checkpoint(path, {"partition_hash": "x", "state": {"rows": np.arange(3)}})
    with pytest.raises(CorruptCacheError) as err:
        fedrepro.run(cfg)
    one_line_naming(err.value, path / "checkpoint.pt")
    assert "delete it to restart this run from round 0" in str(err.value)


def test_final_state_after_a_deep_verify_refuses_a_planted_payload(finished, marker):
    cfg, path = finished
    plant_final_state(path, _payload_state(path, marker))
    res = RunResult(path).verify(deep=True)  # the rewritten record passes every hash check
    with pytest.raises(CorruptCacheError) as err:
        res.final_state()
    one_line_naming(err.value, path / "final_state.pt")
    # fedrepro verify reports it damaged (and trains nothing), and restore() refuses it too
    assert "pickled Python object" in damaged(path)
    [v] = verify([path], progress=False)
    assert v.outcome == "damaged"
    one_line_naming(v.worst, path / "final_state.pt")
    with pytest.raises(CorruptCacheError):
        restore(path)


def test_the_data_cache_refuses_a_planted_payload(tmp_path, marker):
    from fedrepro.data.cache import load_cache

    cache = tmp_path / "cache.pt"
    cache.write_bytes(_torch_bytes({"x": torch.zeros(2), "payload": Payload(marker)}))
    with pytest.raises(CorruptCacheError) as err:
        load_cache(cache, ["x"])
    one_line_naming(err.value, cache)


def test_pretrained_weights_refuse_a_planted_payload(tmp_path, marker):
    from fedrepro.models.backbones import load_pretrained
    from fedrepro.models.clip import read_state_dict

    weights = tmp_path / "weights.pt"
    weights.write_bytes(_torch_bytes({"weight": torch.zeros(2, 2), "bias": Payload(marker)}))
    with pytest.raises(ConfigError) as err:
        load_pretrained(torch.nn.Linear(2, 2), weights)
    one_line_naming(err.value, weights)
    with pytest.raises(ConfigError) as err:
        read_state_dict(weights)
    one_line_naming(err.value, weights)


def test_the_clip_standin_refuses_a_planted_payload(tmp_path, marker):
    from fedrepro.models.clip import STANDIN_CHECKPOINT, load_standin

    planted = tmp_path / STANDIN_CHECKPOINT.name
    state = torch.load(STANDIN_CHECKPOINT, map_location="cpu", weights_only=True)
    state["payload"] = Payload(marker)
    planted.write_bytes(_torch_bytes(state))
    # Its record beside it, as it is (a planted record would say whatever the planter wanted).
    planted.with_suffix(".json").write_bytes(STANDIN_CHECKPOINT.with_suffix(".json").read_bytes())
    with pytest.raises(CorruptCacheError) as err:
        load_standin(planted)
    one_line_naming(err.value, planted)


def test_a_prefix_donor_with_a_planted_payload_is_passed_over(tmp_path, marker, monkeypatch, caplog):
    from fedrepro.runs.prefix import ENV_SHARE

    cfg = tiny_config(tmp_path, **{"train.rounds": 3})
    donor = fedrepro.run(cfg.replace(**{"train.rounds": 2})).path
    plant_final_state(donor, _payload_state(donor, marker))
    monkeypatch.setenv(ENV_SHARE, "1")
    res = fedrepro.run(cfg)
    assert "started_from" not in res.meta  # trained from round 0, and says so
    assert any(str(donor / "final_state.pt") in r.getMessage() and "pickled" in r.getMessage()
               for r in caplog.records)
    scratch = fedrepro.run(cfg.replace(runs_dir=str(tmp_path / "scratch")))
    assert res.clients.equals(scratch.clients)


def test_a_state_is_written_as_tensors_and_plain_values_only():
    # numpy scalars (e.g. a metric from np.mean) are stored as the Python numbers they equal ...
    state = plain_state({"rows": [{"acc": np.float64(0.25), "n": np.int64(3), "ok": np.bool_(True)}]})
    assert state == {"rows": [{"acc": 0.25, "n": 3, "ok": True}]}
    assert [type(v) for v in state["rows"][0].values()] == [float, int, bool]
    assert torch.load(io.BytesIO(checkpoint_bytes(state)[len(CHECKPOINT_HEADER) + 65:]), weights_only=True) == state
    # ... and anything torch's weights_only loader would refuse is refused as it is written, by where it is
    with pytest.raises(TypeError, match=r"state\['shared'\]\['proto'\] is a numpy.ndarray"):
        plain_state({"shared": {"proto": np.zeros(2)}})
    with pytest.raises(TypeError, match="Payload"):
        checkpoint_bytes({"state": [Payload(Path("never"))]})


def test_a_finished_run_from_a_worker_with_a_planted_state_is_refused_before_it_is_stored(finished, marker,
                                                                                          tmp_path):
    from fedrepro.runs.store import FINISHED_FILES, RunReceiver, read_files

    cfg, path = finished
    plant_final_state(path, _payload_state(path, marker))  # what a Ray worker (or its host) could send
    store = RunStore(tmp_path / "driver")
    with store.claim(cfg):
        with pytest.raises(CorruptCacheError) as err:
            RunReceiver(store).finished(cfg, read_files(path, FINISHED_FILES))
    assert "pickled Python object" in str(err.value) and "\n" not in str(err.value)
    assert [p.name for p in store.root.iterdir()] == [".locks"]
