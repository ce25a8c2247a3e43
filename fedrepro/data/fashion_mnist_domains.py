"""Fashion-MNIST rendered in several visual styles: an offline feature-shift benchmark.

Stands in for DomainNet-style experiments when no large download is possible:
the label space is shared, but each domain (style) has its own input
distribution. As in real multi-domain sets, domains are disjoint: every source
image is rendered in exactly one style, chosen by a seeded permutation.

With ``clutter`` > 0 every image is first composed onto a cluttered canvas (:func:`compose_clutter`):
the garment shrunk and placed at random over fragments of other garments, then drawn in its style.
Such images carry their garment mask in the lowest bit of every pixel (:func:`garment_mask`), so that
every subset, partition and client split keeps it with the image, and no pixel moves by more than 1/255.
"""
from __future__ import annotations

import hashlib
import math
import warnings
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from ..errors import ConfigError
from ..params import check_value
from .base import ImageDataset
from .verified_cache import holds_ids, holds_images, load_verified, save_verified
from .fashion_mnist import load_fashion_mnist
from .registry import DATASETS
from .splits import fashion_mnist_half

STYLES = ("original", "inverted", "rotated", "tinted", "noisy", "edges")

RENDER_VERSION = 1  # bump when a style's rendering changes (cached renderings are keyed by it)
_NUM_TEXTURES = 64  # background textures shared by all "tinted" images
_NOISE_STD = 0.3  # on the [0, 1] scale: clearly degraded, still recognisable
# Cluttered canvases: a garment pixel at or above this ink level is opaque over the clutter and counts as
# garment in the mask (fainter ones blend in).
GARMENT_INK = 0.2
# The fragments behind the garment keep this share of their ink: the garment stays the brightest thing on
# the canvas without being the only inked one (at full ink the stand-in's zero-shot accuracy is at chance).
_CLUTTER_INK = 0.4

# A style maps float [n, 1, H, W] in [0, 1] to float [n, 1 or 3, H, W] in [0, 1].
# Grey styles return one channel; it is replicated only after the uint8
# conversion, which makes their float work 3x cheaper.
Style = Callable[[torch.Tensor, np.random.Generator], torch.Tensor]


def _original(x: torch.Tensor, rng: np.random.Generator) -> torch.Tensor:
    return x


def _inverted(x: torch.Tensor, rng: np.random.Generator) -> torch.Tensor:
    return 1.0 - x


def _rotated(x: torch.Tensor, rng: np.random.Generator) -> torch.Tensor:
    return torch.rot90(x, 1, dims=(2, 3))


def _tinted(x: torch.Tensor, rng: np.random.Generator) -> torch.Tensor:
    """The garment in a random saturated colour over a random smooth colour texture."""
    n, _, h, w = x.shape
    coarse = torch.from_numpy(rng.uniform(0.0, 1.0, (_NUM_TEXTURES, 3, 4, 4)).astype(np.float32))
    textures = F.interpolate(coarse, size=(h, w), mode="bicubic", align_corners=False).clamp_(0, 1)
    textures = 0.15 + 0.5 * textures  # keep the background darker than most tints
    bg = textures[torch.from_numpy(rng.integers(0, _NUM_TEXTURES, n))]
    tint = rng.uniform(0.0, 1.0, (n, 3)).astype(np.float32)
    tint[np.arange(n), rng.integers(0, 3, n)] = 1.0  # one full channel: saturated, bright
    tint_t = torch.from_numpy(tint)[:, :, None, None]
    return x * tint_t + (1.0 - x) * bg


def _noisy(x: torch.Tensor, rng: np.random.Generator) -> torch.Tensor:
    eps = torch.from_numpy(rng.standard_normal((x.shape[0], 3, *x.shape[2:]), dtype=np.float32))
    return (x + _NOISE_STD * eps).clamp_(0, 1)


def _edges(x: torch.Tensor, rng: np.random.Generator) -> torch.Tensor:
    """Sobel gradient magnitude, scaled so each image's strongest edge is white."""
    # Separable Sobel with shifted slices: much faster than a 1-in-channel conv2d.
    p = F.pad(x, (1, 1, 1, 1))
    smooth_rows = p[:, :, :-2] + 2 * p[:, :, 1:-1] + p[:, :, 2:]  # [n, 1, H, W+2]
    smooth_cols = p[..., :-2] + 2 * p[..., 1:-1] + p[..., 2:]  # [n, 1, H+2, W]
    gx = smooth_rows[..., 2:] - smooth_rows[..., :-2]
    gy = smooth_cols[:, :, 2:] - smooth_cols[:, :, :-2]
    mag = gx.pow_(2).add_(gy.pow_(2)).sqrt_()
    return mag.div_(mag.amax(dim=(2, 3), keepdim=True).clamp_min(1e-6))


