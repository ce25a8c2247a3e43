"""Files of a store that cannot be aimed elsewhere: a lock file that is a link is refused (never
truncated through), a run file that is a link to ``/dev/zero``, a FIFO or an oversized file is
reported as damage without being read, and one bad entry never breaks a listing."""
from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import fedrepro
import fedrepro.runs.catalog as catalog
from fedrepro.errors import CorruptCacheError
from fedrepro.runs.store import RunLock, RunResult, RunStore, read_run_file
from support import tiny_config


class _Stop(Exception):
    pass


def _stop(state):
    raise _Stop()


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A store with two finished runs and one interrupted after its first round (copied per test)."""
    tmp = tmp_path_factory.mktemp("links")
    good = tiny_config(tmp, **{"train.rounds": 2})
    bad = good.replace(seed=1)
    cut = good.replace(seed=2, **{"train.rounds": 3})
    fedrepro.run(good)
    fedrepro.run(bad)
    with pytest.raises(_Stop):
        fedrepro.run(cut, on_round_end=_stop)
    return Path(good.runs_dir), good, bad, cut


@pytest.fixture
def store(trained, tmp_path):
    root, good, bad, cut = trained
    runs = tmp_path / "runs"
    shutil.copytree(root, runs, symlinks=True)
    return runs, *(c.replace(runs_dir=str(runs)) for c in (good, bad, cut))


def _writable(folder: Path) -> None:
    for f in folder.iterdir():
        f.chmod(0o644)


# The CLI in a child process that may not take more than 2 GiB (reading /dev/zero whole would) and,
# through the timeout, may not hang (opening a FIFO for reading would).
_CHILD = ("import resource, sys; resource.setrlimit(resource.RLIMIT_DATA, (2 << 30, 2 << 30)); "
          "from fedrepro.app.cli import main; args = sys.argv[1:]; "
          "[print('exit', main(cmd.split('|'))) for cmd in args]")


def _cli(*commands: list[str]) -> str:
    done = subprocess.run([sys.executable, "-c", _CHILD, *("|".join(c) for c in commands)], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout + done.stderr


@pytest.mark.parametrize("link", ["symlink", "hardlink"])
def test_a_lock_file_aimed_at_another_file_is_refused_and_the_file_untouched(store, tmp_path, link):
    runs, good, bad, cut = store
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    fresh = good.replace(seed=7)
    lock = runs / ".locks" / f"{fresh.hash()}.lock"
    (os.symlink if link == "symlink" else os.link)(victim, lock)
    with pytest.raises(CorruptCacheError) as err:
        fedrepro.run(fresh)
    assert "\n" not in str(err.value) and str(lock) in str(err.value)
    assert victim.read_text() == "precious\n"
    assert not RunStore(runs).path(fresh).exists()
    lock.unlink()  # what the message says: then the run goes ahead
    assert fedrepro.run(fresh).summary["rounds"] == 2


def test_a_lock_file_that_is_a_fifo_neither_hangs_the_listing_nor_locks(store):
    runs, good, bad, cut = store
    lock = runs / ".locks" / f"{cut.hash()}.lock"
    lock.unlink()
    os.mkfifo(lock)
    out = _cli(["runs", "--runs-dir", str(runs)], ["show", cut.hash(), "--runs-dir", str(runs)])
    assert out.count("exit 0") == 2 and "interrupted" in out, out
    with pytest.raises(CorruptCacheError, match="not a regular file"):
        RunLock(lock).acquire(block=False)


@pytest.mark.parametrize("name", ["config.json", "meta.json", "rounds.jsonl", "summary.json"])
@pytest.mark.parametrize("kind", ["dev_zero", "fifo"])
def test_a_run_file_that_is_dev_zero_or_a_fifo_is_damage_not_read(store, kind, name):
    runs, good, bad, cut = store
    folder = runs / bad.hash()
    _writable(folder)
    (folder / name).unlink()
    if kind == "fifo":
        os.mkfifo(folder / name)
    else:
        os.symlink("/dev/zero", folder / name)
    out = _cli(["runs", "--runs-dir", str(runs)], ["show", bad.hash(), "--runs-dir", str(runs)],
               ["show", good.hash(), "--runs-dir", str(runs)])
    assert out.count("exit 0") == 3, out
    listing = out.split("exit 0")[0]
    assert good.hash()[:8] in listing and bad.hash()[:8] in listing and cut.hash()[:8] in listing, listing
    assert "damaged" in [ln for ln in listing.splitlines() if ln.startswith(bad.hash()[:8])][0]
    # In this process too: loading it is a one-line error naming the file.
    with pytest.raises(CorruptCacheError) as err:
        if name == "config.json":
            RunStore(runs).status(bad)
        else:
            RunStore(runs).load(bad)
    assert "\n" not in str(err.value) and str(folder) in str(err.value)


@pytest.mark.parametrize("name", ["rounds.jsonl", "final_state.pt"])
def test_a_run_file_that_is_a_link_to_a_true_copy_is_still_refused(store, tmp_path, name):
    """A link may point anywhere the reader can read; the store's own files are never links."""
    runs, good, bad, cut = store
    folder = runs / good.hash()
    _writable(folder)
    copy = tmp_path / name
    shutil.copyfile(folder / name, copy)
    (folder / name).unlink()
    os.symlink(copy, folder / name)
    with pytest.raises(CorruptCacheError, match="symbolic link"):
        RunResult(folder).verify()
    assert RunResult(folder).cheap_check() is not None


def test_a_run_file_over_its_bound_is_refused_before_it_is_read(tmp_path, monkeypatch):
    f = tmp_path / "meta.json"
    f.write_bytes(b"{}" + b" " * 100)
    monkeypatch.setitem(fedrepro.runs.store.MAX_FILE_BYTES, ".json", 64)
    with pytest.raises(CorruptCacheError, match="more than the 64"):
        read_run_file(f)


def test_one_bad_entry_among_good_ones_is_skipped_with_a_warning(store, monkeypatch, caplog):
    runs, good, bad, cut = store
    real = catalog.run_record

    def broken(folder):
        if Path(folder).name == bad.hash():
            raise PermissionError(13, "Permission denied", str(folder))
        return real(folder)

    monkeypatch.setattr(catalog, "run_record", broken)
    with caplog.at_level(logging.WARNING, logger="fedrepro"):
        table = catalog.list_runs(runs)
    assert set(table["hash"]) == {good.hash(), cut.hash()}
    assert bad.hash() in caplog.text


def test_sealing_a_run_never_changes_a_file_through_a_link(store, tmp_path):
    runs, good, bad, cut = store
    victim = tmp_path / "victim.txt"
    victim.write_text("mine\n")
    victim.chmod(0o664)
    os.symlink(victim, runs / cut.hash() / "notes.txt")
    assert fedrepro.run(cut).summary["rounds"] == 3  # resumed and finished (then sealed read-only)
    assert victim.stat().st_mode & 0o777 == 0o664
    assert not os.access(runs / cut.hash() / "summary.json", os.W_OK) or os.geteuid() == 0
