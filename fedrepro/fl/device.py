"""Device choice: CUDA when present, else Apple MPS, else CPU. Never hard-coded."""
from __future__ import annotations

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
