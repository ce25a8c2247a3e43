"""Frozen CLIP backbones from open_clip, with the two hooks prompt methods need.

FedOTP (CVPR 2024) §4.2 tunes CoOp prompts on a frozen CLIP and matches them to the image's
*feature map*: it needs (i) the projected embedding of every output token of the image encoder
(ln_post and proj applied to cls and patches for a ViT; every attention-pool output for the
modified ResNet), (ii) a text encoder that accepts input embeddings rather than token ids (CoOp,
IJCV 2022, §3.2), and (iii) CLIP's learned logit scale.

One class, :class:`ClipBackbone`, wraps open_clip's own ``CLIP`` for both scales:

- the CPU stand-in: a small ViT/text config (:class:`StandinArch`), pretrained here by
  :mod:`fedrepro.pretrain.clip` and stored with a reduced vocabulary (:func:`load_standin`);
- the paper scale: open_clip's ``ViT-B-16`` and ``RN50`` configs, built with random weights and
  filled from a local OpenAI or LAION file (:func:`load_clip`). Nothing is ever downloaded.

Text always goes through open_clip's BPE tokenizer (its bundled vocabulary).
"""
from __future__ import annotations

import hashlib
import warnings
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..errors import ConfigError, CorruptCacheError, DataNotFoundError
from ..params import check_fields, hp
from .backbones import read_weights
from .record import load_checked, read_record, record_entry

PAPER_ARCHS = ("ViT-B-16", "RN50")
# The committed stand-in, written by ``fedrepro pretrain clip`` (record beside it, same stem, .json).
STANDIN_CHECKPOINT = Path(__file__).parent / "weights" / "clip_standin.pt"
# The stand-in whose feature map is trained (issue 55, finding 6): an attention-pool head as in CLIP's
# RN50 and a patch-level term in pretraining, written by ``fedrepro pretrain clip_patch``.
STANDIN_PATCH_CHECKPOINT = Path(__file__).parent / "weights" / "clip_standin_patch.pt"
# How the image tower pools its tokens: "tok" is CLIP ViT's class token (the first stand-in);
# "attention" is CLIP RN50's attention pool (Radford et al., ICML 2021, §2.4), over the patch tokens.
POOLS = ("tok", "attention")
# The attention pool's feature map, i.e. what FedOTP transports over: "attention" keeps every query's
# output, as FedOTP's official code reads RN50; "value" is each patch's value through the pool's out
# projection (MaskCLIP, ECCV 2022), of which the pooled embedding is the attention-weighted sum.
FEATURE_MAPS = ("attention", "value")
# OpenAI trained with QuickGELU; open_clip's plain configs use nn.GELU (LAION's ViT-B-16 weights).
WEIGHT_SOURCES = {"openai": True, "laion": False}
FULL_VOCAB = 49408
# Keys the OpenAI TorchScript archives carry besides the weights.
_JIT_EXTRAS = ("input_resolution", "context_length", "vocab_size")
_OPENAI_MEAN = (0.48145466, 0.4578275, 0.40821073)
_OPENAI_STD = (0.26862954, 0.26130258, 0.27577711)
# The stand-in sees grey glyphs and clothing; a symmetric range keeps the input centred.
STANDIN_MEAN = (0.5, 0.5, 0.5)
STANDIN_STD = (0.5, 0.5, 0.5)


