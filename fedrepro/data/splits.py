"""Which images pretraining may use, and which are left for federated experiments.

Pretraining data must differ from the federated data, as ImageNet-21k differs from CIFAR-100 for
PEP-FedPT's ViT-B/16. The committed backbones (``fedrepro pretrain vit|clip``) saw only:

- glyphs in :data:`fedrepro.data.glyphs.PRETRAIN_FONTS` (never the held-out fonts);
- the **first half** of Fashion-MNIST's training images, indices ``[0, 30000)``
  (:data:`FASHION_MNIST_PRETRAIN`). Fashion-MNIST's file order is already shuffled, so each half
  holds about 3,000 images of every class.

Federated experiments use what is left: ``fashion_mnist_federated`` (training images
``[30000, 60000)`` and the whole test split), the style domains built on it, and ``glyphs`` in the
held-out fonts.
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import torch

from ..errors import ConfigError
from ..params import check_value
from .base import ImageDataset
from .fashion_mnist import load_fashion_mnist
from .registry import DATASETS

FASHION_MNIST_TRAIN_SIZE = 60000
FASHION_MNIST_PRETRAIN = range(30000)
FASHION_MNIST_FEDERATED = range(30000, FASHION_MNIST_TRAIN_SIZE)
HALVES = {"pretrain": FASHION_MNIST_PRETRAIN, "federated": FASHION_MNIST_FEDERATED}


def fashion_mnist_half(ds: ImageDataset, half: str) -> ImageDataset:
    """``ds`` (full Fashion-MNIST) with its training split cut to one half; the test split is kept."""
    check_value("half", half, str, choices=tuple(HALVES))
    if len(ds.train_y) != FASHION_MNIST_TRAIN_SIZE:
        raise ConfigError(f"expected the full Fashion-MNIST training split ({FASHION_MNIST_TRAIN_SIZE}), "
                          f"got {len(ds.train_y)} images")
    idx = torch.as_tensor(list(HALVES[half]))
    return replace(ds, name=f"fashion_mnist_{half}", train_x=ds.train_x[idx], train_y=ds.train_y[idx],
                   classes=list(ds.classes))


@DATASETS.register("fashion_mnist_federated")
def load_fashion_mnist_federated(root: Path, download: bool) -> ImageDataset:
    """Fashion-MNIST images no committed backbone saw: training ``[30000, 60000)`` + the test split."""
    return fashion_mnist_half(load_fashion_mnist(root, download), "federated")
