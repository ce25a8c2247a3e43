"""Writing a pretrained checkpoint with the record that makes it reproducible and judgeable, and
reading it back checked against that record.

Beside ``<name>.pt`` goes ``<name>.json``: the config, the hash of the exact pretraining data, the
hash of the weights, package versions, thread count, wall time and the measured quality numbers.
:func:`read_record` and :func:`load_checked` read them back: a record that is not JSON, a checkpoint
that does not load, and weights whose hash is not the record's ``weights_hash`` (a flipped bit, a
file swapped for another) are each a one-line error naming the file, never a backbone built from them.
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

from ..data.digest import file_digest
from ..env.atomic import atomic_write_bytes, write_error
from ..errors import CorruptCacheError, FedreproError
from .backbones import read_weights
from .registry import MODELS, model_kwargs

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


def read_record(path: str | Path, fix: str) -> dict[str, Any] | None:
    """The JSON record beside the checkpoint ``path`` (``<stem>.json``), or None when there is none.

    A record that cannot be read, is not JSON or is not a JSON object is a one-line
    :class:`CorruptCacheError` naming it (``fix``: how to get a sound one)."""
    record_path = Path(path).with_suffix(".json")
    if not record_path.is_file():
        return None
    try:
        record = json.loads(record_path.read_bytes())
    except (OSError, UnicodeDecodeError, ValueError) as e:  # JSONDecodeError is a ValueError
        raise CorruptCacheError(f"checkpoint record {record_path} is unreadable or not JSON ({type(e).__name__}: "
                                f"{str(e).splitlines()[0] if str(e) else ''}); {fix}") from e
    if not isinstance(record, dict):
        raise CorruptCacheError(f"checkpoint record {record_path} holds a JSON {type(record).__name__}, not an "
                                f"object; {fix}")
    return record


def record_entry(record: Mapping[str, Any], path: str | Path, *keys: str, fix: str) -> Any:
    """``record[keys[0]][keys[1]]...`` of the record beside ``path``, or a one-line error naming the record."""
    value: Any = record
    for i, key in enumerate(keys):
        if not isinstance(value, Mapping) or key not in value:
            raise CorruptCacheError(f"checkpoint record {Path(path).with_suffix('.json')} has no "
                                    f"{'.'.join(keys[:i + 1])!r}; {fix}")
        value = value[key]
    return value


def load_checked(path: str | Path, record: Mapping[str, Any] | None, fix: str) -> dict[str, Tensor]:
    """The state dict in the checkpoint ``path`` (tensors only: ``weights_only``), checked against the
    ``weights_hash`` of its ``record`` when there is one.

    A file that does not load (cut short, not a checkpoint) or holds no state dict, and weights whose
    :func:`state_hash` is not the record's, are each a one-line :class:`CorruptCacheError` naming
    ``path`` (``fix``: how to get a sound one)."""
    path = Path(path)
    state = read_weights(path, "checkpoint", fix, CorruptCacheError)  # weights_only: no pickle runs
    if not isinstance(state, dict) or not all(isinstance(v, Tensor) for v in state.values()):
        raise CorruptCacheError(f"checkpoint {path} holds a {type(state).__name__}, not a state dict of tensors; "
                                f"{fix}")
    if record is not None:
        want = record_entry(record, path, "weights_hash", fix=fix)
        got = state_hash(state)
        if got != want:
            raise CorruptCacheError(f"checkpoint {path} does not match its record {path.with_suffix('.json')}: its "
                                    f"weights hash to {got[:16]}..., the record says {str(want)[:16]}...; the file "
                                    f"is damaged or was replaced; {fix}")
    return state


def weights_digest(model: str, args: Mapping[str, Any] | None = None) -> str | None:
    """sha256 of the pretrained weights file(s) that model ``model`` with ``args`` reads (its builder's
    ``weight_files(**args)`` lists them: a path in the config, a committed checkpoint, or a file an
    environment variable names, which the config does not hold), or None when it reads none or they
    are not here. A run records it, and a stored run is reused only while it is unchanged
    (:func:`fedrepro.runs.fingerprint.inputs`). Each file is read once per process."""
    files_of = getattr(MODELS.get(model), "weight_files", None)
    if files_of is None:
        return None
    try:
        files = files_of(**{**model_kwargs(model), **(args or {})})
        if not files:
            return None
        return hashlib.sha256("\n".join(file_digest(f) for f in files).encode()).hexdigest()
    except (OSError, FedreproError):  # missing or unreadable: building the model says what is wrong
        return None
