"""The results store: one immutable folder per run, ``<runs_dir>/<config-hash>/``.

Layout (every file written to a temporary name, then ``os.replace``-d into place):

- ``config.json``   the resolved config (and its hash);
- ``meta.json``     seed, partition hash, package versions, git commit, device, start time;
- ``checkpoint.pt`` while running: the full simulator state after the last finished round, behind a
  header with its sha256 (checked before a resume);
- ``rounds.jsonl``  one line per round (means, std, timing);
- ``clients.jsonl`` one line per (evaluated round, client);
- ``final_state.pt`` the trained state after the last round: the shared tensors and every client's
  persistent state (what analyses such as the mismatch probe need; ``RunResult.final_state()``);
- ``summary.json``  best-round and final-round values, and the sha256 and size of every other file
  (``files_sha256``). Written last: its presence marks a finished run, which is then read-only and
  reused, never re-run or overwritten.

Crash safety: a run folder is published by renaming a temporary folder (``.<hash>.<id>.tmp``)
that already holds ``config.json`` and ``meta.json``, so a crash at any instant leaves either no
run (a stale temporary folder, removed by the next launch) or a resumable one (resumed from its
last checkpoint, which is kept until ``summary.json`` is in place).

Concurrency: a process writes a run only while it holds an exclusive ``flock`` on
``<runs_dir>/.locks/<hash>.lock`` (the OS releases it when the process dies). A second launcher of
the same config waits, reuses the first one's result, or stops with :class:`RunBusyError`
(:data:`ON_BUSY`).

Integrity: loading a finished run checks every file against the recorded sha256 (``final_state.pt``
by size at load and by hash when it is read) and the structure (a config that hashes to the folder
name, one rounds line per round). A run finished before the record existed ("legacy", no
``files_sha256``) gets the structural checks only. Any mismatch raises
:class:`~fedrepro.errors.CorruptCacheError` naming the file and the fix.

Safety: a store may be shared, so its files are input from whoever can write the folder, and a
sha256 record only proves that a file is what that writer recorded. So ``final_state.pt`` and
``checkpoint.pt`` hold tensors, numbers, strings and lists, tuples and dicts of them only
(:func:`plain_state`, checked as they are written), and are read with ``torch.load(weights_only=True)``:
a pickled object in one (a planted payload, or an older fedrepro's checkpoint) is refused unread,
as a one-line CorruptCacheError. Run files are read only when they are regular files, not symbolic
links, of at most :data:`MAX_FILE_BYTES` for their kind (:func:`read_run_file`): a link to
``/dev/zero`` or a FIFO in a run folder is reported as damage, not read; lock files are opened
without following links, inside a ``.locks`` folder itself opened without following one
(:class:`RunLock`); a run folder, ``.locks`` or ``.stale`` that is a link or a file is refused
(:func:`real_folder`), and sealing a run never changes a file through a symbolic or hard link. A
checkpoint is checked for the shape of a run's state before it is resumed (:func:`checkpoint_problem`),
and a torch file whose zip entries are compressed, which could inflate a thousand times, is refused
before it is read (:func:`load_state`).
"""
from __future__ import annotations

import collections
import contextlib
import errno
import hashlib
import importlib.metadata
import io
import json
import logging
import math
import os
import platform
import shutil
import socket
import stat
import subprocess
import tempfile
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from functools import cached_property
from pathlib import Path
from typing import Any, Iterator

import pandas as pd

# torch is imported only where a state or checkpoint is (de)serialised: listing and reading runs
# (fedrepro runs, fedrepro show, RunResult's tables) never load it.
from ..config import RunConfig, from_dict
from ..errors import ArchivedRunError, ConfigError, CorruptCacheError, FedreproError, RunBusyError
from ..env.settings import ENV_OUTPUT, ENV_RUNS, ensure_writable
from ..env.settings import output_path
from ..env.settings import source
from ..version import VERSION as __version__
from ..env.atomic import atomic_write_bytes, write_error
from ..env.jsonfiles import RefusedFile, loads, read_plain_file
from ..env.torchfile import inflation_problem
from ..env.host import PACKAGE_PARENT, cpu_model
from .columns import (CLIENT_COLUMNS_ALWAYS, ROUND_COLUMNS_ALWAYS, blank_untested, order_round_columns, percent,
                      with_columns)

try:  # POSIX; elsewhere runs are not locked (see RunLock)
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None  # type: ignore[assignment]

log = logging.getLogger("fedrepro")

# What a second launcher of a config that another process is writing does: wait for it (then
# reuse its result, or resume the run if it stopped unfinished), reuse its result (wait, but never
# train here), or stop at once with RunBusyError.
ON_BUSY = ("wait", "reuse", "error")
# meta.json of runs written with a hash record says so: a missing record is then damage, not age.
STORE_FORMAT = 2
_RECORD = "files_sha256"
# Files covered by the record besides summary.json itself (hashed in canonical form).
_RECORDED = ("config.json", "meta.json", "rounds.jsonl", "clients.jsonl", "final_state.pt")
# Checked by size only at load: it can be large, and only analyses read it (hash checked then).
_LAZY = ("final_state.pt",)
# Checked by hash when runs are listed (a line per round: small); the others by size there.
_SMALL = ("config.json", "meta.json", "rounds.jsonl")
_SUMMARY_KEYS = ("rounds", "best_round", "best_acc_mean", "final_acc_mean", "config_hash")
# A run folder restored from the reference archive (fedrepro.runs.archive) holds every file of a
# finished run but its final state, and this marker: the archive keeps no model weights.
ARCHIVED = "archived.json"
# The files of a run folder that travel between machines (fedrepro.execute): a started run's
# (resumable anywhere from them) and a finished one's.
PARTIAL_FILES = ("config.json", "meta.json", "checkpoint.pt")
FINISHED_FILES = (*_RECORDED, "summary.json")
# The most bytes a run file of each kind may hold before it is read whole (read_run_file): far above
# what a run writes (a config or summary is kilobytes; a lines file a few hundred bytes per round, or
# per evaluated round and client; a state a model per client), so that only a file that is not a
# run's (a planted or runaway one) is refused, before it is read into memory.
MAX_FILE_BYTES = {".json": 64 << 20, ".jsonl": 4 << 30, ".pt": 256 << 30, ".lock": 4096}
_MAX_OTHER_BYTES = 64 << 20