def compose_clutter(x: torch.Tensor, clutter: float, rng: np.random.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Each grey garment [n, 1, H, W] in [0, 1] on a cluttered canvas of the same size.

    The garment is shrunk to a square box of side ``round(H·√(1 − clutter))`` (so ``clutter`` is the
    share of the canvas outside its box) and placed at a random position; the canvas behind it is tiled
    with cells of half the box's side, each a crop of another image's shrunk garment at a random place,
    turned by a random quarter turn and dimmed: pieces of garments, none a whole one. Returns the
    canvases [n, 1, H, W] and the garment masks [n, H, W] bool (garment pixels of at least
    :data:`GARMENT_INK`, which cover the clutter).
    """
    n, _, h, w = x.shape
    side = max(2, min(h, w, round(min(h, w) * math.sqrt(1.0 - clutter))))
    small = F.interpolate(x, size=(side, side), mode="bilinear", antialias=True, align_corners=False).clamp_(0, 1)[:, 0]
    cell = max(1, side // 2)
    rows, cols = -(-h // cell), -(-w // cell)
    back = torch.empty((n, rows * cell, cols * cell))
    offs = torch.arange(cell)
    for r in range(rows):
        for c in range(cols):
            # another image's garment (the image itself only when it is alone)
            src = (np.arange(n) + rng.integers(1, n, n)) % n if n > 1 else np.zeros(n, dtype=np.int64)
            oy, ox = (torch.from_numpy(rng.integers(0, side - cell + 1, n)) for _ in range(2))
            turn = torch.from_numpy(rng.integers(0, 4, n))
            crop = small[torch.from_numpy(src)[:, None, None], (oy[:, None] + offs)[:, :, None],
                         (ox[:, None] + offs)[:, None, :]]
            for k in range(1, 4):
                at = turn == k
                crop[at] = torch.rot90(crop[at], k, dims=(1, 2))
            back[:, r * cell:(r + 1) * cell, c * cell:(c + 1) * cell] = crop
    back = back[:, :h, :w] * _CLUTTER_INK
    py, px = (torch.from_numpy(rng.integers(0, d - side + 1, n)) for d in (h, w))
    garment = torch.zeros((n, h, w))
    at = torch.arange(n)[:, None, None], (py[:, None] + torch.arange(side))[:, :, None], \
        (px[:, None] + torch.arange(side))[:, None, :]
    garment[at] = small
    alpha = (garment / GARMENT_INK).clamp_(max=1.0)
    canvas = alpha * garment + (1.0 - alpha) * back
    return canvas[:, None], garment >= GARMENT_INK


def _with_mask(img: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """uint8 ``img`` [n, C, H, W] with every channel's lowest bit set to ``mask`` [n, H, W]: odd on the
    garment, even elsewhere (each pixel moves by at most 1/255)."""
    return (img & 0xFE) | mask[:, None].to(torch.uint8)


def garment_mask(images: torch.Tensor) -> torch.Tensor:
    """[n, H, W] bool: the garment's pixels of cluttered images (uint8 [n, C, H, W] of a
    ``clutter`` > 0 rendering), read from their lowest bit. On other images it is noise."""
    if images.dtype != torch.uint8 or images.dim() != 4:
        raise ConfigError(f"images must be uint8 [n, C, H, W], got {images.dtype} {tuple(images.shape)}")
    return (images[:, 0] & 1).bool()


# Styles that move pixels move the garment mask alike.
_MOVE_MASK = {"rotated": lambda m: torch.rot90(m, 1, dims=(1, 2))}

_RENDER: dict[str, Style] = {
    "original": _original,
    "inverted": _inverted,
    "rotated": _rotated,
    "tinted": _tinted,
    "noisy": _noisy,
    "edges": _edges,
}


def _check_styles(styles: Sequence[str] | None) -> list[str]:
    if styles is None:
        return list(STYLES)
    if isinstance(styles, str) or not isinstance(styles, Sequence):
        raise ConfigError(f"styles must be a list of style names, got {styles!r}; valid styles: {', '.join(STYLES)}")
    bad = [s for s in styles if s not in _RENDER]
    if bad or not styles or len(set(styles)) != len(styles):
        raise ConfigError(
            f"styles must be a non-empty list of distinct names from: {', '.join(STYLES)}; got {list(styles)!r}"
        )
    return list(styles)


def render(
    x: torch.Tensor, styles: Sequence[str], assign_rng: np.random.Generator, render_rng: np.random.Generator,
    clutter: float = 0.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Assign each grey image [n, 1, H, W] uint8 to one style and render it as RGB.

    Returns (uint8 [n, 3, H, W], int64 domain id per image). The permutation
    gives every style n/len(styles) images (+-1), with classes mixed at random.
    With ``clutter`` > 0 each image is first composed onto a cluttered canvas
    (:func:`compose_clutter`, fragments from images of its own style) and
    carries its garment mask (:func:`garment_mask`).
    """
    n = x.shape[0]
    domain = np.empty(n, dtype=np.int64)
    domain[assign_rng.permutation(n)] = np.arange(n) % len(styles)
    domain_t = torch.from_numpy(domain)
    out = torch.empty((n, 3, *x.shape[2:]), dtype=torch.uint8)
    for d, style in enumerate(styles):
        idx = torch.from_numpy(np.flatnonzero(domain == d))
        xf = x.index_select(0, idx).float().div_(255)
        mask = None
        if clutter > 0:
            xf, mask = compose_clutter(xf, clutter, render_rng)
        img = _RENDER[style](xf, render_rng).mul_(255).round_().clamp_(0, 255).to(torch.uint8)
        if mask is not None:
            img = _with_mask(img, _MOVE_MASK.get(style, lambda m: m)(mask))
        out.index_copy_(0, idx, img.expand(-1, 3, -1, -1))
    return out, domain_t