@dataclass(frozen=True)
class StandinArch:
    """Shape of the CPU stand-in CLIP (docs/backbones.md, "The CLIP stand-in (FedOTP)").

    Patch 4 on 28×28 gives M = 49 feature-map tokens, as many as RN50's 7×7 map in FedOTP. ``pool``
    picks the image head: the class token ("tok") or RN50's attention pool ("attention",
    :class:`AttentionPoolViT`, the patch stand-in of docs/backbones.md).
    """

    embed_dim: int = hp(64, ge=1)
    image_size: int = hp(28, ge=1)
    patch_size: int = hp(4, ge=1)
    vision_width: int = hp(96, ge=1)
    vision_layers: int = hp(6, ge=1)
    vision_head_width: int = hp(32, ge=1)
    vision_mlp_ratio: float = hp(2.0, gt=0)
    context_length: int = hp(16, ge=1)
    text_width: int = hp(64, ge=1)
    text_heads: int = hp(2, ge=1)
    text_layers: int = hp(3, ge=1)
    # "tok" for the first stand-in (old records have no such key); "attention" for the patch stand-in.
    pool: str = hp("tok", choices=POOLS)
    feature_map: str = hp("value", choices=FEATURE_MAPS)  # read only when pool="attention"

    def __post_init__(self) -> None:
        check_fields(self)

    def validate(self) -> None:
        if self.image_size % self.patch_size:
            raise ConfigError(
                f"StandinArch.image_size ({self.image_size}) must be a multiple of patch_size ({self.patch_size})"
            )
        if self.pool == "attention" and self.vision_width % self.attention_heads:
            raise ConfigError(
                f"StandinArch.vision_width ({self.vision_width}) must be a multiple of its attention-pool heads "
                f"(vision_width // vision_head_width = {self.attention_heads}) when pool='attention'"
            )

    @property
    def attention_heads(self) -> int:
        # The pool's heads have the trunk's head width, as RN50's (width 2048, 32 heads of 64).
        return max(1, self.vision_width // self.vision_head_width)

    def open_clip_cfg(self, vocab_size: int) -> dict:
        return {
            "embed_dim": self.embed_dim,
            "vision_cfg": {
                "image_size": self.image_size, "patch_size": self.patch_size, "width": self.vision_width,
                "layers": self.vision_layers, "head_width": self.vision_head_width,
                "mlp_ratio": self.vision_mlp_ratio,
            },
            "text_cfg": {
                "context_length": self.context_length, "vocab_size": vocab_size, "width": self.text_width,
                "heads": self.text_heads, "layers": self.text_layers,
            },
        }


@lru_cache(maxsize=1)
def bpe_tokenizer():
    """open_clip's BPE tokenizer on its bundled vocabulary (built once: reading the merges takes ~1 s)."""
    from open_clip.tokenizer import SimpleTokenizer

    return SimpleTokenizer()


class ClipBackbone(nn.Module):
    """A frozen open_clip ``CLIP`` plus tokenisation, preprocessing and the FedOTP/CoOp hooks.

    ``vocab_ids`` (sorted BPE ids) is set when the token embedding keeps only some rows of the
    49,408-token vocabulary; row ``i`` then embeds BPE token ``vocab_ids[i]``. Sorting keeps the
    end-of-text token the largest id, which is what CLIP's argmax EOT pooling relies on.
    """

    def __init__(
        self,
        model: nn.Module,
        *,
        image_mean: Sequence[float],
        image_std: Sequence[float],
        vocab_ids: Tensor | None = None,
        name: str = "clip",
    ):
        super().__init__()
        self.model = model
        self.name = name
        self.model.requires_grad_(False)
        self.model.eval()
        self.register_buffer("image_mean", torch.tensor(image_mean, dtype=torch.float32).view(1, 3, 1, 1), False)
        self.register_buffer("image_std", torch.tensor(image_std, dtype=torch.float32).view(1, 3, 1, 1), False)
        tok = bpe_tokenizer()
        if vocab_ids is None:
            self.vocab_ids = None
            self._to_row = None
        else:
            ids = torch.as_tensor(vocab_ids, dtype=torch.long)
            if ids.dim() != 1 or not bool((ids[1:] > ids[:-1]).all()):
                raise ConfigError("vocab_ids must be a strictly increasing 1-D list of BPE token ids")
            needed = {0, tok.sot_token_id, tok.eot_token_id}  # 0 pads the sequence
            if not needed <= set(ids.tolist()):
                raise ConfigError(f"vocab_ids must contain the pad, start and end tokens {sorted(needed)}")
            self.vocab_ids = ids
            self._to_row = {int(t): i for i, t in enumerate(ids.tolist())}
        rows = model.token_embedding.num_embeddings
        expected = FULL_VOCAB if vocab_ids is None else len(self.vocab_ids)
        if rows != expected:
            raise ConfigError(f"the token embedding has {rows} rows but the vocabulary has {expected} tokens")
        self._fingerprint: str | None = None
        self.sot_id = self._row(tok.sot_token_id, "<start_of_text>")
        self.eot_id = self._row(tok.eot_token_id, "<end_of_text>")

    # The CLIP is frozen, so dropout and batch-norm statistics must never switch to training mode.
    def train(self, mode: bool = True) -> ClipBackbone:
        super().train(mode)
        self.model.eval()
        return self

    @property
    def context_length(self) -> int:
        return int(self.model.context_length)

    @property
    def text_width(self) -> int:
        return int(self.model.token_embedding.embedding_dim)

    @property
    def embed_dim(self) -> int:
        proj = self.model.text_projection
        return int(proj.shape[1] if isinstance(proj, Tensor) else proj.out_features)

    @property
    def image_size(self) -> int:
        size = self.model.visual.image_size
        return int(size[0] if isinstance(size, (tuple, list)) else size)

    def fingerprint(self) -> str:
        """sha256 of the weights (and vocabulary): what a cache of this model's outputs is keyed by."""
        if getattr(self, "_fingerprint", None) is None:
            h = hashlib.sha256(self.name.encode())
            if self.vocab_ids is not None:
                h.update(self.vocab_ids.numpy().tobytes())
            for key, value in sorted(self.model.state_dict().items()):
                h.update(key.encode())
                h.update(value.detach().cpu().float().contiguous().numpy().tobytes())
            self._fingerprint = h.hexdigest()
        return self._fingerprint

    def logit_scale(self) -> Tensor:
        """CLIP's learned inverse temperature, ``exp(logit_scale)`` (≈100 for OpenAI's weights)."""
        return self.model.logit_scale.detach().exp()

    # ---------------------------------------------------------------- text
    def _row(self, token: int, word: str) -> int:
        if self._to_row is None:
            return int(token)
        try:
            return self._to_row[int(token)]
        except KeyError:
            raise ConfigError(
                f"{word!r} is not in this checkpoint's reduced vocabulary ({len(self._to_row)} BPE tokens); "
                f"use words from vocabulary_words(), or add it to EXTRA_WORDS in fedrepro/pretrain/clip_data.py "
                f"and pretrain again (`fedrepro pretrain clip`)"
            ) from None

    def word_ids(self, text: str) -> list[int]:
        """Token rows of ``text`` without start/end tokens."""
        tok = bpe_tokenizer()
        return [self._row(t, tok.decode([t]).strip()) for t in tok.encode(text)]

    def vocabulary_words(self) -> list[str]:
        """The BPE tokens this model can embed (all 49,408 for an unreduced vocabulary)."""
        tok = bpe_tokenizer()
        ids = range(FULL_VOCAB) if self.vocab_ids is None else self.vocab_ids.tolist()
        return [tok.decoder[i] for i in ids]

    def tokenize(self, texts: Sequence[str]) -> Tensor:
        """[N, context_length] token rows: start, the words, end, then padding (row 0).

        Unlike open_clip's tokenizer this refuses to truncate: a cut-off prompt would silently
        lose its class name.
        """
        if isinstance(texts, str):
            texts = [texts]
        out = torch.zeros(len(texts), self.context_length, dtype=torch.long)
        for i, text in enumerate(texts):
            ids = [self.sot_id, *self.word_ids(text), self.eot_id]
            if len(ids) > self.context_length:
                raise ConfigError(
                    f"text {text!r} is {len(ids)} tokens long with start/end, over the model's "
                    f"context_length {self.context_length}"
                )
            out[i, : len(ids)] = torch.tensor(ids)
        return out

    def encode_text_embeddings(self, x: Tensor, eot_index: Tensor) -> Tensor:
        """Input token embeddings [N, T, text_width] → text features [N, embed_dim] (not normalised).

        Adds the positional embedding, runs the causal transformer, applies ln_final, takes the
        end-of-text position ``eot_index`` [N] and projects: CLIP's ``encode_text`` after its
        embedding lookup, so learned context vectors can stand in for word embeddings (CoOp).
        """
        m = self.model
        n, t, _ = x.shape
        if t > self.context_length:
            raise ConfigError(f"text embeddings have {t} positions, over context_length {self.context_length}")
        x = x + m.positional_embedding[:t].to(x.dtype)
        mask = None if m.attn_mask is None else m.attn_mask[:t, :t]
        x = m.ln_final(m.transformer(x, attn_mask=mask))
        x = x[torch.arange(n, device=x.device), eot_index]
        proj = m.text_projection
        if proj is None:
            return x
        return proj(x) if isinstance(proj, nn.Linear) else x @ proj

    def encode_text(self, texts: Sequence[str]) -> Tensor:
        """Text features [N, embed_dim] of plain strings (not normalised)."""
        tokens = self.tokenize(texts).to(self.image_mean.device)
        eot = (tokens == self.eot_id).int().argmax(dim=1)
        return self.encode_text_embeddings(self.model.token_embedding(tokens), eot)

    # ---------------------------------------------------------------- images
    def preprocess(self, images: Tensor) -> Tensor:
        """uint8 [B, 1|3, H, W] → the float input CLIP expects: grey repeated to RGB, resized, normalised."""
        if images.dtype != torch.uint8 or images.dim() != 4 or images.shape[1] not in (1, 3):
            raise ConfigError(f"images must be uint8 [B, 1 or 3, H, W], got {images.dtype} {tuple(images.shape)}")
        x = images.to(self.image_mean.device, torch.float32).div_(255)
        if x.shape[1] == 1:
            x = x.expand(-1, 3, -1, -1)
        if x.shape[-2:] != (self.image_size, self.image_size):
            x = F.interpolate(x, size=(self.image_size, self.image_size), mode="bicubic", align_corners=False)
        return (x - self.image_mean) / self.image_std

    def image_tokens(self, x: Tensor) -> Tensor:
        """Preprocessed images [B, 3, S, S] → projected tokens [B, 1 + M, embed_dim] in the joint space.

        Index 0 is the class (ViT) or mean-pooled (ResNet) token and equals ``encode_image``;
        indices 1..M are the feature map (FedOTP §4.2), unnormalised.
        """
        from open_clip.modified_resnet import ModifiedResNet
        from open_clip.transformer import VisionTransformer

        visual = self.model.visual
        if isinstance(visual, AttentionPoolViT):
            return visual.tokens(x)
        if isinstance(visual, VisionTransformer):
            return _vit_tokens(visual, x)
        if isinstance(visual, ModifiedResNet):
            return _resnet_tokens(visual, x)
        raise ConfigError(f"image_tokens supports open_clip ViT and ModifiedResNet towers, not {type(visual).__name__}")

    def encode_image(self, x: Tensor) -> Tensor:
        """open_clip's pooled image feature [B, embed_dim] of preprocessed images."""
        return self.model.encode_image(x)


def _vit_tokens(visual: nn.Module, x: Tensor) -> Tensor:
    # Valid only for the plain CLIP head: class-token pooling, ln_post on every token, no pooler.
    if visual.attn_pool is not None or visual.pool_type != "tok" or visual.final_ln_after_pool:
        raise ConfigError("image_tokens needs a ViT tower with pool_type='tok' and no attentional pooler")
    tokens = visual.ln_post(visual.transformer(visual._embeds(x)))
    return tokens if visual.proj is None else tokens @ visual.proj


def _resnet_tokens(visual: nn.Module, x: Tensor) -> Tensor:
    # CLIP's ResNet attention pool already attends over [mean; 7×7 positions] and keeps only the
    # mean query's output; keeping every query's output gives the feature map in the joint space.
    x = x.to(visual.conv1.weight.dtype)
    x = visual.stem(x)
    x = visual.layer4(visual.layer3(visual.layer2(visual.layer1(x))))
    return _attention_pool(visual.attnpool, x.flatten(2).permute(2, 0, 1))[0].permute(1, 0, 2)


def _attention_pool(pool: nn.Module, seq: Tensor) -> tuple[Tensor, Tensor]:
    """CLIP RN50's attention pool (open_clip ``AttentionPool2d``) over ``seq`` [M, B, C], keeping every
    query's output: (outputs [1 + M, B, d] with the mean query's first, the input to the value
    projection [1 + M, B, C]: the mean token and the positions, positional embedding added)."""
    seq = torch.cat([seq.mean(dim=0, keepdim=True), seq], dim=0)
    seq = seq + pool.positional_embedding[:, None, :].to(seq.dtype)
    out, _ = F.multi_head_attention_forward(
        query=seq, key=seq, value=seq, embed_dim_to_check=seq.shape[-1], num_heads=pool.num_heads,
        q_proj_weight=pool.q_proj.weight, k_proj_weight=pool.k_proj.weight, v_proj_weight=pool.v_proj.weight,
        in_proj_weight=None, in_proj_bias=torch.cat([pool.q_proj.bias, pool.k_proj.bias, pool.v_proj.bias]),
        bias_k=None, bias_v=None, add_zero_attn=False, dropout_p=0.0,
        out_proj_weight=pool.c_proj.weight, out_proj_bias=pool.c_proj.bias,
        use_separate_proj_weight=True, training=False, need_weights=False,
    )
    return out, seq


class AttentionPoolViT(nn.Module):
    """The stand-in's ViT trunk with CLIP RN50's attention pool as its head (issue 55, finding 6).

    FedOTP's Table 1 backbone, RN50, pools its 7×7 map with one multi-head attention whose query is
    the map's mean (Radford et al., ICML 2021, §2.4). This head pools the trunk's 7×7 patch tokens the
    same way (after ln_post; the trunk's class token is dropped, so the pooled embedding is built from
    the patches alone): ``forward`` is the mean query's output. :meth:`tokens` adds the feature map in
    the joint space, through the pool's own projections: each patch's value token ("value", the
    default: each head's pooled output is their attention-weighted sum), or every query's output
    ("attention", as FedOTP's official ``GLP_OT.py`` reads RN50); see :data:`FEATURE_MAPS`.
    """

    def __init__(self, trunk: nn.Module, heads: int, output_dim: int, feature_map: str = "value"):
        from open_clip.modified_resnet import AttentionPool2d

        super().__init__()
        if feature_map not in FEATURE_MAPS:
            raise ConfigError(f"feature_map must be one of {', '.join(FEATURE_MAPS)}, got {feature_map!r}")
        side, other = trunk.grid_size
        if side != other:
            raise ConfigError(f"the attention pool needs a square patch grid, got {side}×{other}")
        trunk.proj = None  # the pool's out projection maps into the joint space
        self.trunk = trunk
        self.attnpool = AttentionPool2d(side, trunk.conv1.out_channels, heads, output_dim)
        self.image_size = trunk.image_size
        self.feature_map = feature_map

    def _patch_sequence(self, x: Tensor) -> Tensor:
        t = self.trunk
        return t.ln_post(t.transformer(t._embeds(x)))[:, 1:].permute(1, 0, 2)  # [M, B, width]

    def forward(self, x: Tensor) -> Tensor:
        return _attention_pool(self.attnpool, self._patch_sequence(x))[0][0]

    def tokens(self, x: Tensor) -> Tensor:
        """[B, 1 + M, output_dim]: index 0 the pooled embedding (``forward``), then the feature map."""
        out, seq = _attention_pool(self.attnpool, self._patch_sequence(x))
        if self.feature_map == "value":
            pool = self.attnpool
            out = torch.cat([out[:1], pool.c_proj(pool.v_proj(seq[1:]))], dim=0)
        return out.permute(1, 0, 2)


class CoOpPrompts(nn.Module):
    """CoOp's prompt learner and text encoder (CoOp, IJCV 2022, §3.2; FedOTP §4.1).

    Prompt p for class c is ``[SOS, ctx[p, 0..L-1], <class-name tokens>, ".", EOS]`` (class token at
    the end, context shared by classes). ``forward()`` returns text features [n_prompts, C, embed_dim]
    (unnormalised). Only :attr:`ctx` [n_prompts, L, text_width] is trainable; the CLIP stays frozen,
    and ``state_dict()`` still contains it, so federated code should exchange ``ctx`` itself.
    """

    def __init__(
        self,
        clip: ClipBackbone,
        class_names: Sequence[str],
        n_ctx: int,
        *,
        generator: torch.Generator,
        n_prompts: int = 1,
        init_std: float = 0.02,
    ):
        super().__init__()
        for key, value in {"n_ctx": n_ctx, "n_prompts": n_prompts}.items():
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"{key} must be an int >= 1, got {value!r}")
        if not class_names:
            raise ConfigError("class_names must name at least one class")
        if not isinstance(generator, torch.Generator):
            raise ConfigError("generator must be a torch.Generator (the context init is a seeded draw)")
        self.clip = clip
        self.class_names = list(class_names)
        names = [clip.word_ids(f"{name}.") for name in self.class_names]
        longest = max(len(n) for n in names)
        if 2 + n_ctx + longest > clip.context_length:
            raise ConfigError(
                f"n_ctx={n_ctx} leaves no room: start + {n_ctx} context + {longest} class-name tokens + end "
                f"exceeds context_length {clip.context_length}; use n_ctx <= {clip.context_length - 2 - longest}"
            )
        tokens = torch.zeros(len(names), clip.context_length, dtype=torch.long)
        tokens[:, 0] = clip.sot_id
        eot = []
        for i, ids in enumerate(names):
            tokens[i, 1 + n_ctx : 1 + n_ctx + len(ids)] = torch.tensor(ids)
            tokens[i, 1 + n_ctx + len(ids)] = clip.eot_id
            eot.append(1 + n_ctx + len(ids))
        device = clip.image_mean.device
        with torch.no_grad():
            embeds = clip.model.token_embedding(tokens.to(device))
        # Not persistent: they follow from the frozen CLIP and the class names.
        self.register_buffer("token_embeds", embeds, persistent=False)
        self.register_buffer("eot_index", torch.tensor(eot, device=device), persistent=False)
        ctx = torch.randn(n_prompts, n_ctx, clip.text_width, generator=generator) * init_std
        self.ctx = nn.Parameter(ctx.to(device))

    @property
    def n_ctx(self) -> int:
        return self.ctx.shape[1]

    def forward(self) -> Tensor:
        p, length, width = self.ctx.shape
        c = self.token_embeds.shape[0]
        # The text transformer's mask is causal: a position after the last end-of-text token never
        # reaches any prompt's feature, so the prompts stop there (about 4x less text compute at 77).
        t = int(self.eot_index.max()) + 1
        fixed = self.token_embeds[:, :t].unsqueeze(0).expand(p, -1, -1, -1)
        ctx = self.ctx.unsqueeze(1).expand(-1, c, -1, -1).to(fixed.dtype)
        x = torch.cat([fixed[:, :, :1], ctx, fixed[:, :, 1 + length :]], dim=2).reshape(p * c, t, width)
        feats = self.clip.encode_text_embeddings(x, self.eot_index.repeat(p))
        return feats.reshape(p, c, -1)


