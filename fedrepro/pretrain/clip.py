"""``fedrepro pretrain clip``: contrastive pretraining of the CPU stand-in CLIP.

CLIP's objective (Radford et al., ICML 2021, §2.3): a symmetric cross-entropy over image–text
similarities. Our pairs repeat captions ("the digit 7" many times per batch), so identical
captions are positives: image→text is a softmax over the batch's *distinct* captions, and
text→image spreads the target evenly over every image carrying that caption.

The run is step-based and every draw comes from generators seeded by ``cfg.seed``, so with the same
thread count it is bitwise reproducible. The checkpoint keeps only the vocabulary rows its captions,
the downstream class names and a few templates need (:data:`clip_data.EXTRA_WORDS`), which is what
keeps it under 10 MB; the kept BPE ids are stored with it as ``vocab_ids``.
"""
from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np
import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from ..errors import ConfigError
from ..analysis.ot_maps import foreground_mask
from ..models.clip import (STANDIN_CHECKPOINT, STANDIN_PATCH_CHECKPOINT, ClipBackbone, StandinArch, bpe_tokenizer,
                           build_standin, load_standin, standin_record)
from ..params import check_fields, hp
from . import clip_data
from .clip_data import FASHION_PRETRAIN_COUNT, FASHION_VAL_COUNT, CaptionedImages
from ..models.record import OUT_VALID, checkpoint_path_ok, write_checkpoint
from . import clip_quality as q
from ..data import load_dataset

_MAX_LOGIT_SCALE = math.log(100.0)  # CLIP clips the learned temperature at 100
PATCH_LOSSES = ("foreground", "figure_ground", "mean")
# What "figure_ground" teaches uninked patches to read as (its words are in the reduced vocabulary:
# clip_data.EXTRA_WORDS).
BACKGROUND_CAPTION = "a photo of a background"


@dataclass(frozen=True)
class PretrainClipConfig:
    """Everything that determines the stand-in's weights (plus where to write them)."""

    seed: int = hp(0, ge=0)
    # Sized for ~6 minutes on one busy CPU core (0.7–1.3 s a step), so that `make pretrain` stays
    # well under 15 minutes on a 2-core machine.
    steps: int = hp(420, ge=1)
    batch_size: int = hp(128, ge=1)
    lr: float = hp(1e-3, gt=0)
    warmup_steps: int = hp(40, ge=0)
    weight_decay: float = hp(0.1, ge=0)
    glyphs: int = hp(20_000, ge=0)
    val_glyphs: int = hp(1_000, ge=0)
    font_caption_fraction: float = hp(0.5, ge=0, le=1)
    # Fashion-MNIST training images 0..fashion_images-1 are trained on (0: glyphs only); the last
    # FASHION_VAL_COUNT images of the pretraining half are the validation split, and the other half
    # is the downstream data, so no more can be taken.
    fashion_images: int = hp(FASHION_PRETRAIN_COUNT - FASHION_VAL_COUNT, ge=0,
                             le=FASHION_PRETRAIN_COUNT - FASHION_VAL_COUNT)
    # One thread: on a shared 2-core machine a second intra-op thread waits on busy cores and makes
    # each step many times slower. Results are bitwise reproducible only at the same thread count.
    threads: int = hp(1, ge=1)
    evaluate: bool = hp(True)
    # "" writes the committed stand-in, fedrepro/models/weights/clip_standin.pt
    out: str = hp("", check=checkpoint_path_ok, valid=OUT_VALID)
    arch: StandinArch = hp(factory=StandinArch)
    # The patch-level term (issue 55, finding 6), 0 for the first stand-in: CLIP's loss trains only the
    # pooled embedding, so nothing makes the feature map FedOTP transports over carry the class.
    # "foreground": every inked patch (mean pixel above ``ink``, as fedrepro.analysis.ot_maps reads
    # garments) is classified among the batch's captions, each patch token against its image's caption;
    # "figure_ground": the same, and every other patch as BACKGROUND_CAPTION;
    # "mean": CLIP's symmetric loss on the mean over patches of the patch–caption cosine (a
    # multiple-instance term, from image-level captions only).
    patch_weight: float = hp(0.0, ge=0)
    patch_loss: str = hp("foreground", choices=PATCH_LOSSES)
    ink: float = hp(0.2, gt=0, lt=1)
    # "" starts from random weights; "standin" from the committed first stand-in (its weights hash is
    # checked and recorded), its ViT trunk and text tower copied, an attention pool started as the
    # attention-weighted mean of the old feature map (identity value projection, out projection =
    # the old image projection). A few hundred steps then cost minutes, not the first run's quarter hour.
    init: str = hp("", choices=("", "standin"))

    # The checkpoint an empty ``out`` writes.
    DEFAULT_OUT: ClassVar[Path] = STANDIN_CHECKPOINT

    def __post_init__(self) -> None:
        if isinstance(self.arch, dict):  # from YAML / --set arch={...}: over this config's default arch
            default = next(f for f in dataclasses.fields(self) if f.name == "arch").default_factory()
            object.__setattr__(self, "arch", StandinArch(**{**dataclasses.asdict(default), **self.arch}))
        check_fields(self)

    def validate(self) -> None:
        if self.glyphs + self.fashion_images == 0:
            raise ConfigError("glyphs and fashion_images cannot both be 0: there would be nothing to train on")


