"""Issue 53, third probe: the readers and writers the second probe did not reach (docs/reliability.md,
"Threat model"). The trace of a rendered notebook, the rehearsal markers of a store and of the
rehearsal's weights folder, a checkpoint written for another model, and the environment of the
package's own Ray. Each test plants what someone who can write the output root or a store could
plant, and checks for a one-line error naming the file (or the reader's documented answer), never a
traceback, a hang, a run silently left out or a file written elsewhere."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import fedrepro
from fedrepro.claims.core import rehearsal_rows
from fedrepro.env import localray, trace
from fedrepro.env.jsonfiles import MAX_INPUT_BYTES
from fedrepro.errors import CorruptCacheError
from fedrepro.runs.store import RunStore, checkpoint_bytes
from support import tiny_config

# Deeper than Python's recursion limit, and still a few hundred kilobytes.
DEEP = "[" * 100_000 + "]" * 100_000


def one_line_naming(err: BaseException | str, path: Path | str) -> None:
    text = str(err)
    assert "\n" not in text.strip(), text
    assert str(path) in text, text


def _in_subprocess(code: str, *args: str) -> subprocess.CompletedProcess:
    """``code`` run in a fresh interpreter (a read that blocks on a FIFO cannot hang the test run)."""
    try:
        return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{code!r} on {args} hung")


def _plant(f: Path, kind: str) -> None:
    if kind == "fifo":
        os.mkfifo(f)
    elif kind == "sparse":
        with open(f, "wb") as out:
            out.truncate(MAX_INPUT_BYTES + 1)  # bigger than any such file, taking no disk
    else:
        f.write_text(DEEP + "\n")


# --------------------------------------------------------------------------------------------
# The trace of a rendered notebook: what `fedrepro archive` packs and `reproduce` reports

RUN = '{"event": "run", "hash": "abc", "trained": false}\n'

_READ_TRACE = """
import sys
from fedrepro.env import trace
from fedrepro.errors import CorruptCacheError
try:
    print("events:", trace.read(sys.argv[1]))
except CorruptCacheError as e:
    print("refused:", e)
