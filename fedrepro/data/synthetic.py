"""Procedural class-structured images for fast, download-free tests and smoke runs.

Each class is a fixed random smooth *periodic* pattern (a low-frequency Fourier
series), so a circular shift moves it without creating a seam. Samples are the
class pattern, randomly shifted and contrast-jittered, plus pixel noise: shift
and noise keep it from being trivially separable, while the shared pattern
keeps it learnable by even a linear model.
"""
from __future__ import annotations

import numpy as np
import torch

from ..params import check_value
from .base import ImageDataset
from .registry import DATASETS

_MAX_FREQ = 2  # frequencies 0..2 per axis: smooth, few-blob patterns
# Mixing weights (unit total variance) of the shared vs per-channel component in colour images.
_CHANNEL_SHARED, _CHANNEL_OWN = 0.9, float(np.sqrt(1 - 0.9**2))


def _templates(rng: np.random.Generator, k: int, c: int, size: int) -> np.ndarray:
    """[k, c, size, size] zero-mean, unit-std periodic patterns."""
    coords = np.arange(size) * (2 * np.pi / size)
    freqs = [(fy, fx) for fy in range(_MAX_FREQ + 1) for fx in range(_MAX_FREQ + 1) if fy or fx]
    phase = np.stack([fy * coords[:, None] + fx * coords[None, :] for fy, fx in freqs])  # [F, S, S]
    basis = np.concatenate([np.cos(phase), np.sin(phase)])  # [2F, S, S]
    coef = rng.standard_normal((k, c, len(basis)))
    if c > 1:
        # Colour channels of natural images are strongly correlated; independent
        # channels would make the 3-channel variant ~3x more informative (trivial).
        coef = _CHANNEL_SHARED * coef[:, :1] + _CHANNEL_OWN * coef
    t = np.einsum("kcf,fyx->kcyx", coef, basis)
    t -= t.mean(axis=(2, 3), keepdims=True)
    t /= t.std(axis=(1, 2, 3), keepdims=True) + 1e-8
    return t


def _samples(
    rng: np.random.Generator, templates: np.ndarray, per_class: int, noise: float
) -> tuple[torch.Tensor, torch.Tensor]:
    k, c, s, _ = templates.shape
    y = np.repeat(np.arange(k), per_class)
    n = len(y)
    max_shift = max(1, s // 8)
    dy = rng.integers(-max_shift, max_shift + 1, n)
    dx = rng.integers(-max_shift, max_shift + 1, n)
    rows = (np.arange(s)[None, :] - dy[:, None]) % s  # [n, s]
    cols = (np.arange(s)[None, :] - dx[:, None]) % s
    # One gather instead of a per-sample roll loop.
    x = templates[y[:, None, None, None], np.arange(c)[None, :, None, None], rows[:, None, :, None], cols[:, None,
                                                                                                          None, :]]
    eps = rng.standard_normal(x.shape)
    if c > 1:
        eps = _CHANNEL_SHARED * eps[:, :1] + _CHANNEL_OWN * eps  # correlated, as for the patterns
    x = x * rng.uniform(0.7, 1.3, (n, 1, 1, 1)) + noise * eps
    img = np.clip(np.rint(128.0 + 40.0 * x), 0, 255).astype(np.uint8)
    return torch.from_numpy(img), torch.from_numpy(y.astype(np.int64))


@DATASETS.register("synthetic")
def load_synthetic(
    root: object,
    download: bool,
    num_classes: int = 10,
    train_per_class: int = 100,
    test_per_class: int = 20,
    image_size: int = 16,
    channels: int = 1,
    seed: int = 0,
    noise: float = 1.0,
) -> ImageDataset:
    """Synthetic dataset; needs no files (``root``/``download`` are ignored). Deterministic in ``seed``.

    ``noise`` is the per-pixel noise std relative to the pattern's std: higher is harder.
    """
    k = check_value("num_classes", num_classes, int, ge=2)
    n_tr = check_value("train_per_class", train_per_class, int, ge=1)
    n_te = check_value("test_per_class", test_per_class, int, ge=0)
    size = check_value("image_size", image_size, int, ge=4)
    seed = check_value("seed", seed, int, ge=0)
    channels = check_value("channels", channels, int, choices=(1, 3))
    check_value("noise", noise, float, ge=0)
    # Independent streams: the templates do not depend on the requested split sizes.
    t_rng, tr_rng, te_rng = (np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(3))
    templates = _templates(t_rng, k, channels, size)
    train_x, train_y = _samples(tr_rng, templates, n_tr, float(noise))
    test_x, test_y = _samples(te_rng, templates, n_te, float(noise))
    classes = [f"class_{i}" for i in range(k)]
    return ImageDataset("synthetic", train_x, train_y, test_x, test_y, classes)
