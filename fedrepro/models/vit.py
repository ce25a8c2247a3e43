"""timm's ``VisionTransformer`` as a prompt-tunable :class:`FrozenBackbone`: the stand-in and ViT-B/16.

One code path builds both: ``timm.create_model("vit_base_patch16_224.<tag>", ...)``. For ViT-B/16
(PEP-FedPT (arXiv) §4, following VPT) no shape is overridden; for the small stand-in that this
repository pretrains on glyphs (:mod:`fedrepro.pretrain.vit`), the patch size, width, depth, heads
and MLP ratio are. Weights only ever come from a local file through timm's own loader
(``pretrained_cfg_overlay=dict(file=...)``), so timm adapts the input channels and resamples the
positional embedding exactly as it does for published checkpoints, and nothing is downloaded.

timm is an optional dependency (the ``clip`` extra), imported only when a ViT is built.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from ..errors import ConfigError, CorruptCacheError, FedreproError
from .backbones import BlockHook, FrozenBackbone, chain_hooks, insert_prompts
from .record import load_checked, read_record
from .base import SplitModel, check_positive
from .registry import MODELS

TIMM_ARCH = "vit_base_patch16_224"
# Pretrained tags of TIMM_ARCH trained on ImageNet-21k. VPT (Jia et al. 2022), which PEP-FedPT
# follows, used Google's original release: "orig_in21k" (no classifier). "augreg_in21k" is the
# later AugReg release (a 21,843-way head, which timm drops on load).
IN21K_TAGS = ("orig_in21k", "augreg_in21k")
WEIGHTS_DIR = Path(__file__).resolve().parent / "weights"
# Named checkpoints committed under WEIGHTS_DIR; "glyphs" is written by `fedrepro pretrain vit`.
COMMITTED = {"glyphs": "vit_glyphs.pt"}


@dataclass(frozen=True)
class ViTShape:
    """The architecture: grey 28×28 patch-4 stand-in or ViT-B/16 (``VIT_B16``)."""

    image_size: int = 28
    in_channels: int = 1
    patch_size: int = 4
    dim: int = 96
    depth: int = 6
    heads: int = 3
    mlp_ratio: float = 2.0
    # Pad images up to a multiple of the patch (timm's dynamic_img_pad): only so that ViT-B/16 still
    # builds on the 28/32-pixel inputs every registered model must accept.
    pad: bool = False

    def check(self) -> ViTShape:
        check_positive(image_size=self.image_size, in_channels=self.in_channels, patch_size=self.patch_size,
                       dim=self.dim, depth=self.depth, heads=self.heads)
        if self.image_size % self.patch_size and not self.pad:
            raise ConfigError(f"image_size={self.image_size} must be divisible by patch_size={self.patch_size}")
        if self.dim % self.heads:
            raise ConfigError(f"dim={self.dim} must be divisible by heads={self.heads}")
        if isinstance(self.mlp_ratio, bool) or not isinstance(self.mlp_ratio, (int, float)) or self.mlp_ratio <= 0:
            raise ConfigError(f"mlp_ratio must be a positive number, got {self.mlp_ratio!r}")
        return self

    def timm_kwargs(self) -> dict[str, Any]:
        return {"img_size": self.image_size, "in_chans": self.in_channels, "patch_size": self.patch_size,
                "embed_dim": self.dim, "depth": self.depth, "num_heads": self.heads,
                "mlp_ratio": float(self.mlp_ratio), "dynamic_img_pad": self.pad, "dynamic_img_size": self.pad}


VIT_B16 = ViTShape(image_size=224, in_channels=3, patch_size=16, dim=768, depth=12, heads=12, mlp_ratio=4.0)


def committed_weights(name: str) -> Path:
    """Path of a committed checkpoint by name (see :data:`COMMITTED`)."""
    if name not in COMMITTED:
        raise ConfigError(f"unknown committed weights {name!r}; valid: {', '.join(COMMITTED)} or a file path")
    path = WEIGHTS_DIR / COMMITTED[name]
    if not path.is_file():
        raise FileNotFoundError(f"committed weights {path} are missing; regenerate them with `make pretrain`")
    return path


# What to do about a checkpoint that does not load or does not match its record.
WEIGHTS_FIX = ("regenerate it with `fedrepro pretrain vit` (`make pretrain`), restore the committed file, or "
               "name a sound file in model.args.weights")


def checkpoint_meta(path: str | Path) -> dict[str, Any]:
    """The JSON written beside a checkpoint by ``fedrepro pretrain`` ({} if there is none; a one-line
    error naming it when it is not a JSON object)."""
    record = read_record(path, WEIGHTS_FIX)
    return {} if record is None else record


def _resolve_weights(weights: str | Path | None) -> Path | None:
    if weights is None:
        return None
    if isinstance(weights, str) and weights in COMMITTED:
        return committed_weights(weights)
    path = Path(weights)
    if not path.is_file():
        raise FileNotFoundError(
            f"weights={str(weights)!r} is neither a committed name ({', '.join(COMMITTED)}) nor an existing file; "
            f"nothing is ever downloaded"
        )
    return path


def build_timm_vit(shape: ViTShape, weights: str | Path | None = None, tag: str = "orig_in21k") -> nn.Module:
    """timm ``VisionTransformer`` of ``shape`` without a classifier, weights from a local file or random.

    ``weights`` is a committed name, a timm/PyTorch state dict (``.pth``, ``.bin``, ``.safetensors``)
    or Google's official ``.npz``. The checkpoint's own input size, when its JSON records one, tells
    timm how to adapt channels and positions to ``shape``.
    """
    import timm

    if tag not in IN21K_TAGS:
        raise ConfigError(f"tag must be one of {', '.join(IN21K_TAGS)}, got {tag!r}")
    shape.check()
    path = _resolve_weights(weights)
    overlay = None
    if path is not None:
        overlay = {"file": str(path), "custom_load": path.suffix == ".npz"}  # .npz: JAX layout, timm's own reader
        record = checkpoint_meta(path)
        if "weights_hash" in record:
            # A checkpoint this repository pretrained: its weights must be the ones its record describes
            # (a flipped bit or a swapped file is an error naming it, not a backbone to train prompts on).
            load_checked(path, record, WEIGHTS_FIX)
        source = record.get("shape")
        if source:
            try:
                overlay["input_size"] = (source["in_channels"], source["image_size"], source["image_size"])
            except (TypeError, KeyError) as e:
                raise CorruptCacheError(f"checkpoint record {path.with_suffix('.json')} has an invalid shape "
                                        f"({type(e).__name__}: {e}); {WEIGHTS_FIX}") from e
    try:
        return timm.create_model(
            f"{TIMM_ARCH}.{tag}", pretrained=path is not None, pretrained_cfg_overlay=overlay, num_classes=0,
            **shape.timm_kwargs(),
        )
    except FedreproError:
        raise
    except Exception as e:  # noqa: BLE001  (a file timm cannot read fails in many types: zip, EOF, npz, keys)
        if path is None:
            raise
        raise CorruptCacheError(f"weights file {path} does not load into a ViT of this shape ({type(e).__name__}: "
                                f"{(str(e).strip().splitlines() or [''])[0][:200]}); {WEIGHTS_FIX}") from e


class ViTBackbone(FrozenBackbone):
    """A timm ``VisionTransformer`` driven block by block: embed → blocks (prompts, hooks) → norm → cls."""

    def __init__(self, vit: nn.Module):
        super().__init__()
        if getattr(vit, "cls_token", None) is None or vit.global_pool != "token":
            raise ConfigError("ViTBackbone needs a timm VisionTransformer with a cls token and global_pool='token'")
        self.vit = vit
        self.feature_dim = int(vit.embed_dim)
        self.depth = len(vit.blocks)

    def embed(self, x: Tensor) -> Tensor:
        v = self.vit
        # timm's own steps before the blocks (VisionTransformer.forward_features), cls concat + pos-emb.
        return v.norm_pre(v.patch_drop(v._pos_embed(v.patch_embed(x))))

    def forward_tokens(
        self, tokens: Tensor, prompts: Tensor | None = None, block_hook: BlockHook | None = None,
        start_block: int = 0,
    ) -> Tensor:
        if not isinstance(start_block, int) or not 0 <= start_block <= self.depth:
            raise ConfigError(f"start_block must be an int in [0, {self.depth}], got {start_block!r}")
        # Prompts enter after embed() added positions: VPT gives prompts no positional embedding.
        tokens = insert_prompts(tokens, prompts)
        for i in range(start_block, self.depth):
            if block_hook is not None:
                replaced = block_hook(i, tokens)
                if replaced is not None:
                    tokens = replaced
            tokens = self.vit.blocks[i](tokens)
        return self.vit.norm(tokens)

    def tokens_before(self, x: Tensor, block: int) -> Tensor:
        """Tokens entering ``block`` without prompts: what a prompt first changing ``block`` leaves fixed."""
        if not isinstance(block, int) or not 0 <= block <= self.depth:
            raise ConfigError(f"block must be an int in [0, {self.depth}], got {block!r}")
        tokens = self.embed(x)
        for i in range(block):
            tokens = self.vit.blocks[i](tokens)
        return tokens

    def cls_per_block(
        self, x: Tensor, prompts: Tensor | None = None, block_hook: BlockHook | None = None
    ) -> Tensor:
        """[B, depth + 1, d]: the cls token entering each block, then the final-norm cls (PEP-FedPT Fig. 2)."""
        seen: list[Tensor] = []

        def record(i: int, tokens: Tensor) -> None:
            seen.append(tokens[:, 0])

        # The record hook runs after the caller's, so it sees the tokens the block actually gets.
        out = self.forward_tokens(self.embed(x), prompts, chain_hooks(block_hook, record))
        return torch.stack(seen + [self.pool(out)], dim=1)


class PromptViT(SplitModel):
    """SplitModel whose φ is a :class:`ViTBackbone`; forward passes accept prompts and block hooks."""

    features: ViTBackbone

    def forward_features(
        self, x: Tensor, prompt_tokens: Tensor | None = None, block_hook: BlockHook | None = None
    ) -> Tensor:
        """cls embedding [B, dim]; ``prompt_tokens`` ([P, dim] or [B, P, dim]) go right after cls."""
        return self.features(x, prompt_tokens, block_hook)

    def forward(self, x: Tensor, prompt_tokens: Tensor | None = None, block_hook: BlockHook | None = None) -> Tensor:
        return self.head(self.forward_features(x, prompt_tokens, block_hook))


def vit_model(
    shape: ViTShape, num_classes: int, weights: str | Path | None = None, tag: str = "orig_in21k"
) -> PromptViT:
    """The one builder behind ``tiny_vit`` and ``vit_b16``: timm ViT of ``shape`` + ``Linear(dim, C)``."""
    backbone = ViTBackbone(build_timm_vit(shape, weights, tag))
    return PromptViT(backbone, nn.Linear(shape.dim, num_classes), shape.dim, num_classes)


@MODELS.register("tiny_vit")
def tiny_vit(
    num_classes: int, in_channels: int = 1, image_size: int = 28, *,
    patch_size: int = 4, dim: int = 96, depth: int = 6, heads: int = 3, mlp_ratio: float = 2.0,
    weights: str | None = None,
) -> PromptViT:
    """Small timm ViT, our ViT-B/16 stand-in (pre-LN, cls token). ``weights="glyphs"`` loads the
    committed glyph-pretrained checkpoint (grey 28×28; timm adapts it to other sizes/channels).

    Unrelated to timm's "TinyViT" architecture of the same name.
    """
    shape = ViTShape(image_size, in_channels, patch_size, dim, depth, heads, mlp_ratio)
    return vit_model(shape, num_classes, weights)


@MODELS.register("vit_b16")
def vit_b16(
    num_classes: int, in_channels: int = 3, image_size: int = 224, *,
    tag: str = "orig_in21k", weights: str | None = None,
) -> PromptViT:
    """timm ViT-B/16 (``vit_base_patch16_224``); ``weights`` is a local IN-21k file (never downloaded)."""
    shape = ViTShape(image_size, in_channels, VIT_B16.patch_size, VIT_B16.dim, VIT_B16.depth, VIT_B16.heads,
                     VIT_B16.mlp_ratio, pad=image_size % VIT_B16.patch_size != 0)
    return vit_model(shape, num_classes, weights, tag)


def _weight_files(weights: str | None = None, **_: object) -> list[Path]:
    """The weights file a ``tiny_vit`` or ``vit_b16`` reads, for its runs' input digest
    (:func:`fedrepro.models.record.weights_digest`)."""
    path = _resolve_weights(weights)
    return [] if path is None else [path]


tiny_vit.weight_files = vit_b16.weight_files = _weight_files  # type: ignore[attr-defined]


def shape_dict(shape: ViTShape) -> dict[str, Any]:
    return asdict(shape)


ARCH_KEYS = ("patch_size", "dim", "depth", "heads", "mlp_ratio")


def arch_kwargs(shape: ViTShape | dict[str, Any]) -> dict[str, Any]:
    """The ``tiny_vit`` keyword arguments of a shape (or of a checkpoint record's ``"shape"``)."""
    d = shape_dict(shape) if isinstance(shape, ViTShape) else shape
    return {k: d[k] for k in ARCH_KEYS}


__all__ = [
    "COMMITTED",
    "IN21K_TAGS",
    "VIT_B16",
    "PromptViT",
    "ViTBackbone",
    "ViTShape",
    "arch_kwargs",
    "build_timm_vit",
    "checkpoint_meta",
    "committed_weights",
    "shape_dict",
    "tiny_vit",
    "vit_b16",
    "vit_model",
]