def _patch_arch() -> StandinArch:
    return StandinArch(pool="attention", feature_map="value")


@dataclass(frozen=True)
class PretrainClipPatchConfig(PretrainClipConfig):
    """The patch stand-in (``fedrepro pretrain clip_patch``, issue 55, finding 6): the first stand-in's
    data, started from its weights, with CLIP RN50's attention pool as the image head, its value tokens
    as the feature map, and the figure–ground patch term at half the weight of CLIP's loss.

    Chosen on 300 held-out test images per style after 300 steps (docs/backbones.md): "foreground"
    alone passes the patch gate too, but leaves background patches nearly as close to the class prompt
    as the garment (cosine 0.65 vs 0.70 in the original style), so transport plans gain little garment
    mass; "mean" (multiple-instance) makes the background closer than the garment, as before.
    """

    steps: int = hp(300, ge=1)
    patch_weight: float = hp(0.5, ge=0)
    patch_loss: str = hp("figure_ground", choices=PATCH_LOSSES)
    arch: StandinArch = hp(factory=_patch_arch)
    init: str = hp("standin", choices=("", "standin"))

    DEFAULT_OUT: ClassVar[Path] = STANDIN_PATCH_CHECKPOINT


@dataclass(frozen=True)
class PretrainData:
    train: CaptionedImages
    val: CaptionedImages
    fashion: object  # the ImageDataset, for the downstream quality checks


def _streams(cfg: PretrainClipConfig) -> tuple[np.random.Generator, np.random.Generator]:
    """Independent glyph streams for the training and validation pairs."""
    return tuple(np.random.default_rng(s) for s in np.random.SeedSequence(cfg.seed).spawn(2))


def load_validation(cfg: PretrainClipConfig, fashion=None) -> CaptionedImages:
    """The validation pairs alone (fast): the same ones :func:`load_data` returns."""
    if fashion is None:

        fashion = load_dataset("fashion_mnist")
    lo = FASHION_PRETRAIN_COUNT - FASHION_VAL_COUNT
    return clip_data.build_pairs(_streams(cfg)[1], cfg.val_glyphs, cfg.font_caption_fraction,
                                 fashion.train_x[lo:FASHION_PRETRAIN_COUNT],
                                 fashion.train_y[lo:FASHION_PRETRAIN_COUNT], fashion.classes)


def load_data(cfg: PretrainClipConfig) -> PretrainData:
    """Pretraining and validation pairs, and Fashion-MNIST itself for the quality checks."""
    fashion = load_dataset("fashion_mnist")
    n = cfg.fashion_images
    train = clip_data.build_pairs(_streams(cfg)[0], cfg.glyphs, cfg.font_caption_fraction,
                                  fashion.train_x[:n], fashion.train_y[:n], fashion.classes)
    return PretrainData(train, load_validation(cfg, fashion), fashion)


def vocabulary(texts: list[str]) -> torch.Tensor:
    """Sorted BPE ids used by ``texts``, plus padding, start and end."""
    tok = bpe_tokenizer()
    ids = {0, tok.sot_token_id, tok.eot_token_id}
    for text in texts:
        ids.update(tok.encode(text.replace("{}", " ")))
    return torch.tensor(sorted(ids), dtype=torch.long)


