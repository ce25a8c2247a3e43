"""Pretraining the CLIP stand-in: determinism, the caption-aware loss, the split, the record."""
from __future__ import annotations

import json

import pytest
import torch

pytest.importorskip("open_clip")

from fedrepro.errors import ConfigError
from fedrepro.models.clip import StandinArch, load_standin
from fedrepro.pretrain.clip import PretrainClipConfig, contrastive_loss, pretrain_clip
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
