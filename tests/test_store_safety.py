"""The store under crashes and tampering: a run killed at any instant leaves no run or a resumable
one (and resuming it gives the uninterrupted result); every stored file is checked on load."""
from __future__ import annotations

import json
import multiprocessing as mp
import os
import random
import shutil
import time
from pathlib import Path

import pandas as pd
import pytest
import torch

import fedrepro
import fedrepro.runs.store
from conftest import tiny_config
from fedrepro.errors import CorruptCacheError
from fedrepro.runs.store import RunResult, RunStore

FILES = {"config.json", "meta.json", "rounds.jsonl", "clients.jsonl", "final_state.pt", "summary.json"}
TIMING = ("time_train_s", "time_eval_s")


def _slow_child(cfg_dict: dict, write_delay: float, round_sleep: float) -> None:
    """A run in a forked process, slowed down so that kills land in every phase (start-up, rounds,
    each file of the final write). Slowing the store's own writes is the point: torch is untouched."""
    write = fedrepro.runs.store.atomic_write_bytes

    def slow_write(path, data):
        time.sleep(write_delay)
        return write(path, data)

    fedrepro.runs.store.atomic_write_bytes = slow_write
    fedrepro.run(fedrepro.config.from_dict(cfg_dict), on_round_end=lambda s: time.sleep(round_sleep))


def _start(cfg, write_delay=0.08, round_sleep=0.15):
    # fork: the child starts with fedrepro already imported, so the kill window is the run itself.
    p = mp.get_context("fork").Process(target=_slow_child, args=(cfg.to_dict(), write_delay, round_sleep))
    p.start()
    return p


def _comparable(res: RunResult) -> tuple:
    rounds = res.rounds.drop(columns=[c for c in TIMING if c in res.rounds])
    state = res.final_state()
    flat = {k: v for k, v in state["shared"].items()}
    summary = {k: v for k, v in res.summary.items() if not k.startswith("time_")}
    return rounds, res.clients, flat, state["client_states"], summary


def _assert_same(a: RunResult, b: RunResult) -> None:
    ra, ca, sa, csa, suma = _comparable(a)
    rb, cb, sb, csb, sumb = _comparable(b)
    pd.testing.assert_frame_equal(ra, rb, check_exact=True)
    pd.testing.assert_frame_equal(ca, cb, check_exact=True)
    assert sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)
    assert len(csa) == len(csb)
    assert suma == sumb


def _assert_sealed(root: Path, path: Path) -> None:
    assert {p.name for p in path.iterdir()} == FILES
    assert not [p for p in root.iterdir() if p.name.endswith(".tmp")]


def test_kill_at_random_instants_leaves_no_run_or_a_resumable_one(tmp_path):
    base = tiny_config(tmp_path, **{"train.rounds": 3})
    # In-process first: the reference result, and every lazy import done before the forks.
    ref = fedrepro.run(base.replace(runs_dir=str(tmp_path / "ref")))
    timed = base.replace(runs_dir=str(tmp_path / "timed"))
    t0 = time.perf_counter()
    p = _start(timed)
    p.join(120)
    duration = time.perf_counter() - t0
    assert p.exitcode == 0
    _assert_same(RunStore(timed.runs_dir).load(timed), ref)

    seed = int.from_bytes(os.urandom(4), "little")
    rng = random.Random(seed)
    kills = 6
    # One instant in each sixth of the run (start-up, rounds, final write), random inside it.
    instants = [duration * (i + rng.random()) / kills for i in range(kills)]
    seen = []
    for i, at in enumerate(instants):
        cfg = base.replace(runs_dir=str(tmp_path / f"kill{i}"))
        store = RunStore(cfg.runs_dir)
        p = _start(cfg)
        time.sleep(at)
        p.kill()
        p.join()
        state = store.status(cfg)  # raises CorruptCacheError for anything but these three
        seen.append(state)
        assert state in ("missing", "partial", "done"), (seed, at, state)
        res = fedrepro.run(cfg)
        _assert_same(res, ref)
        _assert_sealed(store.root, res.path)
    print(f"kill seed {seed}: instants {[round(t, 2) for t in instants]} of {duration:.2f}s left {seen}")


