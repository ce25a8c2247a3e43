"""The analysis caches beside a store (issue 53, class 6): keyed by the run's content, read as data
only, validated when read; a damaged or foreign one is computed again with a one-line warning, a
valid one is served without computing anything."""
from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest

import fedrepro
from fedrepro.analysis import ProbeConfig
from fedrepro.analysis import grid
from fedrepro.runs.store import RunStore

CFG = ProbeConfig(epochs=2)


@pytest.fixture
def run(tiny):
    return fedrepro.run(tiny())


def _cache_file(result, kind: str = "mismatch_probe") -> Path:
    files = list((result.path.parent / "_analysis" / kind).glob("*.json"))
    assert len(files) == 1, files
    return files[0]


@pytest.fixture
def counted(monkeypatch):
    """How many times the mismatch probe was computed."""
    calls = []
    real = grid.mismatch_probe

    def probe(*a, **kw):
        calls.append(1)
        return real(*a, **kw)

    monkeypatch.setattr(grid, "mismatch_probe", probe)
    return calls


def _same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(
        (isinstance(x, float) and math.isnan(x) and isinstance(y, float) and math.isnan(y)) or x == y
        for x, y in ((a[k], b[k]) for k in a))


def test_a_valid_cache_is_served_without_computing(run, monkeypatch):
    first = grid.probe_run(run, CFG)
    stored = json.loads(_cache_file(run).read_text())
    assert stored["format"] == grid.CACHE_FORMAT and stored["run"] == run.path.name
    assert stored["run_content"] == grid.run_content(run)

    def never(*a, **kw):
        raise AssertionError("a valid cache was computed again")

    monkeypatch.setattr(grid, "mismatch_probe", never)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # served silently
        again = grid.probe_run(fedrepro.RunResult(run.path), CFG)
    assert _same(again, first)


def _wrong_type(path: Path) -> None:
    obj = json.loads(path.read_text())
    obj["result"]["origin"] = "high"
    path.write_text(json.dumps(obj))


def _missing_field(path: Path) -> None:
    obj = json.loads(path.read_text())
    del obj["result"]["probe"]
    path.write_text(json.dumps(obj))


def _other_config(path: Path) -> None:
    obj = json.loads(path.read_text())
    obj["probe_config"]["epochs"] = 1000
    path.write_text(json.dumps(obj))


def _flat_summary(path: Path) -> None:  # the layout written before the cache recorded whose it is
    path.write_text(json.dumps(json.loads(path.read_text())["result"]))


def _symlink_to_zero(path: Path) -> None:
    path.unlink()
    path.symlink_to("/dev/zero")


def _fifo(path: Path) -> None:
    path.unlink()
    os.mkfifo(path)


def _huge(path: Path) -> None:
    path.write_bytes(b" " * (grid.MAX_CACHE_BYTES + 10) + b"{}")