def vocabulary_texts(data: PretrainData) -> list[str]:
    names = clip_data.fashion_names(data.fashion.classes) + clip_data.glyph_names()
    return [*data.train.captions, *names, *clip_data.EXTRA_WORDS, "."]


def _param_groups(model: torch.nn.Module, weight_decay: float) -> list[dict]:
    # As in CLIP: no decay on gains, biases, embeddings and the temperature.
    decay, rest = [], []
    for name, p in model.named_parameters():
        skip = p.ndim < 2 or "embedding" in name or "logit_scale" in name
        (rest if skip else decay).append(p)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": rest, "weight_decay": 0.0}]


def _lr_factor(step: int, cfg: PretrainClipConfig) -> float:
    if step < cfg.warmup_steps:
        return (step + 1) / cfg.warmup_steps
    progress = (step - cfg.warmup_steps) / max(1, cfg.steps - cfg.warmup_steps)
    return 0.5 * (1 + math.cos(math.pi * progress))


def contrastive_loss(image_f: torch.Tensor, text_f: torch.Tensor, target: torch.Tensor, scale: torch.Tensor):
    """Symmetric CLIP loss with repeated captions: ``text_f`` holds the batch's distinct captions and
    ``target[i]`` is image i's caption among them."""
    logits = scale * F.normalize(image_f, dim=-1) @ F.normalize(text_f, dim=-1).T  # [B, U]
    return symmetric_loss(logits, target)


