"""Atomic write and validated read of decoded-tensor cache files.

Decoding JPEG datasets takes minutes, so decoded tensors are cached next to the
data. A crash mid-write must never leave a half-written cache that later loads
as garbage, hence write-to-temp + ``os.replace``; and a cache that cannot be
read is reported (with the fix) rather than silently rebuilt over.

Every file fedrepro reads back with ``torch.load`` (these caches, the store's states and
checkpoints, pretrained weights) may have been written by someone else (a shared data folder or
store), so it is read with ``weights_only=True``: tensors, numbers, strings and containers of
them, never a pickled object, whose unpickling could run any code. :func:`load_problem` says in
one line why such a load failed.
"""
from __future__ import annotations

import os
import re
import stat
import tempfile
import warnings
from pathlib import Path
from typing import Any, Iterable

import torch

from ..errors import CorruptCacheError


def save_atomic(obj: Any, path: Path) -> bool:
    """``torch.save`` to ``path`` atomically; returns False (with a warning) if the folder is not writable.

    A read-only dataset folder (shared cluster copy) should cost speed, not a crash.
    """
    path = Path(path)
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        warnings.warn(f"could not write cache {path} ({exc}); data will be decoded again next time", stacklevel=2)
        return False
    try:
        with os.fdopen(fd, "wb") as f:
            torch.save(obj, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        return True
    except OSError as exc:
        warnings.warn(f"could not write cache {path} ({exc}); data will be decoded again next time", stacklevel=2)
        return False
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def load_problem(exc: BaseException) -> str:
    """Why ``torch.load(..., weights_only=True)`` failed, in one line: a refused pickled object (the
    global or opcode torch's restricted unpickler named), or the first line of any other error."""
    text = str(exc)
    if "Weights only load failed" in text:
        found = re.search(r"GLOBAL ([\w.]+)", text) or re.search(r"(Unsupported operand \d+)", text)
        what = f" ({found.group(1)})" if found else ""
        return (f"holds a pickled Python object{what}, not only tensors and numbers; refused without "
                "unpickling it (written by an older fedrepro, or planted)")
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    return f"is unreadable ({type(exc).__name__}: {first[:200]})"


def cache_problem(path: Path, required: Iterable[str]) -> tuple[dict[str, Any] | None, str]:
    """``(cache, "")`` for a sound cache dict written by :func:`save_atomic` with the ``required``
    keys, else ``(None, why)``: not a regular file, unreadable, a pickled object, or malformed."""
    try:
        # A FIFO or device in place of the cache would hang or fill the memory: regular files only.
        if not stat.S_ISREG(os.stat(path).st_mode):
            return None, "is not a regular file"
        obj = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises many types for a bad file (EOF, unpickling, zip)
        return None, load_problem(exc)
    missing = [k for k in required if not isinstance(obj, dict) or k not in obj]
    if missing:
        return None, f"is malformed (missing {', '.join(missing)})"
    return obj, ""


def load_cache(path: Path, required: Iterable[str]) -> dict[str, Any]:
    """Read a cache dict written by :func:`save_atomic`, checking it has the ``required`` keys.

    Raises :class:`CorruptCacheError` naming the file and telling the user to
    delete it if it is unreadable or malformed (:func:`cache_problem`).
    """
    obj, why = cache_problem(Path(path), required)
    if obj is None:
        raise CorruptCacheError(f"cache file {path} {why}; delete it and it will be rebuilt from the source images")
    return obj
