"""Caches of a frozen CLIP's per-token image embeddings: on disk (:func:`image_tokens`) and in memory
(:func:`normalized_tokens`).

The image encoder is frozen in FedOTP (CVPR 2024) §4.1, so with augmentation fixed its tokens are a
function of the image alone: compute them once per dataset and augmentation setting, not once per
round and client. Entries are keyed by the model's weight fingerprint, a hash of
the exact uint8 images and the augmentation tag, so a retrained checkpoint or different data can
never be served stale tokens.
"""
from __future__ import annotations

import hashlib
import warnings
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor

from ..data.verified_cache import load_verified, save_verified
from ..data.root import data_root
from ..errors import ConfigError
from .clip import ClipBackbone

CACHE_VERSION = 1  # bump when the token computation changes


def default_cache_dir() -> Path:
    """``<data root>/cache/clip_tokens`` (see :func:`fedrepro.data.root.data_root`)."""
    return data_root() / "cache" / "clip_tokens"


def cache_key(clip: ClipBackbone, images: Tensor, augment_tag: str) -> str:
    h = hashlib.sha256(f"v{CACHE_VERSION}|{augment_tag}|{tuple(images.shape)}|".encode())
    h.update(clip.fingerprint().encode())
    h.update(images.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


@torch.no_grad()
def compute_image_tokens(
    clip: ClipBackbone, images: Tensor, augment: Callable[[Tensor], Tensor] | None = None, batch_size: int = 500,
) -> Tensor:
    """Projected tokens [N, 1 + M, d] of uint8 images (after ``augment``, which maps uint8 to uint8)."""
    out = []
    for i in range(0, len(images), batch_size):
        x = images[i : i + batch_size]
        if augment is not None:
            x = augment(x)
        out.append(clip.image_tokens(clip.preprocess(x)).cpu())
    return torch.cat(out) if out else torch.zeros(0)


def image_tokens(
    clip: ClipBackbone,
    images: Tensor,
    *,
    cache_dir: str | Path | None,
    augment: Callable[[Tensor], Tensor] | None = None,
    augment_tag: str = "none",
    batch_size: int = 500,
) -> Tensor:
    """Tokens of ``images``, read from ``cache_dir`` when there, else computed and stored there.

    ``cache_dir=None`` computes without caching. ``augment`` must be deterministic (seeded inside)
    and named by a distinct ``augment_tag``: the tag, not the function, is part of the key.
    """
    if augment is not None and augment_tag == "none":
        raise ConfigError("augment_tag must name the augmentation (e.g. 'flip-seed0') when augment is given")
    if cache_dir is None:
        return compute_image_tokens(clip, images, augment, batch_size)
    key = cache_key(clip, images, augment_tag)
    path = Path(cache_dir) / f"clip_tokens-{key[:24]}.pt"
    # A cache in a shared data root is checked against its own digest and key, and must hold one token
    # set per image: a damaged, altered or short one is computed again (a warning names it).
    entry = load_verified(path, ("key", "tokens"), {"key": key}) if path.is_file() else None
    if entry is not None:
        tokens = entry["tokens"]
        if isinstance(tokens, Tensor) and tokens.dim() == 3 and len(tokens) == len(images):
            return tokens
        warnings.warn(f"cache file {path} does not hold the tokens of {len(images)} images; rebuilding it",
                      stacklevel=2)
    tokens = compute_image_tokens(clip, images, augment, batch_size)
    path.parent.mkdir(parents=True, exist_ok=True)
    save_verified({"key": key, "tokens": tokens}, path)
    return tokens


# Image sets whose normalised tokens are kept in memory (one per client split; LRU beyond that).
_MEMORY: OrderedDict[str, tuple[Tensor, Tensor]] = OrderedDict()
_MEMORY_SIZE = 512


def normalized_tokens(clip: ClipBackbone, images: Tensor) -> tuple[Tensor, Tensor]:
    """(pooled [N, d], feature map [N, M, d]) of uint8 images, each token L2-normalised (FedOTP §4.2),
    on the CPU.

    Kept in memory by the images' content and the weights' fingerprint (:func:`cache_key`), so every
    method, round and analysis of a process computes an image set's tokens once.
    """
    key = cache_key(clip, images, "none")
    hit = _MEMORY.get(key)
    if hit is None:
        tokens = F.normalize(compute_image_tokens(clip, images.cpu()).float(), dim=-1)
        hit = (tokens[:, 0].contiguous(), tokens[:, 1:].contiguous())
        _MEMORY[key] = hit
        if len(_MEMORY) > _MEMORY_SIZE:
            _MEMORY.popitem(last=False)
    else:
        _MEMORY.move_to_end(key)
    return hit


__all__ = ["CACHE_VERSION", "cache_key", "compute_image_tokens", "default_cache_dir", "image_tokens",
           "normalized_tokens"]
