"""Content digests of the input files a run reads, computed once per process.

Datasets whose files differ from user to user (CIFAR's batches, Tiny-ImageNet's and image folders'
JPEGs, iNaturalist's split files and images) cannot be checked against a manifest the way
Fashion-MNIST is (:data:`fedrepro.data.fashion_mnist.MANIFEST`). Their content is digested instead and
recorded with the run (``meta.json``: ``inputs``, :func:`fedrepro.runs.fingerprint.inputs`), so a
stored run is reused only for the input it was trained on.

A file's digest is kept for the process, keyed by its path and what ``stat`` says of it (size,
mtime, ctime, inode, device): a file changed in place changes its ctime, which no user can set back,
so a changed file is read again, and an unchanged one is read once however many runs ask. A file
changed within :data:`RACY_NS` of now is not kept: the clock that stamps files ticks coarsely, so a
second change within one tick could leave every stamp as it was (git's "racily clean" entries).
"""
from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path
from typing import Callable, Iterable

_CHUNK = 1 << 20
RACY_NS = 100_000_000  # 0.1 s: well above the coarsest file-time tick (10 ms at HZ=100)
# (path, size, mtime_ns, ctime_ns, inode, device) -> sha256 of the file's bytes.
_MEMO: dict[tuple, str] = {}


def file_digest(path: str | os.PathLike[str]) -> str:
    """sha256 (hex) of the bytes of the file ``path`` (followed if a link: its content is what is read)."""
    path = Path(path)
    st = os.stat(path)
    key = (str(path), st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev)
    digest = _MEMO.get(key)
    if digest is None:
        h = hashlib.sha256()
        with open(path, "rb") as f:
            while chunk := f.read(_CHUNK):
                h.update(chunk)
        digest = h.hexdigest()
        if time.time_ns() - max(st.st_mtime_ns, st.st_ctime_ns) > RACY_NS:
            _MEMO[key] = digest
    return digest


def files_digest(paths: Iterable[str | os.PathLike[str]], base: str | os.PathLike[str]) -> str:
    """One sha256 (hex) over the files ``paths``: each one's path relative to ``base`` and its content's
    digest, in sorted order. Where the data root lies does not change it; a renamed, added, removed
    or changed file does."""
    base = Path(base)
    rows = sorted((Path(p).relative_to(base).as_posix() if Path(p).is_relative_to(base) else str(p), file_digest(p))
                  for p in paths)
    h = hashlib.sha256()
    for rel, digest in rows:
        h.update(f"{rel}\0{digest}\n".encode())
    return h.hexdigest()


# (dataset, options, data root) -> digest of all its files: see dataset_digest.
_DATASETS: dict[tuple, str] = {}


def dataset_digest(key: tuple, compute: Callable[[], str | None]) -> str | None:
    """The digest of a dataset's files (``compute()``), once per process and ``key``: a planner asks for
    hundreds of runs of one dataset, and listing 100k files each time would cost more than the rest.
    Like the decoded datasets a process keeps (:mod:`fedrepro.runs.pipeline`), it is what the files
    were when this process first read them. None (files not here) is not kept."""
    digest = _DATASETS.get(key)
    if digest is None:
        digest = compute()
        if digest is not None:
            _DATASETS[key] = digest
    return digest


def forget() -> None:
    """Drop the process's digests (tests; a process that must read every file again)."""
    _MEMO.clear()
    _DATASETS.clear()