def _clean(obj: Any) -> Any:
    """JSON has no NaN: write ``null`` instead."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    return obj


def _fsync_dir(path: Path) -> None:
    # A rename is durable only once its directory is synced; some filesystems refuse: best effort.
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _json_bytes(obj: Any) -> bytes:
    return json.dumps(_clean(obj), indent=2, sort_keys=True, allow_nan=False).encode()


def atomic_write_json(path: Path, obj: Any) -> str:
    return atomic_write_bytes(path, _json_bytes(obj))


def atomic_write_jsonl(path: Path, rows: list[dict]) -> str:
    lines = "".join(json.dumps(_clean(r), sort_keys=True, allow_nan=False) + "\n" for r in rows)
    return atomic_write_bytes(path, lines.encode())


def _torch_bytes(obj: Any) -> bytes:
    import torch

    buf = io.BytesIO()
    torch.save(plain_state(obj), buf)
    return buf.getvalue()


# A checkpoint starts with the sha256 of the rest of it, so that a resume finds a damaged one (torn,
# emptied or with bytes changed) before it trains on from it. One file, one atomic write: a crash
# never leaves a checkpoint and its hash out of step.
CHECKPOINT_HEADER = b"fedrepro-checkpoint sha256="
_CKPT_HEAD_LEN = len(CHECKPOINT_HEADER) + 64 + 1  # the header, the hex digest, a newline


def checkpoint_bytes(payload: Any) -> bytes:
    """``payload`` serialised as a checkpoint file: the header with its sha256, then torch's bytes."""
    data = _torch_bytes(payload)
    return CHECKPOINT_HEADER + hashlib.sha256(data).hexdigest().encode() + b"\n" + data


def check_checkpoint(data: bytes, where: Path) -> bytes:
    """The torch bytes of a checkpoint file's ``data``, checked against the sha256 in its header;
    :class:`CorruptCacheError` naming ``where`` and the fix when they do not match."""
    fix = "delete it to restart this run from round 0"
    head = data[:_CKPT_HEAD_LEN]
    if not head.startswith(CHECKPOINT_HEADER) or len(head) < _CKPT_HEAD_LEN or not head.endswith(b"\n"):
        what = "is empty" if not data else "has no content hash (damaged, or written by an older fedrepro)"
        raise CorruptCacheError(f"checkpoint {where} {what}; {fix}")
    body = data[_CKPT_HEAD_LEN:]
    if hashlib.sha256(body).hexdigest().encode() != head[len(CHECKPOINT_HEADER):-1]:
        raise CorruptCacheError(f"checkpoint {where} does not match the sha256 recorded when it was written "
                                f"(truncated or bytes changed); {fix}")
    return body


def read_checkpoint(data: bytes, where: Path) -> Any:
    """The state a checkpoint file's ``data`` holds, after :func:`check_checkpoint`; tensors and plain
    values only (:func:`load_state`)."""
    return load_state(check_checkpoint(data, where), f"checkpoint {where}",
                      "delete it to restart this run from round 0")


def load_state(data: bytes, what: str, fix: str) -> Any:
    """A state or checkpoint read from its torch bytes with ``weights_only=True``: a pickled object in
    it is refused without being unpickled (it could run any code), and an archive with compressed
    entries (which could inflate to any size) before it is read (:func:`~fedrepro.env.torchfile.
    inflation_problem`), as a one-line :class:`CorruptCacheError` naming ``what``, then ``fix``."""
    import torch

    from ..data.cache import load_problem  # with torch: listing runs imports neither

    inflates = inflation_problem(data)  # a deflated entry would take ~1000x its size in memory
    if inflates is not None:
        raise CorruptCacheError(f"{what} {inflates}; {fix}")
    try:
        return torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    except Exception as e:  # torch raises several types for a file it cannot read
        raise CorruptCacheError(f"{what} {load_problem(e)}; {fix}") from e


# What a stored state may hold besides tensors and containers: what torch's weights_only loader reads back.
_PLAIN_LEAVES = (str, int, float, bool, complex, bytes, type(None))


def plain_state(obj: Any, where: str = "state") -> Any:
    """``obj`` as a stored state may hold it: tensors, numbers, strings, ``None`` and lists, tuples and
    dicts of them (what ``torch.load(weights_only=True)`` reads back). A numpy scalar becomes the
    Python number it equals (the same value); anything else is a TypeError naming where it is, as it
    is written, rather than a state no one can read back."""
    import numpy as np
    import torch

    if isinstance(obj, (torch.Tensor, torch.dtype, torch.Size, torch.device)) or type(obj) in _PLAIN_LEAVES:
        return obj
    if isinstance(obj, (np.number, np.bool_)):
        return obj.item()
    if type(obj) in (dict, collections.OrderedDict):
        for k in obj:
            if type(k) not in _PLAIN_LEAVES:
                _not_plain(k, f"a key of {where}")
        return type(obj)((k, plain_state(v, f"{where}[{k!r}]")) for k, v in obj.items())
    if type(obj) in (list, tuple):
        return type(obj)(plain_state(v, f"{where}[{i}]") for i, v in enumerate(obj))
    return _not_plain(obj, where)


def _not_plain(obj: Any, where: str):
    raise TypeError(f"{where} is a {type(obj).__module__}.{type(obj).__qualname__}; a stored state holds "
                    "tensors, numbers, strings and lists, tuples and dicts of them only (it is read back "
                    "with torch.load(weights_only=True))")


def _summary_digest(summary: dict) -> str:
    """sha256 of the summary without its record, in the form it is written (so a re-read matches)."""
    return hashlib.sha256(_json_bytes(summary)).hexdigest()


def _corrupt(path: Path, why: str, folder: Path | None = None) -> CorruptCacheError:
    folder = folder or path.parent
    return CorruptCacheError(f"run file {path} {why}; delete the folder {folder} to run this config again")


def file_limit(path: Path) -> int:
    """The most bytes :func:`read_run_file` reads from ``path`` (:data:`MAX_FILE_BYTES` by suffix)."""
    return MAX_FILE_BYTES.get(Path(path).suffix, _MAX_OTHER_BYTES)


