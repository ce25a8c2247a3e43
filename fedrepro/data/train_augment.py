"""Training-time augmentation of a client's batches: random crop with padding and horizontal flip.

The pFedCSPC code (FedCSPC, ``datasets.py``/``main_CSPC.py``) trains on CIFAR-10 with a 4-pixel
reflect pad, a random 32-pixel crop and a horizontal flip, on CIFAR-100 and Tiny-ImageNet with a
padded random crop and a flip, and on VireoFood172 with a flip after resizing. The papers' text is
silent on it (pFedCSPC (TNNLS) §V-A3 lists no augmentation). Here it runs per batch on the uint8 images the client
holds, before normalisation, as torchvision's ``RandomCrop(size, padding=4)`` and
``RandomHorizontalFlip()`` do on PIL images: the crop offset is uniform in [0, 2·padding] in each
direction, the flip has probability 1/2, and every draw comes from the training loop's generator,
so a run's batches are a function of its seed. CIFAR-100's extra 15° rotation in that code is not
reproduced.

``train.augment`` names one of :data:`TRAIN_AUGMENTS`; "none" (the default) draws nothing, so
batches are exactly those of a run without the option.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
from torch import Tensor
from ..errors import ConfigError

PADDING = 4  # pixels, as in the FedCSPC code's crops (torchvision's padding=4)


@dataclass(frozen=True)
class CropFlip:
    """Random crop of the image padded by ``padding`` (zeros, or reflected when ``reflect``), then a
    horizontal flip with probability 1/2; ``padding=0`` is a flip alone."""

    padding: int = PADDING
    reflect: bool = False

    def __call__(self, x: Tensor, gen: torch.Generator) -> Tensor:
        b, _, h, w = x.shape
        p = self.padding
        off = torch.randint(0, 2 * p + 1, (b, 2), generator=gen).to(x.device)
        flip = (torch.rand(b, generator=gen) < 0.5).to(x.device)
        rows = off[:, :1] - p + torch.arange(h, device=x.device)  # [b, h] source rows, may lie in the pad
        cols = off[:, 1:] - p + torch.arange(w, device=x.device)
        cols = torch.where(flip[:, None], cols.flip(1), cols)  # a flipped crop reads its columns backwards
        if self.reflect:
            rows, cols = _reflect(rows, h), _reflect(cols, w)
            inside = None
        else:
            inside = ((rows >= 0) & (rows < h))[:, :, None] & ((cols >= 0) & (cols < w))[:, None, :]
            rows, cols = rows.clamp(0, h - 1), cols.clamp(0, w - 1)
        out = x[torch.arange(b, device=x.device)[:, None, None], :, rows[:, :, None], cols[:, None, :]]  # [b, h, w, c]
        if inside is not None:
            out = out.masked_fill(~inside[..., None], 0)
        return out.permute(0, 3, 1, 2)


def _reflect(i: Tensor, n: int) -> Tensor:
    """Indices reflected at the borders without repeating the edge (``numpy.pad`` mode 'reflect')."""
    i = i.abs()
    return torch.where(i >= n, 2 * (n - 1) - i, i)


# The named choices of ``train.augment``.
TRAIN_AUGMENTS: dict[str, Callable[[Tensor, torch.Generator], Tensor] | None] = {
    "none": None,
    "crop_flip": CropFlip(),
    "crop_flip_reflect": CropFlip(reflect=True),
    "flip": CropFlip(padding=0),
}


def train_augment(name: str) -> Callable[[Tensor, torch.Generator], Tensor] | None:
    if name not in TRAIN_AUGMENTS:
        raise ConfigError(f"train.augment={name!r}; valid: {', '.join(TRAIN_AUGMENTS)}")
    return TRAIN_AUGMENTS[name]
