"""Frozen pretrained backbones with prompt hooks, and a tiny ViT that implements the interface.

PEP-FedPT (arXiv) §3.1 and §4.1 (Eqs. 1–7) prompt-tunes a frozen ViT-B/16 and needs to
(i) insert extra tokens after the positional embedding, right after cls (VPT-shallow, no pos-emb
on prompts) and (ii) read or rewrite the token sequence at the input of arbitrary blocks (the
cls token entering CCMP layers; CCMP token insertion). FedOTP (CVPR 2024) §4.2 needs a
frozen CLIP image encoder whose *every* output token (class token and feature map) is kept.
:class:`FrozenBackbone` is the common interface; timm ViT-B/16 and open_clip adapters will
implement it later (imported lazily there, never at import time of this module, and never
downloading weights).

``tiny_vit`` is a small ViT written with plain torch modules — our scaled-down stand-in for
ViT-B/16 (pre-LN blocks, cls token, patch 4 on 32×32). It is unrelated to
timm's "TinyViT" architecture of the same name.
"""
from __future__ import annotations

import abc
from pathlib import Path
from typing import Callable

import torch
from torch import Tensor, nn

from ..errors import ConfigError
from .base import SplitModel
from .registry import MODELS

# Called before block i with the current tokens [B, T, d]; returning a tensor replaces them.
BlockHook = Callable[[int, Tensor], "Tensor | None"]


def insert_prompts(tokens: Tensor, prompts: Tensor | None) -> Tensor:
    """Insert prompt tokens ([P, d] shared or [B, P, d] per-sample) right after the cls token."""
    if prompts is None:
        return tokens
    if prompts.dim() == 2:
        prompts = prompts.unsqueeze(0).expand(tokens.shape[0], -1, -1)
    if prompts.dim() != 3 or prompts.shape[-1] != tokens.shape[-1] or prompts.shape[0] != tokens.shape[0]:
        raise ConfigError(
            f"prompts must have shape [P, {tokens.shape[-1]}] or [{tokens.shape[0]}, P, {tokens.shape[-1]}], "
            f"got {list(prompts.shape)}"
        )
    return torch.cat([tokens[:, :1], prompts.to(tokens.dtype), tokens[:, 1:]], dim=1)


class FrozenBackbone(nn.Module, abc.ABC):
    """A token-based backbone that prompt methods drive step by step.

    ``embed`` → ``forward_tokens`` (optionally with prompts / a per-block hook) → ``pool``.
    ``forward(x)`` composes them, so a backbone is also a plain φ for a :class:`SplitModel`.
    """

    feature_dim: int

    @abc.abstractmethod
    def embed(self, x: Tensor) -> Tensor:
        """Images → tokens [B, 1 + N, d]: cls first, positional embedding already added."""

    @abc.abstractmethod
    def forward_tokens(
        self, tokens: Tensor, prompts: Tensor | None = None, block_hook: BlockHook | None = None
    ) -> Tensor:
        """Run the blocks and final norm; return **all** output tokens [B, T, d] (cls at index 0)."""

    def pool(self, tokens: Tensor) -> Tensor:
        """Output tokens → feature vector [B, feature_dim]; the cls token by default."""
        return tokens[:, 0]

    def forward(self, x: Tensor, prompts: Tensor | None = None) -> Tensor:
        return self.pool(self.forward_tokens(self.embed(x), prompts))

    def freeze(self) -> "FrozenBackbone":
        """Stop gradients into every backbone parameter (prompts and heads live elsewhere)."""
        for p in self.parameters():
            p.requires_grad_(False)
        return self