def test_crash_leftovers_are_cleaned_up(tiny):
    """What a kill leaves at each instant, built by hand: a half-built folder, a half-written file, a
    finished run whose checkpoint was not removed yet."""
    cfg = tiny(**{"train.rounds": 2})
    store = RunStore(cfg.runs_dir)
    store.prepare_root()
    stale = store.root / f".{cfg.hash()}.999-deadbeef.tmp"  # killed during start-up, before the rename
    stale.mkdir()
    (stale / "meta.json").write_text("{}")
    other = store.root / ".0123456789abcdef.998-cafe.tmp"  # another config's, its writer gone too
    other.mkdir()
    assert store.status(cfg) == "missing"
    res = fedrepro.run(cfg)
    assert not stale.exists() and not other.exists()
    _assert_sealed(store.root, res.path)

    # killed between summary.json and removing the checkpoint: a complete run, tidied on load
    cfg2 = tiny(**{"train.rounds": 3})
    res2 = fedrepro.run(cfg2)
    for f in res2.path.iterdir():
        f.chmod(0o644)
    (res2.path / "checkpoint.pt").write_bytes(b"left over")
    (res2.path / ".rounds.jsonl.x1.tmp").write_bytes(b"half")
    again = fedrepro.run(cfg2)
    _assert_sealed(store.root, again.path)
    assert not (again.path / "summary.json").stat().st_mode & 0o222


def test_interrupted_write_leaves_resumable_run_without_tmp_files(tiny):
    from support import interrupt_at

    cfg = tiny(**{"train.rounds": 3})
    interrupt_at(cfg, 2)
    path = RunStore(cfg.runs_dir).path(cfg)
    (path / ".checkpoint.pt.abc.tmp").write_bytes(b"half a checkpoint")
    res = fedrepro.run(cfg)
    _assert_sealed(RunStore(cfg.runs_dir).root, res.path)


# ------------------------------------------------------------------------------------------------
# Tampering: each stored file, each kind of damage, is named in a CorruptCacheError.

@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    torch.set_num_threads(1)
    cfg = tiny_config(tmp_path_factory.mktemp("tamper"), **{"train.rounds": 2})
    return cfg, fedrepro.run(cfg).path


def _copy(finished_run, tmp_path):
    cfg, path = finished_run
    cfg = cfg.replace(runs_dir=str(tmp_path / "runs"))
    dst = Path(cfg.runs_dir) / path.name
    shutil.copytree(path, dst)
    for f in dst.iterdir():
        f.chmod(0o644)
    return cfg, dst


def _drop_last_line(f: Path) -> None:
    lines = f.read_text().splitlines(keepends=True)
    f.write_text("".join(lines[:-1]))


def _edit_json(f: Path, fn) -> None:
    d = json.loads(f.read_text())
    fn(d)
    f.write_text(json.dumps(d, indent=2, sort_keys=True))


def _set(d: dict, keys: tuple, value) -> None:
    for k in keys[:-1]:
        d = d[k]
    d[keys[-1]] = value


TAMPER = {
    "rounds truncated at a line end": ("rounds.jsonl", lambda p: _drop_last_line(p / "rounds.jsonl")),
    "rounds value edited": ("rounds.jsonl", lambda p: (p / "rounds.jsonl").write_text(
        (p / "rounds.jsonl").read_text().replace('"round": 1', '"round": 1.0'))),
    "clients truncated at a line end": ("clients.jsonl", lambda p: _drop_last_line(p / "clients.jsonl")),
    "clients emptied": ("clients.jsonl", lambda p: (p / "clients.jsonl").write_text("")),
    "config edited": ("config.json", lambda p: _edit_json(p / "config.json",
                                                          lambda d: _set(d, ("config", "train", "lr"), 0.5))),
    "config reformatted": ("config.json", lambda p: (p / "config.json").write_text(
        json.dumps(json.loads((p / "config.json").read_text())))),
    "meta edited": ("meta.json", lambda p: _edit_json(p / "meta.json", lambda d: _set(d, ("torch_threads",), 7))),
    "meta missing": ("meta.json", lambda p: (p / "meta.json").unlink()),
    "summary emptied to {}": ("summary.json", lambda p: (p / "summary.json").write_text("{}")),
    "summary value edited": ("summary.json", lambda p: _edit_json(
        p / "summary.json", lambda d: _set(d, ("final_acc_mean",), 0.99))),
    "summary record removed": ("summary.json", lambda p: _edit_json(
        p / "summary.json", lambda d: d.pop("files_sha256"))),
    "summary not json": ("summary.json", lambda p: (p / "summary.json").write_bytes(b"\xff\x00binary")),
    "final state truncated": ("final_state.pt", lambda p: (p / "final_state.pt").write_bytes(
        (p / "final_state.pt").read_bytes()[:-10])),
    "final state missing": ("final_state.pt", lambda p: (p / "final_state.pt").unlink()),
    "only config.json": ("meta.json", lambda p: [f.unlink() for f in p.iterdir() if f.name != "config.json"]),
}


