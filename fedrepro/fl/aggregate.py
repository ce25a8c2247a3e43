"""Aggregation rules shared by the methods."""
from __future__ import annotations

from typing import Mapping, Sequence

import torch


def weighted_average(states: Sequence[Mapping[str, torch.Tensor]], weights: Sequence[float]) -> dict[str, torch.Tensor]:
    """Sample-weighted mean of tensors with the same keys (FedAvg, McMahan et al. 2017, Alg. 1).

    Integer tensors (BatchNorm's ``num_batches_tracked``) are averaged in float and rounded, so the
    result keeps each tensor's dtype. Weights are normalised here; they need not sum to 1.
    """
    if not states:
        raise ValueError("weighted_average needs at least one state")
    if len(states) != len(weights):
        raise ValueError(f"{len(states)} states but {len(weights)} weights")
    w = torch.as_tensor([float(x) for x in weights], dtype=torch.float64)
    if (w < 0).any() or w.sum() <= 0:
        raise ValueError(f"weights must be >= 0 with a positive sum, got {list(weights)}")
    w = w / w.sum()
    keys = list(states[0].keys())
    for s in states[1:]:
        if list(s.keys()) != keys:
            raise ValueError("states to average have different keys")
    out: dict[str, torch.Tensor] = {}
    for k in keys:
        ref = states[0][k]
        acc = torch.zeros(ref.shape, dtype=torch.float64, device=ref.device)
        for s, wi in zip(states, w.tolist()):
            acc.add_(s[k], alpha=wi)  # in float64: an in-place add computes in the result's dtype
        out[k] = acc.round().to(ref.dtype) if not ref.is_floating_point() else acc.to(ref.dtype)
    return out