def _cache_path(root: Path, base: ImageDataset, styles: list[str], seed: int, clutter: float = 0.0) -> Path:
    """Where the rendering of ``base`` in ``styles`` is kept: rendering 40,000 images takes seconds,
    reading them back a fraction of one, and every notebook kernel and worker process loads them.
    Keyed by the source images, so other source files never read a stale rendering."""
    key = f"v{RENDER_VERSION}|{','.join(styles)}|{seed}|" + (f"clutter={clutter!r}|" if clutter else "")
    h = hashlib.sha256(key.encode())
    for t in (base.train_x, base.test_x):
        h.update(t.numpy().tobytes())
    return Path(root) / "cache" / "fashion_mnist_domains" / f"{h.hexdigest()[:24]}.pt"


def _read_cache(path: Path, base: ImageDataset, n_styles: int) -> dict | None:
    """The rendering cached at ``path`` when it is sound and holds one RGB image and one domain id per
    source image, else None after a warning naming it (the caller renders again): a cache that was
    damaged, altered or cut short is never trained on."""
    c = load_verified(path, ("train_x", "train_d", "test_x", "test_d"), stacklevel=4)
    if c is None:
        return None
    size = tuple(base.train_x.shape[2:])
    for split, n in (("train", len(base.train_y)), ("test", len(base.test_y))):
        if not (holds_images(c, f"{split}_x", n, (3, *size)) and holds_ids(c, f"{split}_d", n, n_styles)):
            got = c.get(f"{split}_x")
            warnings.warn(f"cache file {path} holds {tuple(getattr(got, 'shape', ()))} {split} images, not the {n} "
                          f"RGB {size} images with domain ids below {n_styles} of its source; rebuilding it",
                          stacklevel=3)
            return None
    return c


@DATASETS.register("fashion_mnist_domains")
def load_fashion_mnist_domains(
    root: Path, download: bool, styles: Sequence[str] | None = None, seed: int = 0, half: str | None = None,
    clutter: float = 0.0,
) -> ImageDataset:
    """Fashion-MNIST split into disjoint style domains, all RGB 28x28 uint8.

    ``styles``: subset of ``original, inverted, rotated, tinted, noisy, edges``
    (default all six); domain ids follow this order. ``seed`` fixes the
    image-to-domain assignment and all rendering randomness. ``half="federated"`` keeps only the
    training images no committed backbone was pretrained on (:mod:`fedrepro.data.splits`); the
    default keeps all 60,000. ``clutter`` in [0, 1): the share of each canvas outside the shrunk
    garment's box, filled with fragments of other garments (:func:`compose_clutter`); 0, the default,
    draws the garments as they are.
    """
    chosen = _check_styles(styles)
    check_value("seed", seed, int, ge=0)
    check_value("half", half, str | None, choices=("federated",))  # null: all training images
    check_value("clutter", clutter, float, ge=0.0, lt=1.0)
    base = load_fashion_mnist(root, download)
    if half is not None:

        base = fashion_mnist_half(base, half)
    cache = _cache_path(root, base, chosen, int(seed), float(clutter))
    c = _read_cache(cache, base, len(chosen)) if cache.is_file() else None
    if c is not None:
        train_x, train_d, test_x, test_d = c["train_x"], c["train_d"], c["test_x"], c["test_d"]
    else:
        # Separate streams per split and purpose, so e.g. the test split's rendering
        # does not depend on how many random numbers the train split consumed.
        a_tr, a_te, r_tr, r_te = (np.random.default_rng(s) for s in np.random.SeedSequence(int(seed)).spawn(4))
        train_x, train_d = render(base.train_x, chosen, a_tr, r_tr, float(clutter))
        test_x, test_d = render(base.test_x, chosen, a_te, r_te, float(clutter))
        cache.parent.mkdir(parents=True, exist_ok=True)
        save_verified({"train_x": train_x, "train_d": train_d, "test_x": test_x, "test_d": test_d}, cache)
    return ImageDataset(
        "fashion_mnist_domains", train_x, base.train_y, test_x, base.test_y, list(base.classes),
        train_domain=train_d, test_domain=test_d, domains=chosen,
    )