_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
# Opening a file inside a folder descriptor (openat): a folder that is a symbolic link is refused
# when the descriptor is opened, and cannot be swapped for one between a check and the open.
_DIR_FD = os.open in os.supports_dir_fd and hasattr(os, "O_DIRECTORY") and bool(_NOFOLLOW)


def open_folder(path: Path, what: str) -> int:
    """A descriptor of the folder ``path`` itself, opened without following a link; a one-line
    :class:`CorruptCacheError` naming it (``what``: "lock folder"...) when it is a symbolic link or
    not a folder. Whoever can write the store could otherwise aim a folder fedrepro writes into
    (``.locks``) at any folder the user can write."""
    try:
        return os.open(path, os.O_RDONLY | os.O_DIRECTORY | _NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.ENOTDIR):
            raise CorruptCacheError(f"{what} {path} is a symbolic link or a file, not a folder; remove it "
                                    "(fedrepro creates it itself)") from e
        raise


def real_folder(path: Path, what: str) -> None:
    """:class:`CorruptCacheError` naming ``path`` when it exists but is not a folder itself (a symbolic
    link, even to a folder, a file or a FIFO)."""
    try:
        st = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):  # ENOTDIR: a parent is a file, so ``path`` cannot exist
        return
    if not stat.S_ISDIR(st.st_mode):
        raise CorruptCacheError(f"{what} {path} is a symbolic link or a file, not a folder; remove it "
                                "(fedrepro creates it itself)")


def read_run_file(path: Path, limit: int | None = None) -> bytes:
    """:func:`read_plain_file` of the run file ``path`` at ``limit`` bytes (default
    :func:`file_limit`); a refused file is a one-line :class:`CorruptCacheError` naming it."""
    path = Path(path)
    try:
        return read_plain_file(path, file_limit(path) if limit is None else limit)
    except RefusedFile as e:
        raise _corrupt(path, str(e)) from e


