"""The ``clip`` model: a frozen CLIP as a registered :class:`SplitModel`, for the text-prompt methods.

FedOTP (CVPR 2024) and its baselines (CoOp, PromptFL and its PFL adaptations, pFedPrompt) tune text
prompts on a frozen CLIP. They read the CLIP itself (:attr:`ClipClassifier.clip`) and the images as
uint8, since CLIP has its own preprocessing; the split model only makes the backbone a config
choice like any other (``model.name: clip``, ``model.args: {arch, weights, source}``) and gives
analyses a ``features`` (the pooled, normalised image embedding) and a ``head`` (zero-shot text
features, filled by the method that knows the class names).

``arch="standin"`` is the committed CPU stand-in (:func:`fedrepro.models.clip.load_standin`);
``"standin_patch"`` the committed stand-in whose feature map is trained (an attention-pool head as in
RN50 and a patch term in pretraining; issue 55, finding 6); ``"ViT-B-16"`` and ``"RN50"`` read a
local OpenAI or LAION file (``weights``; nothing is downloaded). Loading is cached per process: the
CLIP is frozen, so every method and client of a process may share one copy.
"""
from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..errors import ConfigError
from .base import SplitModel
from .clip import (PAPER_ARCHS, STANDIN_CHECKPOINT, STANDIN_PATCH_CHECKPOINT, WEIGHT_SOURCES, ClipBackbone, load_clip,
                   load_standin)
from .registry import MODELS

# The committed CPU stand-ins, by the name a config gives them (model.args.arch).
STANDINS = {"standin": STANDIN_CHECKPOINT, "standin_patch": STANDIN_PATCH_CHECKPOINT}
ARCHS = (*STANDINS, *PAPER_ARCHS)
# The paper profile's CLIP weights: a local file named by this variable (our choice of name), or a
# folder holding one file per architecture (``RN50.pt``, ``ViT-B-16.pt``).
ENV_CLIP_WEIGHTS = "FEDREPRO_CLIP_WEIGHTS"


@lru_cache(maxsize=4)
def _cached_backbone(arch: str, weights: str | None, source: str) -> ClipBackbone:
    if arch in STANDINS:
        return load_standin(weights if weights is not None else STANDINS[arch])
    return load_clip(arch, weights, source)


def clip_backbone(arch: str = "standin", weights: str | None = None, source: str = "openai") -> ClipBackbone:
    """The frozen CLIP ``arch`` (one shared copy per process and arguments)."""
    if arch not in ARCHS:
        raise ConfigError(f"model.args.arch must be one of {', '.join(ARCHS)}, got {arch!r}")
    if source not in WEIGHT_SOURCES:
        raise ConfigError(f"model.args.source must be one of {', '.join(WEIGHT_SOURCES)}, got {source!r}")
    if weights is not None and not isinstance(weights, str):
        raise ConfigError(f"model.args.weights must be a file path (a string) or null, got {weights!r}")
    if arch not in STANDINS and weights is None:
        weights = _from_env(arch)
        if not weights:
            raise ConfigError(f"model.args.weights must name a local {arch} CLIP file (or set ${ENV_CLIP_WEIGHTS}); "
                              "nothing is downloaded, see docs/backbones.md")
    return _cached_backbone(arch, weights, source)


def _from_env(arch: str) -> str | None:
    weights = os.environ.get(ENV_CLIP_WEIGHTS)
    # A folder serves every architecture, one <arch>.pt each: FedOTP's tables read RN50 and ViT-B/16.
    if weights and os.path.isdir(weights):
        weights = os.path.join(weights, f"{arch}.pt")
    return weights or None


class ClipImageFeatures(nn.Module):
    """uint8 images (or floats on the 0-255 scale) -> L2-normalised pooled CLIP image embeddings."""

    def __init__(self, clip: ClipBackbone):
        super().__init__()
        self.clip = clip

    def forward(self, x: Tensor) -> Tensor:
        if x.dtype != torch.uint8:
            x = x.round().clamp(0, 255).to(torch.uint8)
        return F.normalize(self.clip.encode_image(self.clip.preprocess(x)), dim=-1)


class ClipClassifier(SplitModel):
    """A frozen CLIP image tower (``features``) and a text-feature head (``head``, zero bias).

    The head's rows are L2-normalised text features times CLIP's logit scale once a method calls
    :meth:`set_text_features`; until then they are zero.
    """

    def __init__(self, clip: ClipBackbone, num_classes: int):
        features = ClipImageFeatures(clip)
        # CLIP's classifier has no bias; the zero bias keeps the head a plain ``nn.Linear`` like every
        # other model's (``head.weight``, ``head.bias``), for the methods and tests that rely on it.
        head = nn.Linear(clip.embed_dim, num_classes)
        nn.init.zeros_(head.weight)
        nn.init.zeros_(head.bias)
        super().__init__(features, head, clip.embed_dim, num_classes)
        for p in self.parameters():
            p.requires_grad_(False)

    @property
    def clip(self) -> ClipBackbone:
        return self.features.clip

    @torch.no_grad()
    def set_text_features(self, text: Tensor) -> None:
        self.head.weight.copy_(self.clip.logit_scale() * F.normalize(text, dim=-1))


@MODELS.register("clip")
def clip(num_classes: int, in_channels: int = 3, image_size: int = 28, *, arch: str = "standin",
         weights: str | None = None, source: str = "openai") -> ClipClassifier:
    """Frozen CLIP (``arch``: standin, standin_patch, ViT-B-16 or RN50) for the text-prompt methods; grey images are
    repeated to RGB and resized to the CLIP's own input size by its preprocessing."""
    return ClipClassifier(clip_backbone(arch, weights, source), num_classes)


def _weight_files(arch: str = "standin", weights: str | None = None, **_: object) -> list[Path]:
    """The weights file a ``clip`` model reads, for its runs' input digest
    (:func:`fedrepro.models.record.weights_digest`): $FEDREPRO_CLIP_WEIGHTS is not in the config."""
    if arch in STANDINS:
        return [Path(weights) if weights else STANDINS[arch]]
    found = weights if weights is not None else _from_env(arch)
    return [Path(found)] if found else []


clip.weight_files = _weight_files  # type: ignore[attr-defined]

__all__ = ["ARCHS", "ENV_CLIP_WEIGHTS", "STANDINS", "ClipClassifier", "ClipImageFeatures", "clip", "clip_backbone"]
