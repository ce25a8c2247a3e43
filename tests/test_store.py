"""The results store: immutable finished folders, clear errors for corrupt or partial ones."""
import json
import os

import pytest

import fedrepro
from fedrepro.errors import CorruptCacheError
from fedrepro.runs.store import RunStore


def finished(tiny):
    cfg = tiny(**{"train.rounds": 1})
    res = fedrepro.run(cfg)
    return cfg, res.path


def test_finished_folder_layout_and_read_only(tiny):
    cfg, path = finished(tiny)
    assert path.name == cfg.hash()
    assert {p.name for p in path.iterdir()} == {"config.json", "meta.json", "rounds.jsonl", "clients.jsonl",
                                                 "final_state.pt", "summary.json"}
    for p in path.iterdir():
        assert not os.access(p, os.W_OK) or os.geteuid() == 0  # root ignores mode bits
        assert not (p.stat().st_mode & 0o222)
    stored = json.loads((path / "config.json").read_text())
    assert stored["hash"] == cfg.hash() and stored["config"]["seed"] == cfg.seed


def _make_writable(path):
    for p in path.iterdir():
        p.chmod(0o644)


@pytest.mark.parametrize("damage, needle", [
    (lambda p: (p / "summary.json").write_text("{not json"), "summary.json"),
    (lambda p: (p / "rounds.jsonl").unlink(), "rounds.jsonl"),
    (lambda p: (p / "config.json").unlink(), "config.json"),
    (lambda p: (p / "config.json").write_text(json.dumps({"hash": "0000", "config": {}})), "hashes to"),
])
def test_corrupt_run_folder_is_named_in_the_error(tiny, damage, needle):
    cfg, path = finished(tiny)
    _make_writable(path)
    damage(path)
    with pytest.raises(CorruptCacheError, match=needle) as e:
        fedrepro.run(cfg)
    assert str(path) in str(e.value)


def test_corrupt_checkpoint_is_reported_not_ignored(tiny):
    cfg = tiny(**{"train.rounds": 3})

    def stop(state):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        fedrepro.run(cfg, on_round_end=stop)
    path = RunStore(cfg.runs_dir).path(cfg)
    (path / "checkpoint.pt").write_bytes(b"garbage")
    with pytest.raises(CorruptCacheError, match="checkpoint"):
        fedrepro.run(cfg)


def test_no_temporary_files_left_behind(tiny):
    _, path = finished(tiny)
    assert not [p for p in path.iterdir() if p.name.startswith(".")]


def test_restore_gives_the_trained_models_back(tiny):
    from fedrepro.runs.train import restore

    cfg = tiny(**{"method.name": "fedper", "train.rounds": 2})
    res = fedrepro.run(cfg)
    method, clients, state = restore(res, device="cpu")
    accs = [method.evaluate(state["shared"], state["client_states"][c.cid], c, None).acc for c in clients]
    final = res.final_clients().sort_values("client")["acc"].tolist()
    assert accs == final
