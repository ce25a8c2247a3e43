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

from ..errors import ConfigError


@dataclass(frozen=True)
class PlantedConfig:
    """Shape and difficulty of the planted-patch task.

    ``object_fraction`` is ρ; the number of object patches per image is ``round(ρ·M)`` (at least 1).
    Prototypes, clutter patterns and styles are unit-norm directions scaled by their ``*_scale``;
    ``noise`` is the per-coordinate std, so its norm is ``noise·√dim``.
    """

    num_classes: int = 10
    num_clients: int = 10
    num_patches: int = 49
    dim: int = 64
    object_fraction: float = 0.25
    style_scale: float = 0.6
    clutter_scale: float = 1.0
    num_clutter: int = 32
    noise: float = 0.1
    train_per_client: int = 64
    test_per_client: int = 32
    seed: int = 0

    def __post_init__(self) -> None:
        for key in ("num_classes", "num_clients", "num_patches", "dim", "num_clutter"):
            _check_int(key, getattr(self, key), 1)
        for key in ("train_per_client", "test_per_client", "seed"):
            _check_int(key, getattr(self, key), 0)
        if not 0 < self.object_fraction <= 1:
            raise ConfigError(f"object_fraction must be in (0, 1], got {self.object_fraction!r}")
        for key in ("style_scale", "clutter_scale", "noise"):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise ConfigError(f"{key} must be a number >= 0, got {value!r}")

    @property
    def num_objects(self) -> int:
        return max(1, round(self.object_fraction * self.num_patches))


def _check_int(name: str, value: object, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ConfigError(f"{name} must be an int >= {minimum}, got {value!r}")


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
    as_t = lambda a: torch.from_numpy(a.astype(np.float32))
    return PlantedTask(cfg, train, test, as_t(prototypes), as_t(styles), as_t(clutter))


__all__ = ["PlantedConfig", "PlantedSplit", "PlantedTask", "make_planted"]
