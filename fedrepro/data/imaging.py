"""Decoding image files into one uint8 [N, 3, S, S] tensor, in parallel.

Shared by the folder-based loaders (Tiny-ImageNet, DomainNet-style folders).
"""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Sequence

import numpy as np
import torch
import torch.nn.functional as F

from ..errors import CorruptCacheError
from ..params import check_value

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png")


def is_image(path: Path) -> bool:
    return path.suffix.lower() in IMAGE_SUFFIXES


def decode_images(paths: Sequence[Path], size: int, workers: int | None = None) -> torch.Tensor:
    """Decode ``paths`` to RGB, resized to ``size`` x ``size``, as uint8 [N, 3, size, size].

    Threads suffice: PIL releases the GIL while decoding and resizing. Grey or
    palette images are converted to RGB so every sample has the same shape.
    """
    from PIL import Image, UnidentifiedImageError

    out = np.empty((len(paths), size, size, 3), dtype=np.uint8)

    def work(i: int) -> None:
        path = paths[i]
        try:
            with Image.open(path) as im:
                # JPEG can decode at 1/2, 1/4, 1/8 scale for free; a large DomainNet
                # photo is otherwise fully decoded only to be thrown away by resize.
                im.draft("RGB", (size, size))
                rgb = im.convert("RGB")
                if rgb.size != (size, size):
                    rgb = rgb.resize((size, size), Image.Resampling.BILINEAR)
                out[i] = np.asarray(rgb)
        except (UnidentifiedImageError, OSError, ValueError) as exc:
            raise CorruptCacheError(f"image file {path} cannot be decoded ({exc}); replace or delete it") from exc

    if len(paths):
        n_workers = workers or min(32, os.cpu_count() or 1)
        with ThreadPoolExecutor(max_workers=n_workers) as pool:
            # list() re-raises the first worker exception here
            list(pool.map(work, range(len(paths))))
    return torch.from_numpy(out).permute(0, 3, 1, 2).contiguous()


def check_image_size(image_size: object) -> int:
    """Validate an ``image_size`` option (a positive int)."""
    return check_value("image_size", image_size, int, ge=1)


def resize_images(x: torch.Tensor, size: int, chunk: int = 512) -> torch.Tensor:
    """uint8 [N, C, H, W] resized to ``size`` x ``size`` (bicubic, as torchvision's ``Resize`` for
    the ViT and CLIP inputs), one chunk at a time so the float copy stays small; ``x`` itself when it
    already has that size."""
    if tuple(x.shape[-2:]) == (size, size):
        return x
    out = torch.empty((x.shape[0], x.shape[1], size, size), dtype=torch.uint8)
    for start in range(0, x.shape[0], chunk):
        part = x[start:start + chunk].float()
        part = F.interpolate(part, size=(size, size), mode="bicubic", align_corners=False)
        out[start:start + chunk] = part.round_().clamp_(0, 255).to(torch.uint8)
    return out
