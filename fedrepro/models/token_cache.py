"""On-disk cache of a frozen ViT's tokens up to the first block a prompt changes.

The backbone is frozen, so for a prompt method whose prompts first act at block k (CCMP inserted at
a middle block, PEP-FedPT (arXiv) Eq. 4; a head on the final cls when k = depth) the tokens entering
block k are the same in every round and every client. They are computed once and stored under a key
made of the weights' hash, the images' hash, the normalisation and k, so a changed checkpoint or
dataset can never be served stale tokens. Tokens are kept in float32, the dtype they are computed
in, so cached and uncached runs are bitwise identical.
"""
from __future__ import annotations

import hashlib
import warnings
from collections.abc import Sequence
from pathlib import Path

import torch
from torch import Tensor

from ..data.base import norm_tensors, to_float
from ..data.verified_cache import load_verified, save_verified
from ..data.root import data_root
from .record import state_hash, tensor_hash
from .vit import ViTBackbone

EVAL_BATCH = 500


def default_cache_dir() -> Path:
    """``<data root>/token_cache`` (``$FEDREPRO_DATA`` moves it with the data)."""
    return data_root() / "token_cache"


class TokenCache:
    """Tokens entering block ``block`` of a frozen backbone, for a fixed set of uint8 images."""

    def __init__(self, root: str | Path | None = None):
        self.root = Path(root) if root is not None else default_cache_dir()

    def key(self, backbone: ViTBackbone, images: Tensor, mean: Sequence[float], std: Sequence[float],
            block: int) -> str:
        # Hashed on every call (about a second for ViT-B/16): a memo keyed by the object could go stale.
        wh = state_hash(backbone.state_dict())
        norm = ",".join(f"{float(v):.8g}" for v in (*mean, *std))
        blob = f"{wh}/{tensor_hash(images)}/{norm}/{block}".encode()
        return hashlib.sha256(blob).hexdigest()[:32]

    @torch.no_grad()
    def tokens(self, backbone: ViTBackbone, images: Tensor, mean: Sequence[float], std: Sequence[float],
               block: int) -> Tensor:
        """[N, T, d] tokens entering ``block`` (no prompts), read from disk or computed and stored."""
        path = self.root / f"vit-tokens-{self.key(backbone, images, mean, std, block)}.pt"
        # Checked against its own digest, and one token set per image: a damaged, altered or short cache
        # is computed again (a warning names it), never fed to a method.
        entry = load_verified(path, ["tokens", "block"], {"block": block}) if path.is_file() else None
        if entry is not None:
            if isinstance(entry["tokens"], Tensor) and len(entry["tokens"]) == len(images):
                return entry["tokens"]
            warnings.warn(f"cache file {path} does not hold the tokens of {len(images)} images; rebuilding it",
                          stacklevel=2)
        tokens = compute_tokens(backbone, images, mean, std, block)
        self.root.mkdir(parents=True, exist_ok=True)
        save_verified({"tokens": tokens, "block": block}, path)
        return tokens


@torch.no_grad()
def compute_tokens(backbone: ViTBackbone, images: Tensor, mean: Sequence[float], std: Sequence[float],
                   block: int, batch_size: int = EVAL_BATCH) -> Tensor:
    """Tokens entering ``block`` for ``images`` (uint8 [N, C, H, W]), batch by batch, in eval mode."""
    was_training = backbone.training
    backbone.eval()
    m, s = norm_tensors(mean, std)
    out = [backbone.tokens_before(to_float(images[i:i + batch_size], m, s), block)
           for i in range(0, len(images), batch_size)]
    backbone.train(was_training)
    return torch.cat(out)