def _is_regular(path: Path) -> bool:
    """Whether ``path`` itself (not what a link points to) is a regular file."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def _make_read_only(f: Path) -> None:
    """Clear the write bits of ``f`` when it is a regular file of the run folder with no other name:
    never through a symbolic link, and never a hard link, whose other name may be any file of the
    same filesystem (chmod would change it there too). Checked on the open descriptor."""
    try:
        fd = os.open(f, os.O_RDONLY | _NOFOLLOW | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return  # a link (ELOOP), or unreadable: left as it is
    try:
        st = os.fstat(fd)
        if stat.S_ISREG(st.st_mode) and st.st_nlink == 1:
            mode = st.st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH) & 0o7777
            if hasattr(os, "fchmod"):
                os.fchmod(fd, mode)
            else:  # pragma: no cover  (Windows before Python 3.13: no links to follow there either)
                os.chmod(f, mode)
    finally:
        os.close(fd)


def _read_bytes(path: Path) -> bytes:
    try:
        return read_run_file(path)
    except FileNotFoundError as e:
        raise _corrupt(path, f"is unreadable ({e.strerror or e})") from e


def _parse_json(path: Path, data: bytes) -> Any:
    try:
        return loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise _corrupt(path, f"is unreadable ({e})") from e


def _parse_jsonl(path: Path, data: bytes) -> list[dict]:
    try:
        return [loads(line) for line in data.decode().splitlines() if line.strip()]
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise _corrupt(path, f"is unreadable ({e})") from e


def read_json(path: Path) -> Any:
    return _parse_json(path, _read_bytes(path))


def read_jsonl(path: Path) -> list[dict]:
    return _parse_jsonl(path, _read_bytes(path))


def default_runs_dir() -> Path:
    """``$FEDREPRO_RUNS``, else ``runs/`` under the output root (:mod:`fedrepro.env.settings`)."""
    return output_path("runs")


def _runs_dir_source() -> str:
    return f"${ENV_RUNS}" if os.environ.get(ENV_RUNS) else f"the output root, {source()}"


def environment_info() -> dict[str, Any]:
    import numpy
    import torch

    # torchvision's version from its installed metadata: importing the package loads its models and
    # ops, seconds of a run's set-up that no run of a dataset read without it needs.
    try:
        vision = importlib.metadata.version("torchvision")
    except importlib.metadata.PackageNotFoundError:
        vision = None
    info = {"python": platform.python_version(), "platform": platform.platform(), "torch": torch.__version__,
            "torch_git": torch.version.git_version, "torchvision": vision,
            "numpy": numpy.__version__, "fedrepro": __version__, "cpu": cpu_model(),
            "git_commit": None, "git_dirty": None}
    repo = PACKAGE_PARENT
    try:
        info["git_commit"] = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True,
                                            text=True, timeout=5, check=True).stdout.strip()
        info["git_dirty"] = bool(subprocess.run(["git", "status", "--porcelain", "--", "fedrepro"], cwd=repo,
                                                capture_output=True, text=True, timeout=5).stdout.strip())
    except (OSError, subprocess.SubprocessError):
        pass
    return info


@dataclass
class RunResult:
    """A finished run, read from its folder (a path or a string, e.g. a ``run_grid`` table's
    ``path`` column). Tables come as pandas DataFrames. Every file is checked against the sha256
    recorded when the run finished, as it is read (:meth:`verify` checks them all at once)."""

    path: Path

    def __post_init__(self) -> None:
        self.path = Path(self.path)

    @cached_property
    def _summary_and_record(self) -> tuple[dict, dict | None]:
        f = self.path / "summary.json"
        raw = read_json(f)
        if not isinstance(raw, dict):
            raise _corrupt(f, f"holds {type(raw).__name__}, not a summary")
        record = raw.pop(_RECORD, None)
        missing = [k for k in _SUMMARY_KEYS if k not in raw]
        if missing:
            raise _corrupt(f, f"is incomplete (no {', '.join(missing)})")
        if record is not None:
            if not isinstance(record, dict) or _summary_digest(raw) != record.get("summary.json"):
                raise _corrupt(f, "does not match the sha256 recorded when the run finished (edited or damaged)")
        return raw, record

    def _record_entry(self, name: str) -> dict | None:
        record = self._summary_and_record[1]
        if record is None:
            if self._meta_unchecked.get("store_format", 1) >= STORE_FORMAT:
                raise _corrupt(self.path / "summary.json", f"has no {_RECORD} record although meta.json says "
                               f"store_format {STORE_FORMAT} (edited?)")
            return None  # a legacy run: structural checks only
        entry = record.get(name)
        if not isinstance(entry, dict):
            raise _corrupt(self.path / "summary.json", f"has no sha256 recorded for {name}")
        return entry

    @cached_property
    def _meta_unchecked(self) -> dict:
        meta = read_json(self.path / "meta.json")
        return meta if isinstance(meta, dict) else {}

    def _checked_bytes(self, name: str) -> bytes:
        f = self.path / name
        if not os.path.lexists(f):
            raise _corrupt(f, "is missing from a finished run")
        data = _read_bytes(f)
        entry = self._record_entry(name)
        if entry is not None and hashlib.sha256(data).hexdigest() != entry.get("sha256"):
            raise _corrupt(f, "does not match the sha256 recorded when the run finished (edited or damaged)")
        return data

    def _check_size(self, name: str) -> None:
        f = self.path / name
        try:
            st = os.lstat(f)
        except OSError:
            raise _corrupt(f, "is missing from a finished run") from None
        if not stat.S_ISREG(st.st_mode):  # a link or FIFO is refused as read_run_file refuses it
            raise _corrupt(f, "is not a regular file (a symbolic link, FIFO or device; refused)")
        if st.st_size > file_limit(f):
            raise _corrupt(f, f"holds {st.st_size} bytes, more than the {file_limit(f)} a run file of its kind "
                           "may hold")
        entry = self._record_entry(name)
        if entry is not None and st.st_size != entry.get("bytes"):
            raise _corrupt(f, f"has {st.st_size} bytes, not the {entry.get('bytes')} recorded when the run "
                           "finished (truncated or replaced)")

    def verify(self, deep: bool = False) -> "RunResult":
        """Check the finished run: every file against its recorded sha256 (``final_state.pt`` by size
        unless ``deep``), the config against the folder name, one rounds line per round."""
        summary = self.summary
        for name in _RECORDED:
            if name in _LAZY and self.archived:
                continue
            if deep or name not in _LAZY:
                self._checked_bytes(name)
            else:
                self._check_size(name)
        stored = self._stored_config
        if stored.get("hash") != summary["config_hash"]:
            raise _corrupt(self.path / "config.json", f"is for config {stored.get('hash')!r}, not the summary's "
                           f"{summary['config_hash']!r}")
        rounds = _parse_jsonl(self.path / "rounds.jsonl", self._checked_bytes("rounds.jsonl"))
        if [r.get("round") for r in rounds] != list(range(1, int(summary["rounds"]) + 1)):
            raise _corrupt(self.path / "rounds.jsonl", f"holds {len(rounds)} rounds, not the summary's "
                           f"{summary['rounds']} (truncated?)")
        return self

    def cheap_check(self) -> str | None:
        """What is wrong with this finished run by the checks that cost no more than reading its small
        files (None when it passes): ``summary.json`` against its recorded sha256 and its fields,
        ``config.json``, ``meta.json`` and ``rounds.jsonl`` against theirs, the sizes of the larger files, and the
        config's hash against the folder name and the summary. ``fedrepro runs`` and ``show`` list a
        run that fails them as damaged; loading it (:meth:`verify`) checks every file in full."""
        try:
            summary = self.summary
            for name in _RECORDED:
                if name in _LAZY and self.archived:
                    continue
                if name in _SMALL:
                    self._checked_bytes(name)
                else:
                    self._check_size(name)
            stored = self._stored_config
        except CorruptCacheError as e:
            return str(e)
        if stored.get("hash") != self.path.name:
            return (f"run file {self.path / 'config.json'} is for run {stored.get('hash')!r}, not for its folder "
                    f"name {self.path.name!r} (copied or renamed?); delete the folder {self.path}")
        if stored.get("hash") != summary["config_hash"]:
            return (f"run file {self.path / 'summary.json'} is for run {summary['config_hash']!r}, not "
                    f"{stored.get('hash')!r}; delete the folder {self.path}")
        return None

    @cached_property
    def _stored_config(self) -> dict:
        f = self.path / "config.json"
        stored = _parse_json(f, self._checked_bytes("config.json"))
        if not isinstance(stored, dict) or not isinstance(stored.get("config"), dict):
            raise _corrupt(f, "does not hold {'hash': ..., 'config': {...}}")
        return stored

    @cached_property
    def config(self) -> RunConfig:
        try:
            return from_dict(self._stored_config["config"])
        except FedreproError as e:
            raise _corrupt(self.path / "config.json", f"holds an invalid config ({e})") from e

    @cached_property
    def meta(self) -> dict:
        return _parse_json(self.path / "meta.json", self._checked_bytes("meta.json"))

    @cached_property
    def summary(self) -> dict:
        """Best-round and final-round values (without the file hash record)."""
        return dict(self._summary_and_record[0])

    @cached_property
    def rounds(self) -> pd.DataFrame:
        """One row per round: ``round``, ``acc_mean``, ``acc_weighted``, ``acc_std``... first, the rest
        alphabetically (NaN when not evaluated)."""
        rows = pd.DataFrame(_parse_jsonl(self.path / "rounds.jsonl", self._checked_bytes("rounds.jsonl")))
        return order_round_columns(with_columns(rows, ROUND_COLUMNS_ALWAYS))

    @cached_property
    def clients(self) -> pd.DataFrame:
        """One row per (evaluated round, client): ``acc``, ``loss``, ``n_test``, ``held_out`` (a client
        without test data has NaN scores)."""
        rows = pd.DataFrame(_parse_jsonl(self.path / "clients.jsonl", self._checked_bytes("clients.jsonl")))
        return blank_untested(with_columns(rows, CLIENT_COLUMNS_ALWAYS))

    @property
    def best(self) -> float:
        return self.summary["best_acc_mean"]

    @property
    def final(self) -> float:
        return self.summary["final_acc_mean"]

    @property
    def archived(self) -> bool:
        """Whether this run was restored from the reference archive (:mod:`fedrepro.runs.archive`):
        every file of the run but its final state, which the archive does not keep."""
        return os.path.lexists(self.path / ARCHIVED)

    def final_state(self) -> dict:
        """``{"shared": ..., "server_state": ..., "client_states": [...]}`` after the last round (CPU):
        read once, checked against its recorded sha256, and loaded as tensors and plain values only
        (:func:`load_state`: a pickled object in it is refused unread, whatever its record says)."""
        f = self.path / "final_state.pt"
        if self.archived:
            raise ArchivedRunError(f"run {self.path} came from the reference archive, which keeps no model "
                                   "weights, and this needs its final state; train it: FEDREPRO_ARCHIVE=off reruns "
                                   "it (fedrepro run, a notebook, or make reproduce, which trains without the "
                                   "archive)")
        state = load_state(self._checked_bytes("final_state.pt"), f"run file {f}",
                           f"delete the folder {self.path} to run this config again")
        if not isinstance(state, dict) or not {"shared", "server_state", "client_states"} <= state.keys() \
                or not isinstance(state["client_states"], list):
            raise _corrupt(f, "does not hold a run's final state ({'shared', 'server_state', 'client_states'})")
        return state

    def checked_rows(self, name: str) -> list[dict]:
        """The rows of ``rounds.jsonl`` or ``clients.jsonl``, read once and checked against the recorded
        sha256 (what a run that starts from this one copies)."""
        rows = _parse_jsonl(self.path / name, self._checked_bytes(name))
        if not all(isinstance(r, dict) for r in rows):
            raise _corrupt(self.path / name, "holds a line that is not a JSON object")
        return rows

    def final_clients(self) -> pd.DataFrame:
        c = self.clients
        return c[c["round"] == c["round"].max()].reset_index(drop=True)

    def __repr__(self) -> str:
        s = self.summary
        return (f"RunResult({self.config.method.name}, seed={self.config.seed}, best={percent(s['best_acc_mean'])}% "
                f"@ round {s['best_round']}, final={percent(s['final_acc_mean'])}%, path={self.path})")


class RunLock:
    """An exclusive ``flock`` on one lock file. The OS drops it when the process dies, so a killed
    run never blocks its config. (Without ``fcntl``, e.g. on Windows, it always succeeds.)

    The lock file is opened without following a symbolic link and used only when it is a regular file
    with one link: whoever can write ``.locks/`` could otherwise aim it at any file the launcher may
    write, which would then be truncated to hold the lock's holder. Created with the mode the umask
    gives a new file (as the store's other files); one that this user may not write (another user's,
    in a shared store) is locked read-only, without its holder line."""

    def __init__(self, file: Path):
        self.file = file
        self._fd: int | None = None

    def _open(self) -> tuple[int, bool]:
        """The lock file's descriptor, and whether it is writable; CorruptCacheError when it is not a
        plain lock file."""
        fix = "remove it (fedrepro creates its lock files itself; nobody holds a lock through it)"
        extra = _NOFOLLOW | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
        writable = True
        # The lock file is opened inside its folder, itself opened without following a link: a
        # ``.locks`` that is a link to another folder would aim every lock file there.
        folder = open_folder(self.file.parent, "lock folder") if _DIR_FD else None
        where = {"dir_fd": folder} if folder is not None else {}
        name = self.file.name if folder is not None else self.file
        try:
            try:
                fd = os.open(name, os.O_RDWR | os.O_CREAT | extra, 0o666, **where)
            except PermissionError:
                fd, writable = os.open(name, os.O_RDONLY | extra, **where), False
        except OSError as e:
            if e.errno == errno.ELOOP and _NOFOLLOW:
                raise CorruptCacheError(f"lock file {self.file} is a symbolic link; {fix}") from e
            raise
        finally:
            if folder is not None:
                os.close(folder)
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
            os.close(fd)
            what = "has other hard links" if stat.S_ISREG(st.st_mode) else "is not a regular file"
            raise CorruptCacheError(f"lock file {self.file} {what}; {fix}")
        return fd, writable

    def acquire(self, block: bool) -> bool:
        fd, writable = self._open()
        if fcntl is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | (0 if block else fcntl.LOCK_NB))
            except BlockingIOError:
                os.close(fd)
                return False
            except BaseException:
                os.close(fd)
                raise
        self._fd = fd
        # Who holds it, for the message a busy launcher gets (best effort: read without the lock).
        if writable:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
                os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()}\n".encode(), 0)
        return True

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor drops the flock
            self._fd = None

    def holder(self) -> str:
        try:
            text = read_run_file(self.file).decode("utf-8", "replace").strip()
        except (OSError, CorruptCacheError):
            return "another process"
        return " ".join(text.split())[:200] or "another process"


class RunStore:
    """Finds, creates, resumes and finishes run folders under ``runs_dir``."""

    def __init__(self, runs_dir: str | os.PathLike | None = None):
        self.root = Path(runs_dir).expanduser() if runs_dir else default_runs_dir()
        self._chosen_by = "runs_dir" if runs_dir else _runs_dir_source()

    def path(self, cfg: RunConfig) -> Path:
        return self.root / cfg.hash()

    def status(self, cfg: RunConfig) -> str:
        """``"missing"``, ``"partial"`` (started, resumable) or ``"done"``; checks consistency."""
        p = self.path(cfg)
        # A run folder is one fedrepro made: a link (to a folder elsewhere, or dangling), a file or a
        # FIFO in its place is refused, so that nothing is written or deleted through it.
        real_folder(p, "run folder")
        if not p.is_dir():
            return "missing"
        cfg_file = p / "config.json"
        if not os.path.lexists(cfg_file):
            raise _corrupt(cfg_file, "is missing (the folder was not written by fedrepro, or was edited)", p)
        stored = read_json(cfg_file)
        if not isinstance(stored, dict) or stored.get("hash") != p.name:
            got = stored.get("hash") if isinstance(stored, dict) else None
            raise CorruptCacheError(f"{cfg_file} hashes to {got!r}, not to its folder name "
                                    f"{p.name!r}; delete the folder {p}")
        self._check_config_matches(cfg_file, stored)
        if not os.path.lexists(p / "meta.json"):
            raise _corrupt(p / "meta.json", "is missing (a run folder holds config.json and meta.json from the "
                           "start; was it edited?)", p)
        if os.path.lexists(p / "summary.json"):
            archived = os.path.lexists(p / ARCHIVED)
            for name in ("rounds.jsonl", "clients.jsonl", "meta.json", "final_state.pt"):
                if name == "final_state.pt" and archived:
                    continue
                if not os.path.lexists(p / name):
                    raise CorruptCacheError(f"finished run {p} is missing {name}; delete the folder to re-run")
            return "done"
        return "partial"

    @staticmethod
    def _check_config_matches(cfg_file: Path, stored: dict) -> None:
        # The stored config itself must hash to the folder name: a hand-edited config.json of a
        # started run would otherwise be resumed and reported as the run's config.
        try:
            rehash = from_dict(stored["config"]).hash()
        except (FedreproError, KeyError, TypeError) as e:
            raise _corrupt(cfg_file, f"holds an invalid config ({e})") from e
        if rehash != stored["hash"]:
            raise _corrupt(cfg_file, f"was edited: its config hashes to {rehash!r}, not {stored['hash']!r}")

    def meta(self, cfg: RunConfig) -> dict:
        """``meta.json`` of ``cfg``'s run, finished or not (written when the run began)."""
        return read_json(self.path(cfg) / "meta.json")

    def load(self, cfg: RunConfig) -> RunResult:
        """The finished run of ``cfg``, checked (see :meth:`RunResult.verify`)."""
        res = RunResult(self.path(cfg)).verify()
        self._tidy_finished(cfg)
        return res

    # ----------------------------------------------------------------------------------------
    # Writing: only under the run's lock (see claim)

    def prepare_root(self) -> None:
        """Create ``runs_dir``; a ConfigError naming it, and the setting that chose it, when it is a
        file or cannot be written."""
        root = self.root
        where = f"invalid runs_dir={str(root)!r} (chosen by {self._chosen_by})"
        valid = f"valid: a writable folder (set runs_dir, {ENV_RUNS} or {ENV_OUTPUT})"
        ensure_writable(root, self._chosen_by, hint=valid, where=where)
        locks = root / ".locks"
        real_folder(locks, "lock folder")  # a link to another folder, or a file: refused, not written through
        with contextlib.suppress(FileExistsError):
            locks.mkdir()
        real_folder(locks, "lock folder")

    def _lock(self, name: str) -> RunLock:
        return RunLock(self.root / ".locks" / f"{name}.lock")

    @contextlib.contextmanager
    def claim(self, cfg: RunConfig, on_busy: str = "wait") -> Iterator[str]:
        """Hold ``cfg``'s run lock for the block; yields the run's status once held (another
        launcher may have finished or half-written it meanwhile). ``on_busy`` (see :data:`ON_BUSY`)
        decides what happens when another process holds it."""
        check_on_busy(on_busy)
        self.prepare_root()
        p = self.path(cfg)
        lock = self._lock(p.name)
        waited = False
        if not lock.acquire(block=False):
            if on_busy == "error":
                raise RunBusyError(f"run {p} is being written by {lock.holder()}; on_busy='error' stops here. "
                                   "Valid on_busy: 'wait' (then reuse or resume it) or 'reuse' (wait for its result)")
            log.warning("fedrepro: run %s is being written by %s; waiting for it (on_busy=%r)", p, lock.holder(),
                        on_busy)
            lock.acquire(block=True)
            waited = True
        try:
            status = self.status(cfg)
            if waited and on_busy == "reuse" and status != "done":
                raise RunBusyError(f"the process writing run {p} stopped before finishing it; on_busy='reuse' never "
                                   "trains. Run again with on_busy='wait' to resume it from its checkpoint")
            if status != "done":
                self._remove_temporaries(p)
            yield status
        finally:
            lock.release()

    def _remove_temporaries(self, p: Path) -> None:
        """Under ``p``'s lock: drop what a killed writer left (a half-built folder, half-written files)."""
        for tmp in self.root.glob(f".{p.name}.*.tmp"):
            shutil.rmtree(tmp, ignore_errors=True)
        if p.is_dir():
            for f in p.glob(".*.tmp"):
                with contextlib.suppress(OSError):
                    f.unlink()

    def _sweep_stale(self) -> None:
        """Remove other configs' temporary folders whose writer is gone (their lock is free)."""
        for tmp in self.root.glob(".*.tmp"):
            name = tmp.name[1:].split(".", 1)[0]
            lock = self._lock(name)
            with contextlib.suppress(OSError, CorruptCacheError):
                if lock.acquire(block=False):
                    try:
                        shutil.rmtree(tmp, ignore_errors=True)
                    finally:
                        lock.release()

    def _tidy_finished(self, cfg: RunConfig) -> None:
        """A writer killed after ``summary.json`` leaves its checkpoint and writable files: tidy them
        when nobody holds the run (best effort; the run is complete either way)."""
        p = self.path(cfg)
        extra = [f for f in p.iterdir() if f.name == "checkpoint.pt" or f.name.endswith(".tmp")
                 or (_is_regular(f) and f.lstat().st_mode & stat.S_IWUSR)]
        if not extra:
            return
        with contextlib.suppress(OSError, CorruptCacheError):
            lock = self._lock(p.name)
            if (self.root / ".locks").is_dir() and lock.acquire(block=False):
                try:
                    self._seal(p)
                finally:
                    lock.release()

    @staticmethod
    def _seal(path: Path) -> None:
        ckpt = path / "checkpoint.pt"
        if ckpt.exists() or ckpt.is_symlink():
            ckpt.unlink()
        for f in path.glob(".*.tmp"):
            f.unlink()
        for f in path.iterdir():  # a finished run is immutable: make that visible on disk too
            _make_read_only(f)

    def retire(self, cfg: RunConfig, tag: str) -> Path:
        """Under ``cfg``'s lock (:meth:`claim`): move its folder to ``.stale/<hash>.<tag>`` (kept for
        inspection, never read again), so that the config can be trained anew by today's code."""
        p = self.path(cfg)
        dest = self.root / ".stale" / f"{p.name}.{tag}"
        real_folder(dest.parent, "folder of retired runs")  # never moved through a link to another folder
        dest.parent.mkdir(exist_ok=True)
        real_folder(dest.parent, "folder of retired runs")
        if dest.exists():
            dest = dest.with_name(f"{dest.name}-{uuid.uuid4().hex[:6]}")
        os.rename(p, dest)
        _fsync_dir(self.root)
        return dest

    def begin(self, cfg: RunConfig, meta: dict) -> Path:
        """Publish a new run folder holding ``config.json`` and ``meta.json``: built under a temporary
        name, then renamed, so that no launcher ever sees a folder without them."""
        p = self.path(cfg)
        self._sweep_stale()
        tmp = self.root / f".{p.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp"
        try:
            tmp.mkdir()
            meta = {**meta, **environment_info(), "started": datetime.now(timezone.utc).isoformat(),
                    "store_format": STORE_FORMAT}
            atomic_write_json(tmp / "meta.json", meta)
            atomic_write_json(tmp / "config.json", {"hash": p.name, "config": cfg.to_dict()})
            os.rename(tmp, p)
        except BaseException as e:
            shutil.rmtree(tmp, ignore_errors=True)
            if isinstance(e, OSError):
                raise write_error(e, p) from e
            raise
        _fsync_dir(self.root)
        return p

    @staticmethod
    def load_checkpoint(path: Path) -> dict | None:
        """The run's last checkpoint (None when it has none), checked against its sha256 and, as a
        resume rebuilds the run from it, for the shape of a run's state (:func:`checkpoint_problem`,
        with the run's client count and rounds from its ``meta.json`` and ``config.json``)."""
        f = path / "checkpoint.pt"
        if not os.path.lexists(f):
            return None
        ckpt = read_checkpoint(_read_bytes(f), f)
        problem = checkpoint_problem(ckpt, *_run_size(path))
        if problem is not None:
            raise CorruptCacheError(f"checkpoint {f} {problem}; delete it to restart this run from round 0")
        return ckpt

    def finish(self, path: Path, round_rows: list[dict], client_rows: list[dict], summary: dict,
               final_state: dict, meta_update: dict | None = None) -> RunResult:
        """Write the results, then ``summary.json`` with every file's sha256: until it is in place the
        run stays resumable from its checkpoint, which is removed only after."""
        if meta_update:
            meta = read_json(path / "meta.json")
            meta.update(meta_update, finished=datetime.now(timezone.utc).isoformat())
            atomic_write_json(path / "meta.json", meta)
        record = {
            "rounds.jsonl": atomic_write_jsonl(path / "rounds.jsonl", round_rows),
            "clients.jsonl": atomic_write_jsonl(path / "clients.jsonl", client_rows),
            "final_state.pt": atomic_write_bytes(path / "final_state.pt", _torch_bytes(final_state)),
        }
        entries = {name: {"sha256": h, "bytes": (path / name).stat().st_size} for name, h in record.items()}
        for name in ("config.json", "meta.json"):
            blob = _read_bytes(path / name)
            entries[name] = {"sha256": hashlib.sha256(blob).hexdigest(), "bytes": len(blob)}
        summary = _clean(summary)
        entries["summary.json"] = _summary_digest(summary)
        atomic_write_json(path / "summary.json", {**summary, _RECORD: entries})
        self._seal(path)
        _fsync_dir(path)
        return RunResult(path)