@pytest.mark.parametrize("case", list(TAMPER))
def test_tampered_file_is_named_on_load(finished_run, tmp_path, case):
    name, damage = TAMPER[case]
    cfg, path = _copy(finished_run, tmp_path)
    damage(path)
    with pytest.raises(CorruptCacheError, match=name.replace(".", r"\.")) as e:
        fedrepro.run(cfg)
    assert str(path) in str(e.value)
    assert not (path / "checkpoint.pt").exists()  # nothing was re-trained into the damaged folder


def test_final_state_bytes_flipped_is_caught_when_read(finished_run, tmp_path):
    cfg, path = _copy(finished_run, tmp_path)
    f = path / "final_state.pt"
    data = bytearray(f.read_bytes())
    data[-20] ^= 0xFF  # same size: the load-time size check passes, the hash does not
    f.write_bytes(bytes(data))
    res = fedrepro.run(cfg)
    with pytest.raises(CorruptCacheError, match="final_state.pt"):
        res.final_state()
    with pytest.raises(CorruptCacheError, match="final_state.pt"):
        res.verify(deep=True)


def _make_legacy(path: Path) -> None:
    """A run as the store wrote it before hashes were recorded."""
    _edit_json(path / "summary.json", lambda d: d.pop("files_sha256"))
    _edit_json(path / "meta.json", lambda d: d.pop("store_format"))


def test_legacy_run_without_hash_record_still_loads(finished_run, tmp_path):
    cfg, path = _copy(finished_run, tmp_path)
    _make_legacy(path)
    res = fedrepro.run(cfg)
    assert res.summary == RunResult(finished_run[1]).summary
    assert res.final_state().keys() == {"shared", "server_state", "client_states"}


@pytest.mark.parametrize("damage, name", [
    (lambda p: _drop_last_line(p / "rounds.jsonl"), "rounds.jsonl"),
    (lambda p: (p / "summary.json").write_text("{}"), "summary.json"),
    (lambda p: _edit_json(p / "config.json", lambda d: _set(d, ("config", "seed"), 5)), "config.json"),
])
def test_legacy_run_still_gets_structural_checks(finished_run, tmp_path, damage, name):
    cfg, path = _copy(finished_run, tmp_path)
    _make_legacy(path)
    damage(path)
    with pytest.raises(CorruptCacheError, match=name.replace(".", r"\.")):
        fedrepro.run(cfg)


def test_checkpoints_land_in_order_and_a_failed_write_is_raised(tmp_path, monkeypatch):
    import torch

    from fedrepro.runs.store import CheckpointWriter, read_checkpoint

    with CheckpointWriter(tmp_path) as w:
        for r in range(5):
            w.save({"round": r, "x": torch.full((3,), float(r))})
    assert read_checkpoint((tmp_path / "checkpoint.pt").read_bytes(), tmp_path)["round"] == 4

    def broken(path, data):
        raise OSError("disk full")

    monkeypatch.setattr(fedrepro.runs.store, "atomic_write_bytes", broken)
    with pytest.raises(OSError, match="disk full"):
        with CheckpointWriter(tmp_path) as w:
            w.save({"round": 5})
    assert read_checkpoint((tmp_path / "checkpoint.pt").read_bytes(), tmp_path)["round"] == 4  # the last good one stays


def test_written_files_take_the_umask_mode_not_a_temporary_files_private_one(tmp_path):
    """A shared store (a cluster's group folder) must be readable as the umask allows: a temporary
    file is made 0600, and a file renamed into place kept that."""
    import os
    import stat

    from fedrepro.env.atomic import atomic_write_bytes

    old = os.umask(0o027)
    try:
        from fedrepro.env import atomic

        atomic._umask.cache_clear()
        atomic_write_bytes(tmp_path / "f.json", b"{}")
        assert stat.S_IMODE((tmp_path / "f.json").stat().st_mode) == 0o640
    finally:
        os.umask(old)
        atomic._umask.cache_clear()


def test_a_csv_export_that_cannot_be_written_is_a_resource_error_and_leaves_nothing(tmp_path, monkeypatch):
    import errno
    import os

    import pandas as pd

    from fedrepro.errors import ResourceError
    from fedrepro.runs.catalog import write_csv

    def full(*_):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "replace", full)
    with pytest.raises(ResourceError, match="free space there, or name another file with --csv"):
        write_csv(pd.DataFrame({"a": [1]}), tmp_path / "runs.csv")
    assert list(tmp_path.iterdir()) == []
