"""Writing a pretrained checkpoint with the record that makes it reproducible and judgeable.

Beside ``<name>.pt`` goes ``<name>.json``: the config, the hash of the exact pretraining data, the
hash of the weights, package versions, thread count, wall time and the measured quality numbers.
"""
from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import os
import platform
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from ..env.atomic import atomic_write_bytes, write_error

MAX_BYTES = 10_000_000  # committed checkpoints stay small enough for git
# What a pretraining config's ``out`` may be (checkpoint_path_ok), and what to do when it cannot be written.
OUT_VALID = "empty (the committed path) or a file path whose folder exists or can be made, writable"
OUT_FIX = "name another file with --set out=PATH"
VERSIONED = ("torch", "timm", "open_clip_torch", "numpy", "Pillow", "matplotlib", "fedrepro")


def tensor_hash(*tensors: Tensor) -> str:
    """sha256 over the raw bytes, dtypes and shapes of ``tensors`` (in order)."""
    h = hashlib.sha256()
    for t in tensors:
        t = t.detach().cpu().contiguous()
        h.update(f"{t.dtype}{tuple(t.shape)}".encode())
        h.update(t.numpy().tobytes() if t.dtype != torch.bfloat16 else t.view(torch.int16).numpy().tobytes())
    return h.hexdigest()


def state_hash(state: Mapping[str, Tensor]) -> str:
    """Hash of a state dict, independent of how it was serialised."""
    h = hashlib.sha256()
    for k in sorted(state):
        h.update(k.encode())
        h.update(tensor_hash(state[k]).encode())
    return h.hexdigest()


def versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for pkg in VERSIONED:
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            pass
    return out


def compact(state: Mapping[str, Tensor], max_bytes: int = MAX_BYTES) -> tuple[dict[str, Tensor], str]:
    """The state dict in fp32 if it fits ``max_bytes``, else in fp16; returns it and the dtype used."""
    state = {k: v.detach().cpu().contiguous() for k, v in state.items()}
    for dtype in (torch.float32, torch.float16):
        cast = {k: v.to(dtype) if v.is_floating_point() else v for k, v in state.items()}
        buf = io.BytesIO()
        torch.save(cast, buf)
        if buf.tell() <= max_bytes:
            return cast, str(dtype).removeprefix("torch.")
    raise ValueError(f"state dict is over {max_bytes} bytes even in fp16; shrink the model")


def write_checkpoint(
    path: Path, state: Mapping[str, Tensor], config: Any, data_hash: str, quality: Mapping[str, Any],
    extra: Mapping[str, Any] | None = None,
) -> Path:
    """Write ``path`` (state dict, fp16 if needed to stay ≤ 10 MB) and ``path.with_suffix('.json')``."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise write_error(e, path.parent, OUT_FIX) from e
    stored, dtype = compact(state)
    buf = io.BytesIO()
    torch.save(stored, buf)
    # Written whole or not at all, and a failure is an error: a checkpoint is the command's product,
    # not a cache to skip (the JSON beside it would otherwise describe weights that are not there).
    atomic_write_bytes(path, buf.getvalue(), OUT_FIX)
    record = {
        "config": dataclasses.asdict(config) if dataclasses.is_dataclass(config) else dict(config),
        "data_hash": data_hash,
        "weights_hash": state_hash(stored),
        "dtype": dtype,
        "bytes": path.stat().st_size,
        "versions": versions(),
        "quality": dict(quality),
        **dict(extra or {}),
    }
    atomic_write_bytes(path.with_suffix(".json"), (json.dumps(record, indent=2, sort_keys=False) + "\n").encode(),
                       OUT_FIX)
    return path


def checkpoint_path_ok(out: str) -> bool:
    """Whether ``out`` can name a checkpoint to write: empty (the committed path), or a path that is
    not a folder, below a folder that exists or can be made (its nearest existing ancestor is a
    writable folder). Checked with the config, before the minutes of pretraining."""
    if out == "":
        return True
    path = Path(out)
    if path.is_dir() or path.name == "":
        return False
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    return parent.is_dir() and os.access(parent, os.W_OK)