# -------------------------------------------------------------------- building and loading
def build_standin(arch: StandinArch, vocab_ids: Tensor | None, seed: int) -> ClipBackbone:
    """A randomly initialised stand-in CLIP; weights depend only on ``seed``."""
    from open_clip import CLIP

    rows = FULL_VOCAB if vocab_ids is None else len(vocab_ids)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = CLIP(**arch.open_clip_cfg(rows))
        if arch.pool == "attention":
            model.visual = AttentionPoolViT(model.visual, arch.attention_heads, arch.embed_dim, arch.feature_map)
    return ClipBackbone(model, image_mean=STANDIN_MEAN, image_std=STANDIN_STD, vocab_ids=vocab_ids,
                        name="clip_standin")


def build_paper_clip(arch: str, source: str = "openai", seed: int = 0) -> ClipBackbone:
    """A full-size open_clip CLIP (``ViT-B-16`` or ``RN50``) with random weights; nothing is downloaded."""
    import open_clip

    if arch not in PAPER_ARCHS:
        raise ConfigError(f"arch must be one of {', '.join(PAPER_ARCHS)}, got {arch!r}")
    if source not in WEIGHT_SOURCES:
        raise ConfigError(f"source must be one of {', '.join(WEIGHT_SOURCES)}, got {source!r}")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        # pretrained=None: open_clip builds from its JSON config and fetches nothing.
        model = open_clip.create_model(arch, pretrained=None, force_quick_gelu=WEIGHT_SOURCES[source])
    return ClipBackbone(model, image_mean=_OPENAI_MEAN, image_std=_OPENAI_STD, name=f"{arch}:{source}")


