"""The in-memory dataset container every loader returns, plus batch normalisation.

Images stay ``uint8`` in memory (4x smaller than float32, so even a 100k-image
set fits comfortably and client subsets are cheap index views); they are turned
into normalised float32 one batch at a time by :func:`to_float`.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property
from typing import Sequence

import numpy as np
import torch

from ..params import check_value

# A constant channel has std 0; dividing by it would produce inf/NaN, so such
# channels are left un-scaled instead.
_MIN_STD = 1e-6


@dataclass(repr=False, eq=False)
class ImageDataset:
    """A labelled image classification dataset with a train and a test split.

    ``train_domain``/``test_domain``/``domains`` are only set for multi-domain
    (feature-shift) datasets; ``train_domain[i]`` indexes into ``domains``. ``train_user`` is only
    set for a dataset whose training images come with the user who took them (the federated
    iNaturalist): ``train_user[i]`` is a user index >= 0, which a per-user partition reads.
    """

    name: str
    train_x: torch.Tensor
    train_y: torch.Tensor
    test_x: torch.Tensor
    test_y: torch.Tensor
    classes: list[str]
    train_domain: torch.Tensor | None = None
    test_domain: torch.Tensor | None = None
    domains: list[str] | None = None
    train_user: torch.Tensor | None = None

    def __post_init__(self) -> None:
        # Loaders are the only producers; validating here turns a loader bug into
        # an immediate, named error instead of a shape mismatch deep in training.
        for split, x, y, d in (
            ("train", self.train_x, self.train_y, self.train_domain),
            ("test", self.test_x, self.test_y, self.test_domain),
        ):
            if x.dtype != torch.uint8 or x.dim() != 4 or x.shape[1] not in (1, 3):
                raise ValueError(
                    f"{self.name}: {split}_x must be uint8 [N, C, H, W] with C in (1, 3), "
                    f"got {x.dtype} {tuple(x.shape)}"
                )
            if y.dtype != torch.int64 or y.shape != (x.shape[0],):
                raise ValueError(
                    f"{self.name}: {split}_y must be int64 [{x.shape[0]}], got {y.dtype} {tuple(y.shape)}"
                )
            if len(y) and (int(y.min()) < 0 or int(y.max()) >= len(self.classes)):
                raise ValueError(f"{self.name}: {split}_y has labels outside [0, {len(self.classes)})")
            if (d is None) != (self.domains is None):
                raise ValueError(f"{self.name}: {split}_domain and domains must be set together")
            if d is not None:
                assert self.domains is not None
                if d.dtype != torch.int64 or d.shape != (x.shape[0],):
                    raise ValueError(f"{self.name}: {split}_domain must be int64 [{x.shape[0]}]")
                if len(d) and (int(d.min()) < 0 or int(d.max()) >= len(self.domains)):
                    raise ValueError(f"{self.name}: {split}_domain has ids outside [0, {len(self.domains)})")
        u = self.train_user
        if u is not None and (u.dtype != torch.int64 or u.shape != (self.train_x.shape[0],)
                              or (len(u) and int(u.min()) < 0)):
            raise ValueError(f"{self.name}: train_user must be int64 [{self.train_x.shape[0]}] of ids >= 0")
        if self.train_x.shape[1:] != self.test_x.shape[1:]:
            raise ValueError(
                f"{self.name}: train and test images differ in shape: "
                f"{tuple(self.train_x.shape[1:])} vs {tuple(self.test_x.shape[1:])}"
            )

    @property
    def num_classes(self) -> int:
        return len(self.classes)

    @property
    def in_channels(self) -> int:
        return int(self.train_x.shape[1])

    @property
    def image_size(self) -> int:
        return int(self.train_x.shape[2])

    @property
    def num_domains(self) -> int:
        """Number of domains; a single-domain dataset counts as one domain."""
        return 1 if self.domains is None else len(self.domains)

    @cached_property
    def norm_stats(self) -> tuple[tuple[float, ...], tuple[float, ...]]:
        """Per-channel (mean, std) of ``train_x`` on the [0, 1] scale.

        Computed exactly from a 256-bin histogram per channel: no float copy of
        the whole set is made, which matters for 100k-image datasets.
        """
        values = np.arange(256, dtype=np.float64) / 255.0
        means, stds = [], []
        for c in range(self.in_channels):
            hist = torch.bincount(self.train_x[:, c].reshape(-1), minlength=256).double().numpy()
            n = hist.sum()
            if n == 0:
                means.append(0.0)
                stds.append(1.0)
                continue
            mean = float((hist * values).sum() / n)
            var = float((hist * values**2).sum() / n - mean**2)
            std = float(np.sqrt(max(var, 0.0)))
            means.append(mean)
            stds.append(std if std > _MIN_STD else 1.0)
        return tuple(means), tuple(stds)

    def subset(
        self, max_train: int | None, max_test: int | None, rng: np.random.Generator
    ) -> ImageDataset:
        """A random subset with at most ``max_train``/``max_test`` samples.

        Samples are drawn stratified by (domain, class), so a small subset keeps
        roughly the original class and domain proportions. Deterministic given
        ``rng``'s state; ``None`` (or a limit >= the split size) keeps the split.
        """
        keep_tr = _stratified_pick(self.train_y, self.train_domain, self.num_classes, max_train, rng, "max_train")
        keep_te = _stratified_pick(self.test_y, self.test_domain, self.num_classes, max_test, rng, "max_test")

        def take(t: torch.Tensor | None, idx: torch.Tensor | None) -> torch.Tensor | None:
            if t is None or idx is None:
                return t
            return t[idx]

        return replace(
            self,
            train_x=take(self.train_x, keep_tr),
            train_y=take(self.train_y, keep_tr),
            train_domain=take(self.train_domain, keep_tr),
            train_user=take(self.train_user, keep_tr),
            test_x=take(self.test_x, keep_te),
            test_y=take(self.test_y, keep_te),
            test_domain=take(self.test_domain, keep_te),
            classes=list(self.classes),
            domains=None if self.domains is None else list(self.domains),
        )

    def __repr__(self) -> str:
        # The dataclass default would print whole tensors.
        dom = f", domains={self.domains}" if self.domains is not None else ""
        return (
            f"ImageDataset(name={self.name!r}, train={tuple(self.train_x.shape)}, "
            f"test={tuple(self.test_x.shape)}, num_classes={self.num_classes}{dom})"
        )


def _stratified_pick(
    y: torch.Tensor,
    domain: torch.Tensor | None,
    num_classes: int,
    limit: int | None,
    rng: np.random.Generator,
    param: str,
) -> torch.Tensor | None:
    """Sorted indices of a (domain, class)-stratified random subset, or None for "all"."""
    if limit is None:
        return None
    check_value(param, limit, int, ge=0)
    n = len(y)
    if limit >= n:
        return None
    group = y.numpy().astype(np.int64)
    if domain is not None:
        group = domain.numpy().astype(np.int64) * num_classes + group
    perm = rng.permutation(n)
    g = group[perm]
    # Rank of each permuted sample within its group, divided by the group size:
    # taking the `limit` smallest fractions takes the same share of every group.
    order = np.argsort(g, kind="stable")
    sorted_g = g[order]
    starts = np.r_[0, np.flatnonzero(np.diff(sorted_g)) + 1]
    sizes = np.diff(np.r_[starts, n])
    rank_sorted = np.arange(n) - np.repeat(starts, sizes)
    frac = np.empty(n, dtype=np.float64)
    frac[order] = (rank_sorted + 0.5) / np.repeat(sizes, sizes)
    chosen = perm[np.argsort(frac, kind="stable")[:limit]]
    return torch.from_numpy(np.sort(chosen))


def norm_tensors(
    mean: Sequence[float] | torch.Tensor,
    std: Sequence[float] | torch.Tensor,
    device: torch.device | str | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(mean, std) as float32 tensors shaped [1, C, 1, 1] on ``device``.

    Build these once per run and pass them to :func:`to_float`, so no per-batch
    host-to-device copy is needed.
    """
    m = torch.as_tensor(mean, dtype=torch.float32, device=device).reshape(1, -1, 1, 1)
    s = torch.as_tensor(std, dtype=torch.float32, device=device).reshape(1, -1, 1, 1)
    return m, s


def to_float(
    x: torch.Tensor,
    mean: Sequence[float] | torch.Tensor,
    std: Sequence[float] | torch.Tensor,
) -> torch.Tensor:
    """Convert a uint8 [B, C, H, W] batch to normalised float32: ``(x / 255 - mean) / std``.

    Called on every batch, so it does one allocation and in-place ops. ``mean``
    and ``std`` may be sequences or tensors; pre-shaped [1, C, 1, 1] tensors on
    ``x``'s device (see :func:`norm_tensors`) are used as-is.
    """
    if not (
        isinstance(mean, torch.Tensor) and mean.dim() == 4 and mean.device == x.device
        and isinstance(std, torch.Tensor) and std.dim() == 4 and std.device == x.device
    ):
        mean, std = norm_tensors(mean, std, x.device)
    return x.float().div_(255).sub_(mean).div_(std)
