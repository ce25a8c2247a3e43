"""Pretraining the CLIP stand-ins: determinism, the caption-aware loss, the patch term, the split, the record."""
from __future__ import annotations

import json
import math

import pytest
import torch

pytest.importorskip("open_clip")

from fedrepro.errors import ConfigError
from fedrepro.models.clip import StandinArch, load_standin
from fedrepro.pretrain.clip import (
    PretrainClipConfig,
    PretrainClipPatchConfig,
    contrastive_loss,
    patch_loss,
    pretrain_clip,
    pretrain_clip_patch,
    warm_start,
)
from fedrepro.pretrain.clip_data import FASHION_PRETRAIN_COUNT

TINY = StandinArch(vision_width=32, vision_layers=1, vision_head_width=16, text_width=32, text_layers=1,
                   embed_dim=32)


def _short(tmp_path, name, **kw):
    cfg = PretrainClipConfig(steps=3, batch_size=16, glyphs=48, val_glyphs=8, fashion_images=32, evaluate=False,
                             arch=TINY, out=str(tmp_path / name), **kw)
    return pretrain_clip(cfg, progress=False)


def test_short_pretraining_is_deterministic(tmp_path):
    a = torch.load(_short(tmp_path, "a.pt"), weights_only=True)
    b = torch.load(_short(tmp_path, "b.pt"), weights_only=True)
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a)
    c = torch.load(_short(tmp_path, "c.pt", seed=1), weights_only=True)
    assert not torch.equal(a["visual.proj"], c["visual.proj"])
    rec = json.loads((tmp_path / "a.json").read_text())
    assert rec["torch_threads"] == 1 and rec["config"]["steps"] == 3
    assert rec["split"]["fashion_mnist_train_indices"] == [0, 32]
    assert rec["data_hash"] == json.loads((tmp_path / "b.json").read_text())["data_hash"]
    # the checkpoint loads through the user-facing path
    clip = load_standin(tmp_path / "a.pt")
    assert clip.encode_text(["the digit 7", "a photo of a coat."]).shape == (2, 32)


def test_identical_captions_are_positives():
    img = torch.eye(3)[[0, 0, 1, 2]]  # two images share caption 0
    txt = torch.eye(3)
    target = torch.tensor([0, 0, 1, 2])
    good = contrastive_loss(img, txt, target, torch.tensor(50.0))
    swapped = contrastive_loss(img, txt, torch.tensor([0, 1, 0, 2]), torch.tensor(50.0))
    assert good < 0.75 < swapped  # ~log 2 from the shared caption's text→image target, not a penalty


def test_downstream_half_is_refused():
    with pytest.raises(ConfigError, match="fashion_images"):
        PretrainClipConfig(fashion_images=FASHION_PRETRAIN_COUNT)


# ----------------------------------------------------------------- the patch stand-in (issue 55, finding 6)
TINY_POOL = StandinArch(vision_width=32, vision_layers=1, vision_head_width=16, text_width=32, text_layers=1,
                        embed_dim=32, pool="attention", feature_map="value")


def test_short_patch_pretraining_is_deterministic_and_the_term_trains_the_feature_map(tmp_path):
    from fedrepro.models.clip import AttentionPoolViT

    kw = dict(steps=3, batch_size=16, glyphs=48, val_glyphs=8, fashion_images=32, evaluate=False, arch=TINY_POOL,
              init="")
    a = pretrain_clip_patch(PretrainClipPatchConfig(**kw, out=str(tmp_path / "a.pt")), progress=False)
    b = pretrain_clip_patch(PretrainClipPatchConfig(**kw, out=str(tmp_path / "b.pt")), progress=False)
    sa, sb = (torch.load(p, weights_only=True) for p in (a, b))
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
    off = pretrain_clip_patch(PretrainClipPatchConfig(**kw, patch_weight=0.0, out=str(tmp_path / "c.pt")),
                              progress=False)
    assert not torch.equal(sa["visual.attnpool.v_proj.weight"],
                           torch.load(off, weights_only=True)["visual.attnpool.v_proj.weight"])
    rec = json.loads((tmp_path / "a.json").read_text())
    assert rec["config"]["patch_weight"] == 0.5 and rec["config"]["patch_loss"] == "figure_ground"
    assert rec["config"]["arch"]["pool"] == "attention"
    clip = load_standin(a)  # the checked loader builds the attention pool from the record
    assert isinstance(clip.model.visual, AttentionPoolViT)