def read_state_dict(path: str | Path) -> dict[str, Tensor]:
    """Weights of a CLIP checkpoint file in any official layout, with open_clip's key names.

    Handles OpenAI's TorchScript archives and plain state dicts (``ViT-B-16.pt``, ``RN50.pt``),
    open_clip/LAION files (``open_clip_pytorch_model.bin``, ``.safetensors``, training checkpoints
    with a ``state_dict`` entry and ``module.`` prefixes).
    """
    path = Path(path)
    if not path.is_file():
        raise DataNotFoundError(f"weights file {path} does not exist; pass the path of a local CLIP checkpoint")
    if path.suffix == ".safetensors":
        from safetensors.torch import load_file

        state = load_file(str(path), device="cpu")
    elif _is_torchscript(path):
        with warnings.catch_warnings():  # torch deprecates jit.load, but OpenAI ships its weights so
            warnings.simplefilter("ignore", FutureWarning)
            state = torch.jit.load(str(path), map_location="cpu").state_dict()
    else:
        state = read_weights(path, "CLIP weights file")
    if isinstance(state, dict) and isinstance(state.get("state_dict"), dict):
        state = state["state_dict"]
    if not isinstance(state, dict) or not state:
        raise ConfigError(f"{path} does not hold a state dict")
    if all(k.startswith("module.") for k in state):
        state = {k[len("module."):]: v for k, v in state.items()}
    return {k: v for k, v in state.items() if k not in _JIT_EXTRAS}