class TinyViTEncoder(FrozenBackbone):
    """Patch embedding + cls token + learned positional embedding + pre-LN blocks + final LayerNorm."""

    def __init__(
        self, in_channels: int, image_size: int, patch_size: int, dim: int, depth: int, heads: int,
        mlp_ratio: float,
    ):
        super().__init__()
        self.patch_embed = nn.Conv2d(in_channels, dim, patch_size, stride=patch_size)
        n_patches = (image_size // patch_size) ** 2
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos_embed = nn.Parameter(torch.zeros(1, 1 + n_patches, dim))
        self.blocks = nn.ModuleList(
            nn.TransformerEncoderLayer(
                dim, heads, dim_feedforward=int(dim * mlp_ratio), dropout=0.0, activation="gelu",
                batch_first=True, norm_first=True,
            )
            for _ in range(depth)
        )
        self.norm = nn.LayerNorm(dim)
        self.feature_dim = dim
        nn.init.trunc_normal_(self.pos_embed, std=0.02)  # ViT/timm convention
        nn.init.trunc_normal_(self.cls_token, std=0.02)

    def embed(self, x: Tensor) -> Tensor:
        patches = self.patch_embed(x).flatten(2).transpose(1, 2)  # [B, N, d]
        cls = self.cls_token.expand(x.shape[0], -1, -1)
        return torch.cat([cls, patches], dim=1) + self.pos_embed

    def forward_tokens(
        self, tokens: Tensor, prompts: Tensor | None = None, block_hook: BlockHook | None = None
    ) -> Tensor:
        # Prompts go in after embed() has added positions: VPT gives prompts no pos-emb.
        tokens = insert_prompts(tokens, prompts)
        for i, block in enumerate(self.blocks):
            if block_hook is not None:
                replaced = block_hook(i, tokens)
                if replaced is not None:
                    tokens = replaced
            tokens = block(tokens)
        return self.norm(tokens)


class TinyViT(SplitModel):
    """SplitModel whose φ is a :class:`TinyViTEncoder`; forward passes accept prompt tokens."""

    features: TinyViTEncoder

    def forward_features(self, x: Tensor, prompt_tokens: Tensor | None = None) -> Tensor:
        """cls embedding [B, dim]; ``prompt_tokens`` ([P, dim] or [B, P, dim]) go right after cls."""
        return self.features(x, prompt_tokens)

    def forward(self, x: Tensor, prompt_tokens: Tensor | None = None) -> Tensor:
        return self.head(self.forward_features(x, prompt_tokens))


@MODELS.register("tiny_vit")
def tiny_vit(
    num_classes: int, in_channels: int = 3, image_size: int = 32, *,
    patch_size: int = 4, dim: int = 64, depth: int = 4, heads: int = 4, mlp_ratio: float = 4.0,
) -> TinyViT:
    """Small ViT (our ViT-B/16 stand-in): features = final-LayerNorm cls token, head Linear(dim, C)."""
    for key, v in {"patch_size": patch_size, "dim": dim, "depth": depth, "heads": heads}.items():
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise ConfigError(f"{key} must be a positive integer, got {v!r}")
    if image_size % patch_size:
        raise ConfigError(f"image_size={image_size} must be divisible by patch_size={patch_size}")
    if dim % heads:
        raise ConfigError(f"dim={dim} must be divisible by heads={heads}")
    if mlp_ratio <= 0:
        raise ConfigError(f"mlp_ratio must be positive, got {mlp_ratio!r}")
    encoder = TinyViTEncoder(in_channels, image_size, patch_size, dim, depth, heads, mlp_ratio)
    return TinyViT(encoder, nn.Linear(dim, num_classes), dim, num_classes)


def load_pretrained(model: nn.Module, path: str | Path) -> nn.Module:
    """Load a local state-dict file into ``model`` strictly; never downloads.

    Accepts a raw state dict or a dict holding one under ``"state_dict"``. Raises
    FileNotFoundError for a missing file and ConfigError (naming the path and the offending keys)
    for an unreadable file or any missing, unexpected or wrongly shaped key.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"pretrained weights not found: {path} (load_pretrained never downloads)")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # pickle/zip errors come in many types; the path is what the user needs
        raise ConfigError(f"could not read pretrained weights {path}: {e}") from e
    if isinstance(state, dict) and isinstance(state.get("state_dict"), dict):
        state = state["state_dict"]
    if not isinstance(state, dict):
        raise ConfigError(f"pretrained weights {path} hold a {type(state).__name__}, not a state dict")

    own = model.state_dict()
    missing = sorted(set(own) - set(state))
    unexpected = sorted(set(state) - set(own))
    shape = sorted(
        f"{k} {list(state[k].shape)} vs model {list(own[k].shape)}"
        for k in set(own) & set(state)
        if hasattr(state[k], "shape") and state[k].shape != own[k].shape
    )
    problems = [
        f"{label}: {', '.join(keys[:5])}{' ...' if len(keys) > 5 else ''} ({len(keys)})"
        for label, keys in (("missing", missing), ("unexpected", unexpected), ("shape mismatch", shape))
        if keys
    ]
    if problems:
        raise ConfigError(f"pretrained weights {path} do not match the model; " + "; ".join(problems))
    model.load_state_dict(state, strict=True)
    return model
