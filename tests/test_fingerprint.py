"""Code fingerprints: which modules a run depends on, and a stored run reported stale when one of
them changes (retrained, kept or refused, as asked)."""
from __future__ import annotations

import json

import pytest

from fedrepro import fingerprint
from fedrepro.errors import ConfigError, StaleRunError
from fedrepro.experiment import run
from fedrepro.store import RunResult, RunStore

FEDAVG = "fedrepro/methods/fedavg.py"


def test_a_run_depends_on_its_own_method_model_data_and_the_engine(tiny):
    files = fingerprint.code_files(tiny())
    assert {FEDAVG, "fedrepro/fl/engine.py", "fedrepro/pipeline.py", "fedrepro/data/partition.py"} <= set(files)
    assert not {"fedrepro/store.py", "fedrepro/experiment.py", "fedrepro/methods/fedpft.py"} & set(files)
    assert not [f for f in files if f.endswith("__init__.py")]  # registries: adding a method stales nothing
    assert "fedrepro/methods/fedpft.py" in fingerprint.code_files(tiny(**{"method.name": "fedpft"}))


def test_comments_and_docstrings_do_not_change_a_digest_but_code_does():
    code = 'def f(x):\n    """Doc."""\n    return x + 1\n'
    same = '# why\ndef f(x):\n    """Other doc."""\n\n    return x + 1  # note\n'
    assert fingerprint.source_digest(code) == fingerprint.source_digest(same)
    assert fingerprint.source_digest(code) != fingerprint.source_digest(code.replace("+ 1", "+ 2"))


@pytest.fixture
def edited_fedavg(monkeypatch):
    """Today's fedavg.py with one more statement (the file on disk is not touched)."""
    read = fingerprint._read

    def edit():
        monkeypatch.setattr(fingerprint, "_read",
                            lambda p: read(p) + ("\nLOCAL_STEP_SCALE = 2\n" if str(p).endswith(FEDAVG) else ""))
        fingerprint._file_digest.cache_clear()
    yield edit
    fingerprint._file_digest.cache_clear()


def test_a_changed_method_makes_its_stored_run_stale(tiny, edited_fedavg, monkeypatch):
    cfg = tiny()
    res = run(cfg)
    meta = res.meta
    assert meta["code_fingerprint"] == fingerprint.combine(meta["code_files"]) and meta["cpu"]
    assert fingerprint.staleness(cfg, meta).state == fingerprint.FRESH
    other = tiny(**{"method.name": "fedper"})
    run(other)
    edited_fedavg()
    st = fingerprint.staleness(cfg, meta)
    assert st.state == fingerprint.STALE and st.changed == (FEDAVG,)
    assert fingerprint.staleness(other, RunResult(RunStore(other.runs_dir).path(other)).meta).state == "fresh"

    with pytest.raises(StaleRunError, match="FEDREPRO_STALE=keep"):
        run(cfg, on_stale="error")
    assert run(cfg, on_stale="keep").path == res.path  # reused as it is
    monkeypatch.setenv("FEDREPRO_STALE", "nope")
    with pytest.raises(ConfigError, match="FEDREPRO_STALE='nope'; valid: retrain, keep, error"):
        run(cfg)
    monkeypatch.delenv("FEDREPRO_STALE")
    again = run(cfg)  # the default: moved aside, trained anew (today's real code: the same numbers)
    retired = list((RunStore(cfg.runs_dir).root / ".stale").iterdir())
    assert len(retired) == 1 and retired[0].name.startswith(cfg.hash())
    assert json.loads((retired[0] / "summary.json").read_text())["best_acc_mean"] == again.summary["best_acc_mean"]


def test_a_run_without_a_fingerprint_is_checked_at_its_commit_or_unknown(tiny, monkeypatch):
    cfg = tiny()
    today = fingerprint.code_files(cfg)
    assert fingerprint.staleness(cfg, {"git_commit": None}).state == fingerprint.UNKNOWN
    assert fingerprint.staleness(cfg, {"git_commit": "abc", "git_dirty": True}).state == fingerprint.UNKNOWN
    monkeypatch.setattr(fingerprint, "_digest_at", lambda commit, path: today[path])
    assert fingerprint.staleness(cfg, {"git_commit": "abc", "git_dirty": False}).state == fingerprint.FRESH
    monkeypatch.setattr(fingerprint, "_digest_at", lambda commit, path: "absent" if path == FEDAVG else today[path])
    st = fingerprint.staleness(cfg, {"git_commit": "abc", "git_dirty": False})
    assert st.state == fingerprint.STALE and st.changed == (FEDAVG,) and "commit abc" in st.why


def test_a_changed_committed_checkpoint_makes_its_runs_stale(tiny, monkeypatch):
    cfg = tiny(**{"model.name": "clip", "model.args": {}})
    meta = fingerprint.record(cfg)
    assert list(meta["data_files"]) == ["fedrepro/models/weights/clip_standin.pt"]
    assert fingerprint.data_files(tiny()) == {}  # a CNN names no checkpoint
    assert fingerprint.staleness(cfg, meta).state == fingerprint.FRESH
    digest = fingerprint._bytes_digest
    monkeypatch.setattr(fingerprint, "_bytes_digest", lambda p, m: "0" * 16 if p.name == "clip_standin.pt" else digest(p, m))
    st = fingerprint.staleness(cfg, meta)
    assert st.state == fingerprint.STALE and st.changed == ("fedrepro/models/weights/clip_standin.pt",)
    older = {k: v for k, v in meta.items() if k != "data_files"}  # recorded before data files were covered
    assert fingerprint.staleness(cfg, older).state == fingerprint.FRESH