def _is_torchscript(path: Path) -> bool:
    if not zipfile.is_zipfile(path):
        return False
    with zipfile.ZipFile(path) as z:
        return any(name.endswith("constants.pkl") for name in z.namelist())


def load_weights(clip: ClipBackbone, state: dict[str, Tensor]) -> None:
    """Copy ``state`` into ``clip.model``, failing with the mismatching keys named."""
    model = clip.model
    state = dict(state)
    if "logit_scale" in state:
        state["logit_scale"] = state["logit_scale"].reshape(model.logit_scale.shape)
    own = model.state_dict()
    missing = sorted(set(own) - set(state))
    unexpected = sorted(set(state) - set(own))
    wrong = sorted(k for k in set(own) & set(state) if own[k].shape != state[k].shape)
    if missing or unexpected or wrong:
        raise ConfigError(
            f"weights do not fit {clip.name}: missing {missing[:5]}, unexpected {unexpected[:5]}, "
            f"wrong shape {wrong[:5]}; check arch (one of {', '.join(PAPER_ARCHS)}) and that the file is a CLIP "
            f"checkpoint for it"
        )
    model.load_state_dict(state, strict=True)
    clip._fingerprint = None


def load_clip(arch: str, weights: str | Path, source: str = "openai") -> ClipBackbone:
    """The paper-scale backbone: open_clip ``arch`` filled from the local file ``weights``.

    ``source="openai"`` for OpenAI's files (QuickGELU), ``"laion"`` for open_clip's LAION ViT-B-16.
    """
    clip = build_paper_clip(arch, source)
    load_weights(clip, read_state_dict(weights))
    return clip