DAMAGE = {
    "empty object": (lambda p: p.write_text("{}"), "format"),
    "binary": (lambda p: p.write_bytes(b"\x80\x81\xfe\xff\x00\x9c garbage"), "not valid JSON"),
    "empty": (lambda p: p.write_bytes(b""), "is empty"),
    "torn": (lambda p: p.write_bytes(p.read_bytes()[:25]), "not valid JSON"),
    "a list": (lambda p: p.write_text("[1, 2]"), "format"),
    "wrong-type field": (_wrong_type, "origin='high', not a number"),
    "missing field": (_missing_field, "'probe'"),
    "other probe config": (_other_config, "another probe config"),
    "flat summary": (_flat_summary, "format"),
    "symlink to /dev/zero": (_symlink_to_zero, "symbolic link"),
    "fifo": (_fifo, "not a regular file"),
    "oversized": (_huge, "bytes, more than"),
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_a_damaged_cache_is_computed_again_with_one_line(run, counted, damage):
    first = grid.probe_run(run, CFG)
    assert len(counted) == 1
    spoil, why = DAMAGE[damage]
    spoil(_cache_file(run))
    with pytest.warns(UserWarning, match="analysis cache .* computing it again") as w:
        again = grid.probe_run(fedrepro.RunResult(run.path), CFG)
    msg = str(w[0].message)
    assert "\n" not in msg and why in msg
    assert len(counted) == 2 and _same(again, first)
    # Written anew (a plain file again, whatever was there): the next read serves it.
    assert _cache_file(run).is_file() and not _cache_file(run).is_symlink()
    grid.probe_run(fedrepro.RunResult(run.path), CFG)
    assert len(counted) == 2


def test_a_cache_of_an_earlier_training_is_not_served_for_the_retrained_run(tiny, counted):
    cfg = tiny()
    old = fedrepro.run(cfg)
    grid.probe_run(old, CFG)
    cache = _cache_file(old)
    # Mark what the old training's cache says, so that serving it would show.
    obj = json.loads(cache.read_text())
    obj["result"]["origin"] = 123.0
    cache.write_text(json.dumps(obj))
    RunStore(cfg.runs_dir).retire(cfg, "retired")  # the run is trained again under the same config
    new = fedrepro.run(cfg)
    assert new.path == old.path
    with pytest.warns(UserWarning, match="another training of this run"):
        got = grid.probe_run(new, CFG)
    assert got["origin"] != 123.0 and len(counted) == 2
    assert json.loads(cache.read_text())["run_content"] == grid.run_content(new)


def test_a_cache_of_another_analysis_is_not_served(run):
    grid.linear_probe_run(run, "features", CFG)
    good = _cache_file(run, "linear_probe_features")
    target = run.path.parent / "_analysis" / "linear_probe_phi" / good.name
    target.parent.mkdir(parents=True)
    target.write_bytes(good.read_bytes())  # features' result planted where phi's is looked up
    with pytest.warns(UserWarning, match="features"):
        out = grid.linear_probe_run(fedrepro.RunResult(run.path), "phi", CFG)
    assert out["on"] == "phi"


def test_a_cache_folder_that_is_a_symlink_is_not_written_through(run, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (run.path.parent / "_analysis").mkdir()
    (run.path.parent / "_analysis" / "mismatch_probe").symlink_to(elsewhere)
    with pytest.warns(UserWarning, match="not written"):
        out = grid.probe_run(run, CFG)
    assert "origin" in out and not list(elsewhere.iterdir())


def test_nothing_in_a_cache_is_unpickled(run, counted):
    """A pickle payload where the cache lies is only bytes that are not JSON."""
    import pickle

    grid.probe_run(run, CFG)
    flag = run.path.parent / "pwned"

    class Payload:
        def __reduce__(self):
            return (open, (str(flag), "w"))

    _cache_file(run).write_bytes(pickle.dumps(Payload()))
    with pytest.warns(UserWarning, match="not valid JSON"):
        grid.probe_run(fedrepro.RunResult(run.path), CFG)
    assert not flag.exists()


def test_a_cache_computed_by_other_analysis_code_is_computed_again(run, counted, monkeypatch):
    """Issue 53, class 6: a cache records the analysis code that computed it; once fedrepro/analysis
    changes what it does, the cache is computed again (a comment alone keeps it)."""
    grid.probe_run(run, CFG)
    assert json.loads(_cache_file(run).read_text())["code"] == grid.analysis_code()
    grid.probe_run(run, CFG)
    assert len(counted) == 1
    monkeypatch.setattr(grid, "analysis_code", lambda: "0" * 16)
    with pytest.warns(UserWarning, match="other analysis code"):
        grid.probe_run(run, CFG)
    assert len(counted) == 2


def test_the_analysis_code_digest_ignores_comments_and_docstrings():
    from fedrepro.runs.fingerprint import source_digest

    code = "def f(x):\n    return x + 1\n"
    assert source_digest(code) == source_digest('def f(x):\n    """Why."""\n    # a comment\n    return x + 1\n')
    assert source_digest(code) != source_digest(code.replace("+ 1", "+ 2"))
