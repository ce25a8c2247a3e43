"""Backbones: loading pretrained weights, and the tiny ViT's prompt hooks."""
from __future__ import annotations

import pytest
import torch
from torch import nn

from fedrepro.errors import ConfigError
from fedrepro.models import (
    FrozenBackbone,
    create_model,
    load_pretrained,
)


def test_load_pretrained_round_trip(tmp_path):
    src = create_model("tiny_vit", 10, seed=1)
    path = tmp_path / "vit.pt"
    torch.save(src.state_dict(), path)
    dst = load_pretrained(create_model("tiny_vit", 10, seed=2), path)
    assert all(torch.equal(v, dst.state_dict()[k]) for k, v in src.state_dict().items())
    torch.save({"state_dict": src.state_dict()}, path)  # wrapped checkpoints load too
    load_pretrained(create_model("tiny_vit", 10, seed=2), path)


def test_load_pretrained_missing_file_names_path(tmp_path):
    path = tmp_path / "nope.pt"
    with pytest.raises(FileNotFoundError, match="nope.pt"):
        load_pretrained(create_model("mlp", 10), path)


def test_load_pretrained_mismatch_names_path_and_keys(tmp_path):
    path = tmp_path / "cnn.pt"
    torch.save(create_model("cnn", 10, width=8).state_dict(), path)
    with pytest.raises(ConfigError, match="cnn.pt.*shape mismatch"):
        load_pretrained(create_model("cnn", 10, width=16), path)
    with pytest.raises(ConfigError, match="missing"):
        load_pretrained(create_model("mlp", 10), path)


def test_tiny_vit_prompts_shape_and_gradient():
    model = create_model("tiny_vit", 10, in_channels=1, image_size=28, seed=0, depth=2)
    assert isinstance(model.features, FrozenBackbone)
    model.features.freeze()
    x = torch.randn(4, 1, 28, 28)
    prompts = nn.Parameter(torch.zeros(3, model.feature_dim).normal_(std=0.02))
    out = model(x, prompt_tokens=prompts)
    assert out.shape == model(x).shape == (4, 10)
    out.sum().backward()
    assert prompts.grad is not None and prompts.grad.abs().sum() > 0
    assert all(p.grad is None for p in model.features.parameters())  # backbone frozen
    assert model.head.weight.grad is not None


def test_tiny_vit_tokens_and_block_hook():
    vit = create_model("tiny_vit", 10, seed=0, depth=3).features
    x = torch.randn(2, 3, 32, 32)
    tokens = vit.embed(x)
    assert tokens.shape == (2, 1 + 64, vit.feature_dim)
    seen: list[tuple[int, int]] = []

    def hook(i, t):
        seen.append((i, t.shape[1]))
        return None

    out = vit.forward_tokens(tokens, prompts=torch.zeros(2, 5, vit.feature_dim), block_hook=hook)
    assert out.shape == (2, 1 + 5 + 64, vit.feature_dim)  # every token is kept (FedOTP needs them)
    assert seen == [(0, 70), (1, 70), (2, 70)]
    with pytest.raises(ConfigError):
        vit.forward_tokens(tokens, prompts=torch.zeros(5, vit.feature_dim + 1))