# The entries of a checkpoint's state: the fields of the engine's SimState (fedrepro.fl.engine), which a
# resume rebuilds from them.
CHECKPOINT_STATE = ("next_round", "shared", "server_state", "client_states", "client_rows", "round_rows")


def checkpoint_problem(ckpt: Any, num_clients: int | None = None, rounds: int | None = None) -> str | None:
    """What is wrong with ``ckpt`` (a checkpoint as :func:`read_checkpoint` returns it) as the state of
    a run of ``num_clients`` clients and ``rounds`` rounds (None: not checked), or None. Its sha256
    header proves only that the file is whole: a checkpoint written with another structure (by hand,
    or planted with its header) would otherwise be resumed into a traceback deep in training."""
    state = ckpt.get("state") if isinstance(ckpt, dict) else None
    if not isinstance(state, dict):
        return "does not hold a run's state"
    if set(state) != set(CHECKPOINT_STATE):
        return f"holds the state entries {sorted(map(str, state))}, not {list(CHECKPOINT_STATE)}"
    n = state["next_round"]
    if type(n) is not int or n < 0 or (rounds is not None and n > rounds):
        return f"is at round {n!r}, not a round of this run (0 to {rounds if rounds is not None else 'its rounds'})"
    kinds = {"shared": dict, "client_states": list, "client_rows": list, "round_rows": list}
    wrong = [k for k, kind in kinds.items() if not isinstance(state[k], kind)]
    if wrong:
        return f"holds {', '.join(f'{k} of type {type(state[k]).__name__}' for k in wrong)}"
    if num_clients is not None and len(state["client_states"]) != num_clients:
        return f"holds {len(state['client_states'])} client states, not the run's {num_clients}"
    rows = state["round_rows"]
    if len(rows) != n or not all(isinstance(r, dict) and isinstance(r.get("time_train_s"), (int, float))
                                 and r.get("round") == i for i, r in enumerate(rows, 1)):
        return f"does not hold one row per round 1 to {n} (its round_rows)"
    if not all(isinstance(r, dict) and type(r.get("round")) is int and 1 <= r["round"] <= n
               for r in state["client_rows"]):
        return f"holds a client row that is not of a round 1 to {n} (its client_rows)"
    return None


