"""Code fingerprints: which modules a run depends on, and a stored run reported stale when one of
them changes (retrained, kept or refused, as asked), but not when a module only moves."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fedrepro.runs import fingerprint
from fedrepro.errors import ConfigError, StaleRunError
from fedrepro.execute.run import run
from fedrepro.runs.store import RunResult, RunStore

FEDAVG = "fedrepro/methods/fedavg.py"


def test_a_run_depends_on_its_own_method_model_data_and_the_engine(tiny):
    files = fingerprint.code_files(tiny())
    assert {FEDAVG, "fedrepro/fl/engine.py", "fedrepro/runs/pipeline.py", "fedrepro/data/partition.py"} <= set(files)
    assert not {"fedrepro/runs/store.py", "fedrepro/execute/run.py", "fedrepro/methods/fedpft.py"} & set(files)
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
        fingerprint._today.cache_clear()
    yield edit
    fingerprint._today.cache_clear()


def test_a_changed_method_makes_its_stored_run_stale(tiny, edited_fedavg, monkeypatch):
    cfg = tiny()
    res = run(cfg)
    meta = res.meta
    assert meta["code_fingerprint"] == fingerprint.combine(meta["code_files"], meta["code_links"]) and meta["cpu"]
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
    assert fingerprint.staleness(cfg, {"git_commit": None}).state == fingerprint.UNKNOWN
    assert fingerprint.staleness(cfg, {"git_commit": "abc", "git_dirty": True}).state == fingerprint.UNKNOWN
    monkeypatch.setattr(fingerprint, "_at", lambda commit: None)
    assert "cannot show commit abc" in fingerprint.staleness(cfg, {"git_commit": "abc", "git_dirty": False}).why
    monkeypatch.setattr(fingerprint, "_at", lambda commit: fingerprint.today())
    assert fingerprint.staleness(cfg, {"git_commit": "abc", "git_dirty": False}).state == fingerprint.FRESH
    now = fingerprint.today()
    older = fingerprint.Tree(lambda p: now.read(p) + ("\nX = 1\n" if p == FEDAVG else ""), now.files)
    monkeypatch.setattr(fingerprint, "_at", lambda commit: older)
    st = fingerprint.staleness(cfg, {"git_commit": "abc", "git_dirty": False})
    assert st.state == fingerprint.STALE and st.changed == (FEDAVG,) and "commit abc" in st.why


def test_a_fingerprint_of_the_older_kind_is_stale(tiny):
    cfg = tiny()
    meta = {k: v for k, v in fingerprint.record(cfg).items() if k != "fingerprint_version"}
    assert fingerprint.staleness(cfg, meta).state == fingerprint.STALE


def test_an_import_rewired_to_other_code_is_a_change(tiny):
    cfg = tiny()
    meta = fingerprint.record(cfg)
    first, target = meta["code_links"][0].split(">")
    other = next(d for d in meta["code_files"].values() if d not in (first, target))
    rewired = {**meta, "code_links": [f"{first}>{other}", *meta["code_links"][1:]]}
    st = fingerprint.staleness(cfg, rewired)
    assert st.state == fingerprint.STALE
    assert [meta["code_files"][p] for p in st.changed] == [first]


# Run in a fresh interpreter on a copy of the package: the digests it prints, and whether a meta.json
# recorded by the untouched package is fresh there.
PROBE = """
import json, sys
from fedrepro import make_config
from fedrepro.runs import fingerprint
cfg = make_config("smoke")
meta = json.loads(sys.stdin.read() or "null")
print(json.dumps({"record": fingerprint.record(cfg),
                  "state": fingerprint.staleness(cfg, meta).state if meta else None}))
"""


def _probe(root: Path, meta: dict | None = None) -> dict:
    env = {**os.environ, "PYTHONPATH": str(root)}
    out = subprocess.run([sys.executable, "-c", PROBE], input=json.dumps(meta), env=env, cwd=root,
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.splitlines()[-1])


def _copy(tmp_path: Path, name: str) -> Path:
    root = tmp_path / name
    shutil.copytree(fingerprint.PACKAGE, root / "fedrepro",
                    ignore=shutil.ignore_patterns("__pycache__"))
    return root


@pytest.mark.slow
def test_a_moved_module_leaves_every_run_fresh_but_an_edit_does_not(tmp_path):
    base = _copy(tmp_path, "base")
    before = _probe(base)["record"]
    assert "fedrepro/data/idx.py" in before["code_files"]

    moved = _copy(tmp_path, "moved")  # idx.py moves into a new sub-package, and its importer follows
    pkg = moved / "fedrepro" / "data"
    (pkg / "formats").mkdir()
    (pkg / "formats" / "__init__.py").write_text('"""File formats."""\n')
    text = (pkg / "idx.py").read_text()
    (pkg / "formats" / "idx_files.py").write_text(text.replace("from ..", "from ..."))  # one level deeper
    (pkg / "idx.py").unlink()
    loader = pkg / "fashion_mnist.py"
    text = loader.read_text()
    assert "from .idx import read_idx" in text
    loader.write_text(text.replace("from .idx import read_idx", "from .formats.idx_files import read_idx  # moved"))
    after = _probe(moved, before)
    assert after["state"] == fingerprint.FRESH
    assert after["record"]["code_fingerprint"] == before["code_fingerprint"]
    assert "fedrepro/data/formats/idx_files.py" in after["record"]["code_files"]

    edited = _copy(tmp_path, "edited")  # the same file, one constant changed: stale
    idx = edited / "fedrepro" / "data" / "idx.py"
    text = idx.read_text()
    idx.write_text(text.replace("0x08", "0x09", 1) if "0x08" in text else text + "\nEXTRA = 1\n")
    stale = _probe(edited, before)
    assert stale["state"] == fingerprint.STALE
    assert stale["record"]["code_fingerprint"] != before["code_fingerprint"]


def test_a_changed_committed_checkpoint_makes_its_runs_stale(tiny, monkeypatch):
    cfg = tiny(**{"model.name": "clip", "model.args": {}})
    meta = fingerprint.record(cfg)
    # clip.py names both committed stand-ins, so a CLIP run records both (a change to either marks it
    # stale: more staleness than needed, never less)
    assert sorted(meta["data_files"]) == ["fedrepro/models/weights/clip_standin.pt",
                                          "fedrepro/models/weights/clip_standin_patch.pt"]
    assert fingerprint.data_files(tiny()) == {}  # a CNN names no checkpoint
    assert fingerprint.staleness(cfg, meta).state == fingerprint.FRESH
    digest = fingerprint._bytes_digest
    monkeypatch.setattr(fingerprint, "_bytes_digest", lambda p,
                        m: "0" * 16 if p.name == "clip_standin.pt" else digest(p, m))
    st = fingerprint.staleness(cfg, meta)
    assert st.state == fingerprint.STALE and st.changed == ("fedrepro/models/weights/clip_standin.pt",)
    older = {k: v for k, v in meta.items() if k != "data_files"}  # recorded before data files were covered
    assert fingerprint.staleness(cfg, older).state == fingerprint.FRESH