def symmetric_loss(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """CLIP's symmetric cross-entropy on image–caption ``logits`` [B, U], ``target[i]`` image i's caption."""
    to_text = F.cross_entropy(logits, target)
    owners = (target[None, :] == torch.arange(logits.shape[1], device=target.device)[:, None]).float()  # [U, B]
    to_image = -(owners / owners.sum(1, keepdim=True) * F.log_softmax(logits.T, dim=1)).sum(1).mean()
    return (to_text + to_image) / 2


def patch_loss(patch_f: torch.Tensor, text_f: torch.Tensor, target: torch.Tensor, scale: torch.Tensor,
               kind: str, foreground: torch.Tensor, background_f: torch.Tensor | None = None) -> torch.Tensor:
    """The patch-level term on the feature map ``patch_f`` [B, M, d] (see ``PretrainClipConfig.patch_loss``).

    ``foreground`` [B, M] bool marks the inked patches. "foreground" averages the cross-entropy of every
    inked patch of the batch against the batch's captions (0 when there is none); "figure_ground" also
    classifies every other patch, as :data:`BACKGROUND_CAPTION` (its text feature ``background_f`` [d]),
    among the captions and it; "mean" ignores the mask.
    """
    cos = F.normalize(patch_f, dim=-1) @ F.normalize(text_f, dim=-1).T  # [B, M, U]
    if kind == "mean":
        return symmetric_loss(scale * cos.mean(1), target)
    per_patch = target[:, None].expand_as(foreground)
    if kind == "figure_ground":
        if background_f is None:
            raise ConfigError("patch_loss='figure_ground' needs the background caption's text feature")
        back = F.normalize(patch_f, dim=-1) @ F.normalize(background_f, dim=-1)  # [B, M]
        cos = torch.cat([cos, back.unsqueeze(-1)], dim=-1)
        per_patch = torch.where(foreground, per_patch, torch.full_like(per_patch, text_f.shape[0]))
        return F.cross_entropy(scale * cos.flatten(0, 1), per_patch.flatten())
    if kind != "foreground":
        raise ConfigError(f"patch_loss must be one of {', '.join(PATCH_LOSSES)}, got {kind!r}")
    if not bool(foreground.any()):
        return cos.sum() * 0.0
    return F.cross_entropy(scale * cos[foreground], per_patch[foreground])


def train(clip: ClipBackbone, data: CaptionedImages, cfg: PretrainClipConfig, progress: bool = True) -> list[float]:
    """Train every weight of ``clip.model`` in place; returns the loss per step."""
    model = clip.model
    model.requires_grad_(True)
    model.train()
    tokens = clip.tokenize(data.captions)
    eot = (tokens == clip.eot_id).int().argmax(dim=1)
    if cfg.patch_weight > 0 and cfg.patch_loss == "figure_ground":
        back_tokens = clip.tokenize([BACKGROUND_CAPTION])
        back_eot = (back_tokens == clip.eot_id).int().argmax(dim=1)
    opt = torch.optim.AdamW(_param_groups(model, cfg.weight_decay), lr=cfg.lr, betas=(0.9, 0.98), eps=1e-6)
    gen = torch.Generator().manual_seed(cfg.seed)
    losses = []
    bar = tqdm(range(cfg.steps), desc="pretrain clip", disable=not progress)
    for step in bar:
        for group in opt.param_groups:
            group["lr"] = cfg.lr * _lr_factor(step, cfg)
        idx = torch.randint(len(data), (cfg.batch_size,), generator=gen)
        caps = data.caption_ids[idx]
        distinct, target = torch.unique(caps, return_inverse=True)
        images = data.images[idx]
        text_f = clip.encode_text_embeddings(model.token_embedding(tokens[distinct]), eot[distinct])
        scale = model.logit_scale.exp()
        if cfg.patch_weight > 0:
            # One pass gives the pooled embedding (index 0) and the feature map FedOTP reads.
            image_tokens = clip.image_tokens(clip.preprocess(images))
            patch_f = image_tokens[:, 1:]
            inked = foreground_mask(images, round(patch_f.shape[1] ** 0.5), cfg.ink)
            back_f = None
            if cfg.patch_loss == "figure_ground":
                back_f = clip.encode_text_embeddings(model.token_embedding(back_tokens), back_eot)[0]
            loss = contrastive_loss(image_tokens[:, 0], text_f, target, scale)
            loss = loss + cfg.patch_weight * patch_loss(patch_f, text_f, target, scale, cfg.patch_loss, inked,
                                                        back_f)
        else:  # the first stand-in's path, kept as it was so that its weights hash reproduces
            image_f = model.encode_image(clip.preprocess(images))
            loss = contrastive_loss(image_f, text_f, target, scale)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        with torch.no_grad():
            model.logit_scale.clamp_(0, _MAX_LOGIT_SCALE)
        losses.append(loss.item())
        if step % 20 == 0 or step == cfg.steps - 1:
            bar.set_postfix(loss=f"{np.mean(losses[-20:]):.3f}")
    model.requires_grad_(False)
    model.eval()
    return losses


def measure_quality(clip: ClipBackbone, data: PretrainData, seed: int) -> dict:
    """The numbers recorded beside the checkpoint (see :mod:`fedrepro.pretrain.clip_quality`)."""
    tasks = q.fashion_style_tasks(data.fashion, seed=seed)
    styles = q.style_quality(clip, tasks, data.fashion.classes, seed=seed)
    glyph_val = data.val.source == 0
    glyph_names = clip_data.glyph_names()
    feats = q.image_features(clip, data.val.images[glyph_val])
    patch = {t.style: q.patch_quality(clip, t, data.fashion.classes) for t in tasks if t.style in q.PATCH_STYLES}
    return {
        "retrieval_val": q.retrieval(clip, data.val),
        "fashion_styles": styles,
        "patch_zero_shot": patch,
        "patch_gate": q.patch_gate(patch),
        "glyphs_pretrain_fonts_zero_shot": q.zero_shot_accuracy(
            clip, feats, data.val.labels[glyph_val], glyph_names, template=clip_data.GLYPH_TEMPLATE),
        "logit_scale": clip.logit_scale().item(),
    }


def warm_start(clip: ClipBackbone, source: ClipBackbone) -> None:
    """Copy the weights of the pretrained stand-in ``source`` into ``clip`` (see ``PretrainClipConfig.init``).

    Same architecture: every weight. Class-token ``source`` into an attention-pool ``clip``: the trunk
    and text tower are copied, and the pool starts as an attention-weighted mean of ``source``'s
    projected tokens (v_proj the identity, c_proj the old ``visual.proj``); its query, key and
    positional weights keep their seeded draws.
    """
    if source.vocab_ids is None or clip.vocab_ids is None or not torch.equal(source.vocab_ids, clip.vocab_ids):
        raise ConfigError("init='standin' needs the committed stand-in's vocabulary to equal this run's: the "
                          "captions or EXTRA_WORDS changed since it was pretrained; pretrain with init='' instead")
    old = source.model.state_dict()
    own = clip.model.state_dict()
    if own.keys() == old.keys():
        new = old
    else:
        new = {k: v for k, v in old.items() if not k.startswith("visual.")}
        for k, v in old.items():
            if k.startswith("visual.") and k != "visual.proj":
                new["visual.trunk." + k[len("visual."):]] = v
        proj = old["visual.proj"]  # [width, embed_dim]
        width = proj.shape[0]
        new["visual.attnpool.v_proj.weight"] = torch.eye(width)
        new["visual.attnpool.v_proj.bias"] = torch.zeros(width)
        new["visual.attnpool.c_proj.weight"] = proj.T.contiguous()
        new["visual.attnpool.c_proj.bias"] = torch.zeros(proj.shape[1])
        for k in own:
            if k.startswith("visual.attnpool.") and k not in new:
                new[k] = own[k]
    missing, wrong = sorted(set(own) - set(new)), sorted(k for k in set(own) & set(new) if own[k].shape != new[k].shape)
    if missing or wrong or set(new) - set(own):
        raise ConfigError(f"init='standin' cannot start this arch from the committed stand-in: missing {missing[:5]}, "
                          f"wrong shape {wrong[:5]}; keep the first stand-in's widths and depths, or use init=''")
    clip.model.load_state_dict(new, strict=True)
    clip._fingerprint = None


def pretrain_clip_patch(cfg: PretrainClipPatchConfig, progress: bool = True) -> Path:
    """``fedrepro pretrain clip_patch``: the patch stand-in, written to ``clip_standin_patch.pt`` by default."""
    return pretrain_clip(cfg, progress)


def pretrain_clip(cfg: PretrainClipConfig, progress: bool = True) -> Path:
    """Pretrain the stand-in per ``cfg`` and write ``cfg.out`` (+ ``.json``); returns the checkpoint path."""
    threads_before = torch.get_num_threads()
    torch.set_num_threads(cfg.threads)
    try:
        start = time.perf_counter()
        data = load_data(cfg)
        clip = build_standin(cfg.arch, vocabulary(vocabulary_texts(data)), seed=cfg.seed)
        init = {}
        if cfg.init == "standin":
            warm_start(clip, load_standin(STANDIN_CHECKPOINT))
            init = {"init": {"checkpoint": STANDIN_CHECKPOINT.name,
                             "weights_hash": standin_record(STANDIN_CHECKPOINT)["weights_hash"]}}
        t_train = time.perf_counter()
        losses = train(clip, data.train, cfg, progress=progress)
        train_s = time.perf_counter() - t_train
        quality = measure_quality(clip, data, cfg.seed) if cfg.evaluate else {}
        state = {**clip.model.state_dict(), "vocab_ids": clip.vocab_ids}
        extra = {
            "split": {
                "glyph_fonts": list(clip_data.glyphs.pretrain_fonts()),
                "fashion_mnist_train_indices": [0, cfg.fashion_images],
                "fashion_mnist_val_indices": [FASHION_PRETRAIN_COUNT - FASHION_VAL_COUNT, FASHION_PRETRAIN_COUNT],
                "never_seen": "fashion_mnist train[30000:], fashion_mnist test, glyphs in heldout_fonts()",
            },
            "vocab_rows": len(clip.vocab_ids),
            "final_loss": float(np.mean(losses[-20:])),
            "torch_threads": torch.get_num_threads(),
            "train_seconds": round(train_s, 1),
            "total_seconds": round(time.perf_counter() - start, 1),
            "arch_open_clip_cfg": cfg.arch.open_clip_cfg(len(clip.vocab_ids)),
            **init,
        }
        out = Path(cfg.out or cfg.DEFAULT_OUT)
        return write_checkpoint(out, state, cfg, clip_data.data_hash(data.train, data.val), quality, extra)
    finally:
        torch.set_num_threads(threads_before)


__all__ = ["BACKGROUND_CAPTION", "PATCH_LOSSES", "PretrainClipConfig", "PretrainClipPatchConfig", "contrastive_loss",
           "load_data", "load_validation", "patch_loss", "pretrain_clip", "pretrain_clip_patch", "symmetric_loss",
           "train", "vocabulary", "warm_start"]
