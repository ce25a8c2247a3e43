"""Writing a file whole or not at all: a crash, a full disk or a read-only folder leaves the path
as it was, and the failure is a one-line :class:`~fedrepro.errors.ResourceError` saying what to do."""
from __future__ import annotations

import errno
import functools
import hashlib
import os
import tempfile
from pathlib import Path

from ..errors import ResourceError

# What to do when a write to the store fails (the default of write_error).
STORE_FIX = ("point runs_dir ($FEDREPRO_RUNS) or $FEDREPRO_OUTPUT elsewhere, then run again (what was stored "
             "before is intact, and an unfinished run resumes from its last checkpoint)")


@functools.lru_cache(maxsize=None)
def _umask() -> int:
    """The process's umask, read without changing it where Linux shows it."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0)
    os.umask(mask)
    return mask


def plain_mode() -> int:
    """The mode ``open(path, "w")`` would give a new file: a temporary file is made private (0600),
    so a file renamed into place would keep that, and a shared store's results would be unreadable
    to the group the umask lets read them."""
    return 0o666 & ~_umask()


def write_error(e: OSError, path: Path, fix: str = STORE_FIX) -> ResourceError:
    """A one-line :class:`ResourceError` for a write to ``path`` that failed with ``e`` (a full disk,
    a quota, a read-only or vanished folder), saying what to do: free space or make the folder
    writable, or ``fix``."""
    full = e.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
    return ResourceError(f"cannot write {path}: {e.strerror or e}; "
                         + ("free space there" if full else "make it writable") + f", or {fix}")


def atomic_write_bytes(path: Path, data: bytes, fix: str = STORE_FIX) -> str:
    """Write ``data`` to ``path`` atomically and durably; returns its sha256 (hex). A failed write
    (a full disk...) leaves ``path`` as it was and raises :func:`write_error`'s ResourceError."""
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        os.fchmod(fd, plain_mode())
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as e:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)
        if isinstance(e, OSError):
            raise write_error(e, path, fix) from e
        raise
    return hashlib.sha256(data).hexdigest()
