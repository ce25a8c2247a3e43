"""Derived data caches that vouch for their own content: a sha256 of every entry is written inside the
file and checked on every read.

The caches of decoded or rendered images (:mod:`.fashion_mnist_domains`, :mod:`.tiny_imagenet`,
:mod:`.image_folder`, :mod:`.inaturalist`) sit in a data root that others may share. A cache whose
bytes changed after it was written (a flipped bit, an edit, a copy cut short) still loads as tensors
of the right type, and would be trained on under the same config hash. So a cache is read through
:func:`load_verified`: a file that is unreadable, lacks an entry, fails its digest or was built from
other source files is rebuilt, with a warning that names it, never used.

The digest detects damage, not a forgery: whoever can write the cache can write a matching digest
too (docs/reliability.md, "Threat model").
"""
from __future__ import annotations

import hashlib
import json
import warnings
from pathlib import Path
from typing import Any, Iterable, Mapping

import numpy as np
import torch

from .cache import cache_problem, save_atomic

DIGEST = "sha256"  # the cache entry that holds the digest of all the others


def content_digest(obj: Mapping[str, Any]) -> str:
    """sha256 over every entry of ``obj`` but :data:`DIGEST`: each key, and a tensor's dtype, shape and
    bytes, or any other value's JSON."""
    h = hashlib.sha256()
    for key in sorted(k for k in obj if k != DIGEST):
        value = obj[key]
        h.update(f"{key}\0".encode())
        if isinstance(value, torch.Tensor):
            t = value.detach().cpu().contiguous()
            h.update(f"{t.dtype}{tuple(t.shape)}\0".encode())
            if t.dtype == torch.bfloat16:
                t = t.view(torch.int16)
            h.update(np.ascontiguousarray(t.numpy()).view(np.uint8).reshape(-1))
        else:
            h.update(json.dumps(value, sort_keys=True, default=str).encode())
        h.update(b"\0")
    return h.hexdigest()


def save_verified(obj: Mapping[str, Any], path: Path) -> bool:
    """Write the cache ``obj`` to ``path`` atomically with its digest (False, with a warning, when the
    folder is not writable: :func:`fedrepro.data.cache.save_atomic`)."""
    return save_atomic({**obj, DIGEST: content_digest(obj)}, Path(path))


def load_verified(path: Path, required: Iterable[str], expect: Mapping[str, Any] | None = None,
                  stacklevel: int = 3) -> dict[str, Any] | None:
    """The cache at ``path`` when it is sound, else None after a one-line warning naming it (the
    caller rebuilds it). Sound: readable, with the ``required`` entries, its digest matching its
    content, and every entry of ``expect`` equal to the cache's own (what it was built from: its
    source files' digest, its version)."""
    path = Path(path)

    def rebuild(why: str) -> None:
        warnings.warn(f"cache file {path} {why}; rebuilding it", stacklevel=stacklevel + 1)

    cache, why = cache_problem(path, (*required, DIGEST))
    if cache is None:
        rebuild(why)
        return None
    try:
        digest = content_digest(cache)
    except (TypeError, ValueError, RuntimeError) as exc:  # an entry that is no tensor or JSON value
        rebuild(f"holds an entry that is neither a tensor nor plain data ({type(exc).__name__}: {exc})")
        return None
    if cache[DIGEST] != digest:
        rebuild(f"is damaged or was altered: its content's sha256 is {digest[:16]}..., it records "
                f"{str(cache[DIGEST])[:16]}...")
        return None
    for key, want in (expect or {}).items():
        if cache.get(key) != want:
            rebuild(f"is stale: it was built with {key}={cache.get(key)!r}, this load needs {want!r}")
            return None
    return cache


def holds_images(cache: Mapping[str, Any], key: str, count: int, shape: tuple[int, ...]) -> bool:
    """Whether ``cache[key]`` is ``count`` uint8 images of ``shape`` ([C, H, W]): a sound file may still
    hold the wrong number of images (a source that was cut short when the cache was built)."""
    x = cache.get(key)
    return isinstance(x, torch.Tensor) and x.dtype == torch.uint8 and tuple(x.shape) == (count, *shape)


def holds_ids(cache: Mapping[str, Any], key: str, count: int, below: int) -> bool:
    """Whether ``cache[key]`` is ``count`` int64 ids in [0, ``below``)."""
    t = cache.get(key)
    return (isinstance(t, torch.Tensor) and t.dtype == torch.int64 and tuple(t.shape) == (count,)
            and (count == 0 or (int(t.min()) >= 0 and int(t.max()) < below)))
