"""Backbones: the timm ViT behind `tiny_vit`/`vit_b16`, its prompt hooks, and loading local weights."""
from __future__ import annotations

import pytest
import torch
from torch import nn

from fedrepro.errors import ConfigError
from fedrepro.models import FrozenBackbone, create_model, load_pretrained
from fedrepro.models.backbones import chain_hooks, prompt_hook


def small_vit(depth: int = 3, seed: int = 0):
    return create_model("tiny_vit", 10, in_channels=1, image_size=28, seed=seed, depth=depth, dim=48, heads=3).eval()


def test_load_pretrained_round_trip(tmp_path):
    src = small_vit(seed=1)
    path = tmp_path / "vit.pt"
    torch.save(src.state_dict(), path)
    dst = load_pretrained(small_vit(seed=2), path)
    assert all(torch.equal(v, dst.state_dict()[k]) for k, v in src.state_dict().items())
    torch.save({"state_dict": src.state_dict()}, path)  # wrapped checkpoints load too
    load_pretrained(small_vit(seed=2), path)


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


def test_is_timm_vit_and_matches_timm_forward():
    model = small_vit()
    vit = model.features.vit
    assert type(vit).__name__ == "VisionTransformer" and vit.cls_token is not None
    x = torch.randn(3, 1, 28, 28)
    with torch.no_grad():
        # embed -> blocks -> norm -> cls is exactly timm's own forward_features + token pooling.
        assert torch.equal(model.features(x), vit.forward_features(x)[:, 0])


def test_prompts_shape_and_gradient():
    model = small_vit(depth=2)
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


def test_tokens_and_block_hook_see_absolute_blocks():
    vit = small_vit().features
    x = torch.randn(2, 1, 28, 28)
    tokens = vit.embed(x)
    assert tokens.shape == (2, 1 + 49, vit.feature_dim)
    seen: list[tuple[int, int]] = []

    def hook(i, t):
        seen.append((i, t.shape[1]))

    out = vit.forward_tokens(tokens, prompts=torch.zeros(2, 5, vit.feature_dim), block_hook=hook)
    assert out.shape == (2, 1 + 5 + 49, vit.feature_dim)  # every token is kept (FedOTP needs them)
    assert seen == [(0, 55), (1, 55), (2, 55)]
    with pytest.raises(ConfigError):
        vit.forward_tokens(tokens, prompts=torch.zeros(5, vit.feature_dim + 1))


def test_vpt_deep_replaces_and_ccmp_inserts_at_given_blocks():
    vit = small_vit().features
    x = torch.randn(2, 1, 28, 28)
    d = vit.feature_dim
    shallow = torch.randn(4, d)
    deep = {1: torch.randn(4, d), 2: torch.randn(4, d)}
    lengths: list[int] = []
    def record(i, t):
        return lengths.append(t.shape[1])

    with torch.no_grad():
        out = vit.forward_tokens(vit.embed(x), shallow, chain_hooks(prompt_hook(deep, "replace"), record))
        assert lengths == [54, 54, 54] and out.shape[1] == 54
        assert not torch.equal(out, vit.forward_tokens(vit.embed(x), shallow))
        # CCMP: at block 2, insert one token computed from the cls token entering that block.
        mixed: list[torch.Tensor] = []

        def ccmp(tokens):
            mixed.append(tokens[:, 0])
            return tokens[:, :1] * 0.5

        lengths.clear()
        out = vit.forward_tokens(vit.embed(x), None, chain_hooks(prompt_hook({2: ccmp}, "insert"), record))
        assert lengths == [50, 50, 51] and out.shape[1] == 51
        assert torch.equal(mixed[0], vit.tokens_before(x, 2)[:, 0])
    with pytest.raises(ConfigError, match="mode"):
        prompt_hook({}, "append")


def test_start_block_resumes_exactly_and_cls_per_block():
    vit = small_vit().features
    x = torch.randn(2, 1, 28, 28)
    p = torch.randn(2, vit.feature_dim)
    with torch.no_grad():
        full = vit.forward_tokens(vit.embed(x), block_hook=prompt_hook({2: p}, "insert"))
        resumed = vit.forward_tokens(vit.tokens_before(x, 2), prompts=p, start_block=2)
        assert torch.equal(full, resumed)
        cls = vit.cls_per_block(x)
        assert cls.shape == (2, vit.depth + 1, vit.feature_dim)
        assert torch.equal(cls[:, 1], vit.tokens_before(x, 1)[:, 0])
        assert torch.equal(cls[:, -1], vit(x))
    with pytest.raises(ConfigError, match="start_block"):
        vit.forward_tokens(vit.embed(x), start_block=4)


def test_bad_weights_and_tag_are_named():
    with pytest.raises(FileNotFoundError, match="nowhere.pth"):
        create_model("tiny_vit", 10, weights="nowhere.pth")
    with pytest.raises(ConfigError, match="tag"):
        create_model("vit_b16", 10, tag="in1k")


def test_vit_b16_loads_official_layout_from_a_local_file(tmp_path):
    # The paper-size path without downloading: a random ViT-B/16 saved in timm's layout (the layout of
    # the IN-21k checkpoint on the hub) loads back through the user-facing builder, hooks included.
    src = create_model("vit_b16", 10, image_size=224, seed=0)
    assert sum(p.numel() for p in src.features.parameters()) == 85_798_656  # ViT-B/16 without its head
    path = tmp_path / "vit_base_patch16_224.orig_in21k.pth"
    torch.save(src.features.vit.state_dict(), path)
    dst = create_model("vit_b16", 10, image_size=224, seed=1, weights=str(path)).eval()
    own = dst.features.vit.state_dict()
    assert all(torch.equal(v, own[k]) for k, v in src.features.vit.state_dict().items())
    x = torch.randn(1, 3, 224, 224)
    with torch.no_grad():
        cls = dst.features.cls_per_block(x, prompts=torch.zeros(2, 768),
                                         block_hook=prompt_hook({6: torch.zeros(1, 768)}, "insert"))
    assert cls.shape == (1, 13, 768)