"""


@pytest.mark.parametrize("kind", ["fifo", "sparse", "deep"])
def test_a_trace_is_read_bounded_never_waited_on_and_never_a_recursion_error(tmp_path, kind):
    f = tmp_path / trace.notebook_file("fedpft/01_x.ipynb")
    _plant(f, kind)
    done = _in_subprocess(_READ_TRACE, str(f))
    lines = done.stdout.strip().splitlines()
    assert done.returncode == 0 and len(lines) == 1 and lines[0].startswith("refused:"), \
        done.stdout + done.stderr[-2000:]
    one_line_naming(lines[0], f)


@pytest.mark.parametrize("line", [
    DEEP,
    '{"event": "run", "ha',  # garbled (a line torn, then appended to)
    '{"event": "run", "hash": ["abc"], "trained": false}',  # a hash no caller can put in a set
    '{"event": "run", "trained": true}',
    '{"event": "figure", "path": 3}',
    '["run"]',
], ids=["deep", "garbled", "hash_list", "no_hash", "path_number", "not_an_event"])
def test_a_damaged_trace_line_is_one_line_naming_the_file_not_a_run_left_out(tmp_path, line):
    f = tmp_path / "t.jsonl"
    f.write_text(RUN + line + "\n" + RUN)
    with pytest.raises(CorruptCacheError) as err:
        trace.read(f)
    one_line_naming(err.value, f)
    assert "line 2" in str(err.value)


def test_only_a_last_trace_line_torn_by_a_crash_is_left_out(tmp_path):
    f = tmp_path / "t.jsonl"
    f.write_text(RUN + '{"event": "figure", "path": "x.png"}\n' + '{"event": "run", "ha')
    assert [e["event"] for e in trace.read(f)] == ["run", "figure"]
    assert trace.read(tmp_path / "none.jsonl") == []  # a notebook that read no run and wrote no figure


def test_an_archive_of_a_pass_whose_trace_is_damaged_is_one_line(tmp_path, monkeypatch):
    from fedrepro.app import archive_pass
    from fedrepro.app.reproduce import numbered_notebooks
    from fedrepro.env.host import repo_root

    nb = numbered_notebooks(repo_root())[0]
    rel = str(nb.relative_to(repo_root() / "notebooks"))
    (tmp_path / trace.notebook_file(rel)).write_text(RUN + DEEP + "\n")
    monkeypatch.setattr(archive_pass, "output_path", lambda *a, **k: tmp_path)
    with pytest.raises(CorruptCacheError) as err:
        archive_pass.traced_runs("smoke")
    one_line_naming(err.value, tmp_path / trace.notebook_file(rel))


def test_a_trace_planted_as_a_link_is_not_appended_through(tmp_path, monkeypatch):
    victim = tmp_path / "victim.txt"
    victim.write_text("keep\n")
    log = tmp_path / "trace.jsonl"
    log.symlink_to(victim)
    monkeypatch.setenv(trace.ENV, str(log))
    with pytest.raises(CorruptCacheError) as err:
        trace.record("run", hash="abc", trained=False)
    one_line_naming(err.value, log)
    assert victim.read_text() == "keep\n"
    log.unlink()
    trace.record("run", hash="abc", trained=False)  # a plain file: appended, as before
    trace.record("figure", path="x.png")
    assert [e["event"] for e in trace.read(log)] == ["run", "figure"]


# --------------------------------------------------------------------------------------------
# The rehearsal markers: a store's config.json, the rehearsal weights' done.json

_IS_REHEARSAL = """
import sys
import pandas as pd
from fedrepro.claims.core import rehearsal_rows
print("rehearsal:", rehearsal_rows(pd.DataFrame({"path": [sys.argv[1]]})))
"""


@pytest.mark.parametrize("kind", ["fifo", "sparse", "deep"])
def test_a_runs_config_planted_in_a_store_is_not_a_rehearsal_and_never_waited_on(tmp_path, kind):
    folder = tmp_path / "abc123"
    folder.mkdir()
    _plant(folder / "config.json", kind)
    done = _in_subprocess(_IS_REHEARSAL, str(folder))
    assert done.returncode == 0 and done.stdout.strip() == "rehearsal: False", done.stdout + done.stderr[-2000:]


def test_a_rehearsal_run_is_still_one_and_a_plain_run_is_not(tmp_path):
    import pandas as pd

    for name, flag in [("a1", True), ("b2", False)]:
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.json").write_text(f'{{"config": {{"rehearsal": {str(flag).lower()}}}}}')
        assert rehearsal_rows(pd.DataFrame({"path": [str(tmp_path / name)]})) is flag


_DONE = """
import sys
from pathlib import Path
from fedrepro.pretrain import rehearsal_weights as rw
print("done:", rw._done(Path(sys.argv[1])))
"""


@pytest.mark.parametrize("kind", ["fifo", "sparse", "deep", "link"])
def test_a_planted_done_record_of_the_rehearsal_weights_means_writing_them_again(tmp_path, kind):
    f = tmp_path / "done.json"
    if kind == "link":  # a record fedrepro did not write, pointing at one that would be believed
        (tmp_path / "elsewhere.json").write_text('{"seed": 0, "files": []}')
        f.symlink_to(tmp_path / "elsewhere.json")
    else:
        _plant(f, kind)
    done = _in_subprocess(_DONE, str(f))
    assert done.returncode == 0 and done.stdout.strip() == "done: None", done.stdout + done.stderr[-2000:]


# --------------------------------------------------------------------------------------------
# A checkpoint whose tensors do not fit the run's model


class _Stop(Exception):
    pass


def _stop(state):
    raise _Stop()


@pytest.fixture(scope="module")
def interrupted(tmp_path_factory):
    """A store with a run interrupted after its first round (copied per test)."""
    tmp = tmp_path_factory.mktemp("probe3")
    cut = tiny_config(tmp, **{"train.rounds": 3})
    with pytest.raises(_Stop):
        fedrepro.run(cut, on_round_end=_stop)
    return cut


@pytest.fixture
def cut(interrupted, tmp_path):
    runs = tmp_path / "runs"
    shutil.copytree(interrupted.runs_dir, runs, symlinks=True)
    for f in runs.rglob("*"):
        f.chmod(f.stat().st_mode | 0o200)
    return interrupted.replace(runs_dir=str(runs))


def _wider(t):
    return torch.zeros(t.shape[0] + 1, *t.shape[1:], dtype=t.dtype)


def _half(t):
    return t.half()


@pytest.mark.parametrize("change", [_wider, _half, None], ids=["shape", "dtype", "missing"])
def test_resuming_a_checkpoint_of_another_shape_is_one_line_naming_file_key_and_shapes(cut, change):
    folder = Path(cut.runs_dir) / cut.hash()
    ckpt = RunStore.load_checkpoint(folder)
    shared = ckpt["state"]["shared"]
    key = next(k for k, v in shared.items() if isinstance(v, torch.Tensor) and v.dim() >= 1)
    if change is None:
        del shared[key]
    else:
        shared[key] = change(shared[key])
    (folder / "checkpoint.pt").write_bytes(checkpoint_bytes(ckpt))  # with a header that matches it
    with pytest.raises(CorruptCacheError) as err:
        fedrepro.run(cut)
    one_line_naming(err.value, folder / "checkpoint.pt")
    text = str(err.value)
    assert repr(key) in text and "delete it" in text and "round 0" in text, text
    if change is _wider:
        want = list(RunStore.load_checkpoint(folder)["state"]["shared"][key].shape)
        assert str([want[0] - 1, *want[1:]]) in text and str(want) in text, text


# --------------------------------------------------------------------------------------------
# The environment of the package's own Ray instance


@pytest.mark.parametrize("host,kept", [("0.0.0.0", False), ("192.0.2.7", False), ("::", False),
                                       ("127.0.0.1", True), ("::1", True)])
def test_a_loopback_ray_gets_its_remote_debugger_on_loopback(host, kept):
    env = localray.loopback_env({"REMOTE_PDB_HOST": host, "RAY_DEBUG_POST_MORTEM": "1"})
    assert env.get("REMOTE_PDB_HOST", host) == (host if kept else localray.LOOPBACK)
    assert "REMOTE_PDB_HOST" not in localray.loopback_env({})  # unset: Ray's default, loopback


def test_init_local_ray_starts_ray_with_the_debugger_on_loopback_and_restores_the_env(monkeypatch):
    ray = pytest.importorskip("ray")
    seen = {}

    def fake_init(**kwargs):  # what the processes ray.init starts would inherit
        seen.update(host=os.environ.get("REMOTE_PDB_HOST"), switch=os.environ.get("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"))

    monkeypatch.setattr(ray, "init", fake_init)
    monkeypatch.setenv("REMOTE_PDB_HOST", "0.0.0.0")
    monkeypatch.setenv("RAY_DEBUG_POST_MORTEM", "1")
    monkeypatch.delenv("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", raising=False)
    localray.init_local_ray()
    assert seen == {"host": "127.0.0.1", "switch": "0"}
    assert os.environ["REMOTE_PDB_HOST"] == "0.0.0.0" and "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER" not in os.environ
