"""Planted-patch task: CLIP-like images whose object patches are known, so that FedOTP's
"plans focus on the object" (CVPR 2024 Figs. 2, A4) can be measured against ground truth.

FedOTP (CVPR 2024) §4.3 and Fig. 4 claim that unbalanced transport plans put their mass on the
object and leave background out. Real images give no ground truth for that, so this task plants it:
an "image" is M patch vectors in a d-dimensional joint space, of which a fraction ρ are object
patches carrying the class (its prototype) shifted by their client's style offset (feature shift),
and the rest are class-agnostic clutter drawn from a shared pool. Every image comes with its
object mask, so the plan mass on object patches is measurable.

Tokens are float vectors, not pixels, so this is not an :class:`~fedrepro.data.base.ImageDataset`.
Everything is drawn from generators spawned from one seed, one stream per purpose.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ..params import check_fields, hp


@dataclass(frozen=True)
class PlantedConfig:
    """Shape and difficulty of the planted-patch task.

    ``object_fraction`` is ρ; the number of object patches per image is ``round(ρ·M)`` (at least 1).
    Prototypes, clutter patterns and styles are unit-norm directions scaled by their ``*_scale``;
    ``noise`` is the per-coordinate std, so its norm is ``noise·√dim``.
    """

    num_classes: int = hp(10, ge=1)
    num_clients: int = hp(10, ge=1)
    num_patches: int = hp(49, ge=1)
    dim: int = hp(64, ge=1)
    object_fraction: float = hp(0.25, gt=0, le=1)
    style_scale: float = hp(0.6, ge=0)
    clutter_scale: float = hp(1.0, ge=0)
    num_clutter: int = hp(32, ge=1)
    noise: float = hp(0.1, ge=0)
    train_per_client: int = hp(64, ge=0)
    test_per_client: int = hp(32, ge=0)
    seed: int = hp(0, ge=0)

    def __post_init__(self) -> None:
        check_fields(self)

    @property
    def num_objects(self) -> int:
        return max(1, round(self.object_fraction * self.num_patches))


@dataclass(frozen=True)
class PlantedSplit:
    """One split: ``tokens`` float32 [N, M, d]; ``labels``/``clients`` int64 [N]; ``object_mask`` bool [N, M]."""

    tokens: torch.Tensor
    labels: torch.Tensor
    clients: torch.Tensor
    object_mask: torch.Tensor

    def __len__(self) -> int:
        return len(self.labels)

    def client(self, k: int) -> PlantedSplit:
        idx = torch.nonzero(self.clients == k).flatten()
        return PlantedSplit(self.tokens[idx], self.labels[idx], self.clients[idx], self.object_mask[idx])


@dataclass(frozen=True)
class PlantedTask:
    """Train and test splits plus the planted ground truth: ``prototypes`` [C, d], ``styles`` [K, d],
    ``clutter`` [num_clutter, d]."""

    config: PlantedConfig
    train: PlantedSplit
    test: PlantedSplit
    prototypes: torch.Tensor
    styles: torch.Tensor
    clutter: torch.Tensor


def _directions(rng: np.random.Generator, n: int, dim: int, scale: float) -> np.ndarray:
    v = rng.standard_normal((n, dim))
    return scale * v / np.linalg.norm(v, axis=1, keepdims=True)


def _split(
    cfg: PlantedConfig, rng: np.random.Generator, per_client: int,
    prototypes: np.ndarray, styles: np.ndarray, clutter: np.ndarray,
) -> PlantedSplit:
    n, m = cfg.num_clients * per_client, cfg.num_patches
    clients = np.repeat(np.arange(cfg.num_clients), per_client)
    # Each client's labels are balanced, so label skew is left to the federated partitioner.
    labels = np.concatenate([rng.permutation(np.resize(np.arange(cfg.num_classes), per_client))
                             for _ in range(cfg.num_clients)]) if per_client else np.zeros(0, np.int64)
    # The k smallest of M uniform keys: k object positions uniformly at random per image.
    ranks = np.argsort(rng.random((n, m)), axis=1).argsort(axis=1)
    mask = ranks < cfg.num_objects
    background = clutter[rng.integers(0, len(clutter), (n, m))]
    objects = (prototypes[labels] + styles[clients])[:, None, :]
    tokens = np.where(mask[:, :, None], objects, background) + cfg.noise * rng.standard_normal((n, m, cfg.dim))
    return PlantedSplit(
        torch.from_numpy(tokens.astype(np.float32)),
        torch.from_numpy(labels.astype(np.int64)),
        torch.from_numpy(clients.astype(np.int64)),
        torch.from_numpy(mask),
    )


def make_planted(cfg: PlantedConfig) -> PlantedTask:
    """Draw the task; identical for identical configs."""
    streams = np.random.SeedSequence(cfg.seed).spawn(5)
    proto_rng, style_rng, clutter_rng, train_rng, test_rng = (np.random.default_rng(s) for s in streams)
    prototypes = _directions(proto_rng, cfg.num_classes, cfg.dim, 1.0)
    styles = _directions(style_rng, cfg.num_clients, cfg.dim, cfg.style_scale)
    clutter = _directions(clutter_rng, cfg.num_clutter, cfg.dim, cfg.clutter_scale)
    train = _split(cfg, train_rng, cfg.train_per_client, prototypes, styles, clutter)
    test = _split(cfg, test_rng, cfg.test_per_client, prototypes, styles, clutter)
    def as_t(a):
        return torch.from_numpy(a.astype(np.float32))

    return PlantedTask(cfg, train, test, as_t(prototypes), as_t(styles), as_t(clutter))


__all__ = ["PlantedConfig", "PlantedSplit", "PlantedTask", "make_planted"]