def _run_size(path: Path) -> tuple[int | None, int | None]:
    """The client count (``meta.json``) and rounds (``config.json``) of the run in ``path``, each None
    when it cannot be read (the run's own checks report that)."""
    out: list[int | None] = []
    for name, keys in (("meta.json", ("num_clients",)), ("config.json", ("config", "train", "rounds"))):
        try:
            value: Any = read_json(path / name)
            for k in keys:
                value = value[k]
        except (CorruptCacheError, KeyError, TypeError, IndexError):
            value = None
        out.append(value if type(value) is int and value >= 0 else None)
    return out[0], out[1]


def read_files(folder: Path, names: tuple[str, ...]) -> dict[str, bytes]:
    """The bytes of ``names`` in ``folder`` (those that exist)."""
    out = {}
    for name in names:
        with contextlib.suppress(FileNotFoundError):
            out[name] = read_run_file(Path(folder) / name)
    return out


class RunReceiver:
    """Writes into ``store`` the files of runs trained elsewhere (a Ray worker with a private
    store; :mod:`fedrepro.execute`), through the same atomic writes as a run trained here. The
    caller holds the run's lock (:meth:`RunStore.claim`), as for any write.

    A started run arrives as :data:`PARTIAL_FILES` (its folder is published with ``config.json``
    and ``meta.json`` already in it, as :meth:`RunStore.begin` does); a finished one as
    :data:`FINISHED_FILES`, checked against its own sha256 record before any of it is written, and
    written with ``summary.json`` last (as :meth:`RunStore.finish` does): a crash at any instant
    leaves no run, a resumable run or the finished one."""

    def __init__(self, store: "RunStore"):
        self.store = store

    def _check_config(self, cfg: RunConfig, files: dict[str, bytes], what: str) -> None:
        missing = [n for n in ("config.json", "meta.json") if n not in files]
        if missing:
            raise CorruptCacheError(f"{what} of run {cfg.hash()} came without {', '.join(missing)}")
        stored = _parse_json(self.store.path(cfg) / "config.json", files["config.json"])
        if not isinstance(stored, dict) or stored.get("hash") != cfg.hash():
            got = stored.get("hash") if isinstance(stored, dict) else None
            raise CorruptCacheError(f"{what} for run {cfg.hash()} holds the config of run {got!r}")

    def _publish(self, cfg: RunConfig, files: dict[str, bytes], names: tuple[str, ...]) -> Path:
        """A new run folder holding ``names`` from ``files``, built under a temporary name and renamed."""
        p = self.store.path(cfg)
        tmp = self.store.root / f".{p.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp"
        tmp.mkdir()
        try:
            for name in names:
                atomic_write_bytes(tmp / name, files[name])
            os.rename(tmp, p)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        _fsync_dir(self.store.root)
        return p

    def checkpoint(self, cfg: RunConfig, files: dict[str, bytes]) -> Path:
        """Store a started run's last checkpoint (:data:`PARTIAL_FILES`)."""
        self._check_config(cfg, files, "a checkpoint")
        if "checkpoint.pt" not in files:
            raise CorruptCacheError(f"a checkpoint of run {cfg.hash()} came without checkpoint.pt")
        p = self.store.path(cfg)
        if not (p / "summary.json").exists():  # checked as a resume will read it (a finished run refuses below)
            check_checkpoint(files["checkpoint.pt"], p / "checkpoint.pt")
        if not p.is_dir():
            return self._publish(cfg, files, PARTIAL_FILES)
        if (p / "summary.json").exists():
            raise CorruptCacheError(f"run {p} is finished; a checkpoint of it cannot be stored")
        # The worker may have begun the run anew (it found the checkpoint stale): its meta.json goes first.
        if _read_bytes(p / "meta.json") != files["meta.json"]:
            atomic_write_bytes(p / "meta.json", files["meta.json"])
        atomic_write_bytes(p / "checkpoint.pt", files["checkpoint.pt"])
        return p

    def finished(self, cfg: RunConfig, files: dict[str, bytes]) -> RunResult:
        """Store a finished run (:data:`FINISHED_FILES`), after checking it against its own record."""
        self._check_config(cfg, files, "a finished run")
        missing = [n for n in FINISHED_FILES if n not in files]
        if missing:
            raise CorruptCacheError(f"finished run {cfg.hash()} came without {', '.join(missing)}")
        p = self.store.path(cfg)
        # Checked as it will be read: every file against the sha256 the worker recorded.
        check = Path(tempfile.mkdtemp(dir=self.store.root, prefix=f".{p.name}.check-", suffix=".tmp"))
        try:
            for name in FINISHED_FILES:
                (check / name).write_bytes(files[name])
            RunResult(check).verify(deep=True).final_state()  # and its state is tensors only
        finally:
            shutil.rmtree(check, ignore_errors=True)
        if not p.is_dir():
            p = self._publish(cfg, files, FINISHED_FILES)
        else:
            for name in FINISHED_FILES:
                if name != "summary.json":
                    atomic_write_bytes(p / name, files[name])
            atomic_write_bytes(p / "summary.json", files["summary.json"])
        RunStore._seal(p)
        _fsync_dir(p)
        return RunResult(p)


