"""Device choice: CUDA when present, else Apple MPS, else CPU. Never hard-coded."""
from __future__ import annotations

import os
from contextlib import contextmanager
from typing import Iterator

import torch

from ..errors import ConfigError


def _mps_available() -> bool:
    mps = getattr(torch.backends, "mps", None)
    return mps is not None and mps.is_available()


def _available() -> str:
    names = ["'auto'", "'cpu'"]
    if torch.cuda.is_available():
        names.append("'cuda'" + (f" ('cuda:0'..'cuda:{torch.cuda.device_count() - 1}')"
                                 if torch.cuda.device_count() > 1 else ""))
    if _mps_available():
        names.append("'mps'")
    return ", ".join(names)


def resolve_device(name: str = "auto") -> torch.device:
    """The torch device for ``device=name``; a ConfigError (not a torch RuntimeError at the first
    tensor) when the machine does not have it."""
    if name == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if _mps_available():
            return torch.device("mps")
        return torch.device("cpu")
    try:
        dev = torch.device(name)
    except (RuntimeError, TypeError) as e:
        raise ConfigError(f"invalid device={name!r}; valid on this machine: {_available()}") from e
    if dev.type == "cuda":
        ok = torch.cuda.is_available() and (dev.index is None or dev.index < torch.cuda.device_count())
    elif dev.type == "mps":
        ok = _mps_available()
    else:
        ok = dev.type == "cpu"
    if not ok:
        raise ConfigError(f"invalid device={name!r}: this machine has no such device; valid on this machine: "
                          f"{_available()}")
    return dev


def visible_gpus(name: str = "auto") -> list[str]:
    """The GPUs that runs of ``device=name`` may train on, each as ``CUDA_VISIBLE_DEVICES`` names it
    for a child process (this process's own ``CUDA_VISIBLE_DEVICES`` entries when it is set, else the
    card indices); empty when such runs train off CUDA. A run on ``cuda:N`` trains on that card only."""
    dev = resolve_device(name)
    if dev.type != "cuda":
        return []
    seen = os.environ.get("CUDA_VISIBLE_DEVICES")
    names = ([v.strip() for v in seen.split(",") if v.strip()] if seen
             else [str(i) for i in range(torch.cuda.device_count())])
    return names if dev.index is None else [names[dev.index]]


@contextmanager
def torch_threads(n: int) -> Iterator[None]:
    """Run the block with ``n`` intra-op threads, then restore the caller's count."""
    before = torch.get_num_threads()
    if n != before:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        if torch.get_num_threads() != before:
            torch.set_num_threads(before)