# What to do about a stand-in whose checkpoint or record is missing, unreadable or does not match.
STANDIN_FIX = ("run `fedrepro pretrain clip` (or `make pretrain`) to regenerate it, or restore the committed "
               "fedrepro/models/weights/clip_standin.pt and .json")
STANDIN_PATCH_FIX = ("run `fedrepro pretrain clip_patch` (or `make pretrain`) to regenerate it, or restore the "
                     "committed fedrepro/models/weights/clip_standin_patch.pt and .json")


def standin_fix(path: str | Path) -> str:
    """The fix an error about the stand-in checkpoint ``path`` names: the command that writes it."""
    return STANDIN_PATCH_FIX if Path(path).name == STANDIN_PATCH_CHECKPOINT.name else STANDIN_FIX


def standin_record(path: str | Path | None = None) -> dict:
    """The JSON record beside a stand-in checkpoint: config, data hash, weights hash, versions, quality
    numbers (a one-line error naming it when it is missing or not a JSON object)."""
    path = Path(path) if path is not None else STANDIN_CHECKPOINT
    fix = standin_fix(path)
    record = read_record(path, fix)
    if record is None:
        raise DataNotFoundError(f"no record {path.with_suffix('.json')}; {fix}")
    return record


def load_standin(path: str | Path | None = None) -> ClipBackbone:
    """A pretrained CPU stand-in (default: the committed :data:`STANDIN_CHECKPOINT`; the patch stand-in
    is :data:`STANDIN_PATCH_CHECKPOINT`), its weights checked against the ``weights_hash`` of its
    record: a damaged or swapped file is a one-line error naming it, never a backbone that prompt
    methods then train on. The architecture (class-token or attention pool) is the record's."""
    path = Path(path) if path is not None else STANDIN_CHECKPOINT
    fix = standin_fix(path)
    if not path.is_file():
        raise DataNotFoundError(f"no stand-in CLIP at {path}; {fix}")
    record = standin_record(path)
    arch = record_entry(record, path, "config", "arch", fix=fix)
    try:
        shape = StandinArch(**arch)
    except (TypeError, ConfigError) as e:
        raise CorruptCacheError(f"checkpoint record {path.with_suffix('.json')} has an invalid config.arch "
                                f"({str(e).splitlines()[0] if str(e) else type(e).__name__}); {fix}") from e
    state = load_checked(path, record, fix)
    vocab_ids = state.pop("vocab_ids", None)
    clip = build_standin(shape, vocab_ids, seed=0)
    load_weights(clip, {k: v.float() if v.is_floating_point() else v for k, v in state.items()})
    return clip


__all__ = [
    "PAPER_ARCHS",
    "FEATURE_MAPS",
    "POOLS",
    "STANDIN_CHECKPOINT",
    "STANDIN_FIX",
    "STANDIN_PATCH_CHECKPOINT",
    "STANDIN_PATCH_FIX",
    "AttentionPoolViT",
    "WEIGHT_SOURCES",
    "ClipBackbone",
    "CoOpPrompts",
    "StandinArch",
    "bpe_tokenizer",
    "build_paper_clip",
    "build_standin",
    "load_clip",
    "load_standin",
    "load_weights",
    "read_state_dict",
    "standin_fix",
    "standin_record",
]
