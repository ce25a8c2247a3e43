"""MoCo-v1's augmentation, computed on normalised tensor batches on the run's device.

FedPFT+Con "adopt[s] the default settings from MoCo" (FedPFT (arXiv) App. B.3), whose v1 recipe is
random resized crop (scale 0.2–1), grayscale with probability 0.2, colour jitter 0.4 and a
horizontal flip, applied to PIL images on the CPU (the papers' two views x′, x″ of ICLR Eq. 7).
:func:`augment` is our tensor version of it: the same crop, flip, brightness/contrast/saturation
jitter and grayscale, on the normalised batch the training loop already holds, with every draw
from the step's generator, so a view is a function of the seed. It is cheap and deterministic, and
has no hue jitter (costly on tensors).
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor


def augment(x: Tensor, gen: torch.Generator, mean: Tensor, std: Tensor, crop_min: float = 0.2,
            jitter: float = 0.4, gray_p: float = 0.2) -> Tensor:
    """A MoCo-v1-style random view of a *normalised* batch, computed on tensors.

    Per sample: random resized crop (area in [crop_min, 1], aspect ratio in [3/4, 4/3]) and a
    horizontal flip with probability 1/2, both through one affine ``grid_sample``; brightness,
    contrast (and saturation, 3 channels) factors in [1-jitter, 1+jitter]; grayscale with
    probability ``gray_p`` (3 channels only). All draws come from ``gen`` (CPU), so a view is a
    function of the seed. The crop scale 0.2 is meant for 32-224 px images; on 8×8 images
    ``crop_min=0.8, jitter=0.1`` are the sensible values.
    """
    b, c, h, w = x.shape
    dev = x.device
    u = torch.rand(b, 7, generator=gen).to(dev)
    # torchvision's rejection sampling, vectorised: the first of 10 (area, ratio) draws that fits
    # inside the image, else the whole image (its fallback for a square image).
    tries = torch.rand(b, 10, 2, generator=gen).to(dev)
    area = crop_min + (1.0 - crop_min) * tries[..., 0]
    ratio = torch.exp(math.log(3 / 4) + (math.log(4 / 3) - math.log(3 / 4)) * tries[..., 1])
    cws, chs = torch.sqrt(area * ratio), torch.sqrt(area / ratio)
    fits = (cws <= 1.0) & (chs <= 1.0)
    first = fits.float().argmax(1, keepdim=True)
    ok = fits.any(1)
    cw = torch.where(ok, cws.gather(1, first)[:, 0], torch.ones_like(ok, dtype=x.dtype))
    ch = torch.where(ok, chs.gather(1, first)[:, 0], torch.ones_like(ok, dtype=x.dtype))
    flip = torch.where(u[:, 2] < 0.5, -1.0, 1.0).to(dev)
    theta = torch.zeros(b, 2, 3, device=dev, dtype=x.dtype)
    theta[:, 0, 0] = cw * flip
    theta[:, 0, 2] = (2 * u[:, 0] - 1) * (1 - cw)
    theta[:, 1, 1] = ch
    theta[:, 1, 2] = (2 * u[:, 1] - 1) * (1 - ch)
    grid = F.affine_grid(theta, [b, c, h, w], align_corners=False)
    img = x * std + mean  # back to [0, 1] so colour jitter means what it means on images
    img = F.grid_sample(img, grid, mode="bilinear", padding_mode="reflection", align_corners=False)

    def gray(t: Tensor) -> Tensor:
        if c == 3:
            return (0.299 * t[:, 0:1] + 0.587 * t[:, 1:2] + 0.114 * t[:, 2:3])
        return t.mean(1, keepdim=True)

    col = lambda v: v.view(b, 1, 1, 1)  # noqa: E731
    img = img * col(1 + jitter * (2 * u[:, 3] - 1))
    centre = gray(img).mean((1, 2, 3), keepdim=True)
    img = (img - centre) * col(1 + jitter * (2 * u[:, 4] - 1)) + centre
    if c == 3:
        g = gray(img)
        img = g + (img - g) * col(1 + jitter * (2 * u[:, 5] - 1))
        img = torch.where(col(u[:, 6] < gray_p), gray(img).expand_as(img), img)
    img = img.clamp(0.0, 1.0)
    return (img - mean) / std