def test_the_patch_config_writes_its_own_checkpoint_and_keeps_its_pool_under_overrides():
    from fedrepro.models.clip import STANDIN_CHECKPOINT, STANDIN_PATCH_CHECKPOINT
    from fedrepro.pretrain import config_type, get_pretrainer, parse_overrides

    cls = config_type(get_pretrainer("clip_patch"))
    assert cls is PretrainClipPatchConfig
    assert cls.DEFAULT_OUT == STANDIN_PATCH_CHECKPOINT and PretrainClipConfig.DEFAULT_OUT == STANDIN_CHECKPOINT
    cfg = parse_overrides(cls, ["arch={vision_width: 128}"])
    assert cfg.arch.pool == "attention" and cfg.arch.vision_width == 128  # an override never drops the pool
    assert parse_overrides(PretrainClipConfig, ["arch={vision_width: 128}"]).arch.pool == "tok"
    assert PretrainClipConfig().patch_weight == 0 and PretrainClipConfig().init == ""  # the first stand-in's run
    with pytest.raises(ConfigError, match="patch_loss"):
        PretrainClipPatchConfig(patch_loss="max")


def test_foreground_term_reads_inked_patches_only():
    text = torch.eye(2, 4)  # the batch's 2 distinct captions
    target = torch.tensor([0, 1])
    patches = torch.zeros(2, 4, 4)
    patches[0, :2], patches[1, :2] = text[0], text[1]  # inked patches point at their image's caption
    patches[0, 2:], patches[1, 2:] = text[1], text[0]  # background patches at the other image's
    inked = torch.tensor([[True, True, False, False]] * 2)
    scale = torch.tensor(30.0)
    good = patch_loss(patches, text, target, scale, "foreground", inked)
    assert good < 1e-3  # the background is not read
    assert patch_loss(patches, text, target, scale, "foreground", ~inked) > 10  # read there, it is wrong
    leaf = patches.clone().requires_grad_(True)
    patch_loss(leaf, text, target, scale, "foreground", inked).backward()
    assert leaf.grad[:, 2:].abs().sum() == 0 and leaf.grad[:, :2].abs().sum() > 0
    # The multiple-instance reading averages every patch, background included: here a coin flip.
    assert patch_loss(patches, text, target, scale, "mean", inked) == pytest.approx(math.log(2), abs=1e-4)
    assert patch_loss(patches, text, target, scale, "foreground", torch.zeros_like(inked)) == 0


def test_figure_ground_term_reads_the_background_as_background():
    text = torch.eye(2, 4)
    background = torch.eye(4)[3]
    target = torch.tensor([0, 1])
    inked = torch.tensor([[True, True, False, False]] * 2)
    patches = torch.zeros(2, 4, 4)
    patches[0, :2], patches[1, :2] = text[0], text[1]
    patches[:, 2:] = background  # uninked patches read as the background caption
    scale = torch.tensor(30.0)
    good = patch_loss(patches, text, target, scale, "figure_ground", inked, background)
    assert good < 1e-3
    patches[0, 2:], patches[1, 2:] = text[0], text[1]  # the background as close to the class as the garment
    assert patch_loss(patches, text, target, scale, "figure_ground", inked, background) > 10
    assert patch_loss(patches, text, target, scale, "foreground", inked) < 1e-3  # which "foreground" allows
    with pytest.raises(ConfigError, match="background"):
        patch_loss(patches, text, target, scale, "figure_ground", inked)


def test_warm_start_begins_the_pool_at_the_old_feature_map():
    from fedrepro.models.clip import build_standin

    arch = dict(vision_width=32, vision_layers=1, vision_head_width=16, text_width=32, text_layers=1, embed_dim=32)
    vocab = torch.arange(49408)[[0, 320, 49406, 49407]]
    old = build_standin(StandinArch(**arch), vocab, seed=3)
    new = build_standin(StandinArch(**arch, pool="attention", feature_map="value"), vocab, seed=0)
    warm_start(new, old)
    gen = torch.Generator().manual_seed(0)
    x = old.preprocess(torch.randint(0, 256, (2, 1, 28, 28), dtype=torch.uint8, generator=gen))
    with torch.no_grad():
        old_patches = old.image_tokens(x)[:, 1:]
        new_patches = new.image_tokens(x)[:, 1:]
        pos = new.model.visual.attnpool.positional_embedding[1:] @ old.model.visual.proj
    # identity value projection, the old image projection as the out projection: old tokens + position
    torch.testing.assert_close(new_patches, old_patches + pos, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(new.encode_text(["a"]), old.encode_text(["a"]))
    other = build_standin(StandinArch(**arch), torch.tensor([0, 320, 321, 49406, 49407]), seed=0)
    with pytest.raises(ConfigError, match="vocabulary"):
        warm_start(new, other)