class CheckpointWriter:
    """Writes a run's checkpoints on a background thread, so that the disk write and its fsync
    overlap the next round's training instead of adding to it (at the laptop's sizes a round takes
    about half a second and a durable write tens of milliseconds).

    :meth:`save` serialises the state at once, on the caller's thread, so the checkpoint is the
    state of that round whatever training does next; it first waits for the previous write, so at
    most one is in flight and they land in order. :meth:`wait` (and leaving the ``with`` block)
    waits for the last one and re-raises its error, if any. Each write is atomic
    (:func:`atomic_write_bytes`): a crash leaves the previous checkpoint or this one.
    """

    def __init__(self, path: Path):
        from concurrent.futures import ThreadPoolExecutor

        self.file = Path(path) / "checkpoint.pt"
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="fedrepro-checkpoint")
        self._pending = None

    def save(self, payload: dict) -> None:
        data = checkpoint_bytes(payload)
        self.wait()
        self._pending = self._pool.submit(atomic_write_bytes, self.file, data)

    def wait(self) -> None:
        pending, self._pending = self._pending, None
        if pending is not None:
            pending.result()

    def __enter__(self) -> "CheckpointWriter":
        return self

    def __exit__(self, *exc) -> None:
        try:
            self.wait()
        finally:
            self._pool.shutdown(wait=True)


def check_on_busy(on_busy: str) -> None:
    if on_busy not in ON_BUSY:
        raise ConfigError(f"invalid on_busy={on_busy!r}; valid: {', '.join(ON_BUSY)}")
