"""Seed derivation. Every random draw in a run comes from a generator seeded from (seed, purpose, ...).

Deriving one independent stream per (round, client) is what makes a resumed run bitwise equal to an
uninterrupted one: nothing depends on how many draws happened before the interruption.
"""
from __future__ import annotations

import contextlib
import hashlib
from typing import Iterator

import numpy as np
import torch

_PURPOSES = {"partition": 1, "sample": 2, "client": 3, "init": 4, "eval": 5, "subset": 6, "server": 7,
             "eval_global": 8, "analysis": 9, "validation": 10}


def derive_seed(seed: int, purpose: str, *keys: int) -> int:
    """A 63-bit seed from the run seed, a named purpose and integer keys (round, client...)."""
    words = [int(seed), _PURPOSES[purpose], *map(int, keys)]
    digest = hashlib.sha256(np.asarray(words, dtype=np.int64).tobytes()).digest()
    return int.from_bytes(digest[:8], "little") & ((1 << 63) - 1)


def numpy_rng(seed: int, purpose: str, *keys: int) -> np.random.Generator:
    return np.random.default_rng(derive_seed(seed, purpose, *keys))


def torch_gen(seed: int, purpose: str, *keys: int) -> torch.Generator:
    return torch.Generator().manual_seed(derive_seed(seed, purpose, *keys))


@contextlib.contextmanager
def seeded_scope(seed: int) -> Iterator[None]:
    """Seed torch's global RNG inside the block and restore it after.

    Methods draw from the explicit generator they are given; this scope only pins library code that
    reads the global RNG (e.g. nn.Module init, dropout) so that it is deterministic too.
    """
    devices = [torch.cuda.current_device()] if torch.cuda.is_available() else []
    with torch.random.fork_rng(devices=devices):
        # torch.manual_seed would also queue a seed for every accelerator torch knows (CUDA, XPU,
        # MTIA), formatting a stack trace for each: 3% of a laptop FedAvg round. Seed what exists.
        torch.default_generator.manual_seed(seed)
        if devices:
            torch.cuda.manual_seed_all(seed)
        if torch.backends.mps.is_available():
            torch.mps.manual_seed(seed)
        yield
