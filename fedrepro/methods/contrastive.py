"""MoCo's pieces (He et al. 2020), as FedPFT+Con uses them (FedPFT (ICLR) App. C.1, Eq. 7).

- :func:`info_nce`: the loss, the positive key against the queue's negatives;
- :func:`enqueue`: the queue of negative keys, a ring buffer the newest keys overwrite;
- :func:`momentum_update`: the key encoder as an exponential moving average of the query encoder.
"""
from __future__ import annotations

from typing import Iterable

import torch
import torch.nn.functional as F
from torch import Tensor, nn


def info_nce(q: Tensor, k: Tensor, queue: Tensor, temperature: float) -> Tensor:
    """MoCo's InfoNCE (ICLR Eq. 7): positive q·k₊ against the queue's K negatives; q, k normalised."""
    pos = (q * k).sum(1, keepdim=True)
    neg = q @ queue.t()
    logits = torch.cat([pos, neg], dim=1) / temperature
    return F.cross_entropy(logits, torch.zeros(q.shape[0], dtype=torch.long, device=q.device))


def enqueue(queue: Tensor, ptr: int, keys: Tensor) -> int:
    """Write ``keys`` into ``queue`` (in place) from row ``ptr`` on, wrapping around; returns the new
    pointer. A batch larger than the queue keeps its last rows."""
    size = queue.shape[0]
    keys = keys[-size:]
    idx = (ptr + torch.arange(keys.shape[0], device=queue.device)) % size
    queue[idx] = keys.to(queue.dtype)
    return int((ptr + keys.shape[0]) % size)


@torch.no_grad()
def momentum_update(pairs: Iterable[tuple[nn.Module, nn.Module]], m: float) -> None:
    """key ← m·key + (1 − m)·query, parameter by parameter, for each (key module, query module)."""
    for mod_k, mod_q in pairs:
        for pk, pq in zip(mod_k.parameters(), mod_q.parameters()):
            pk.mul_(m).add_(pq.detach(), alpha=1.0 - m)
