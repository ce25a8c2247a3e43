"""The SplitModel contract for every registered model (forward = head(features), parameter groups,
seeding), and the helpers bn_keys and count_params."""
from __future__ import annotations

import pytest
import torch

from fedrepro.models import (
    SplitModel,
    bn_keys,
    count_params,
    create_model,
    head_keys,
    list_models,
)

ALL_MODELS = list_models()


SHAPES = [(1, 28), (3, 32)]


@pytest.mark.parametrize("name", ALL_MODELS)
@pytest.mark.parametrize("channels, size", SHAPES)
def test_forward_is_head_of_features(name, channels, size):
    model = create_model(name, num_classes=7, in_channels=channels, image_size=size, seed=0).eval()
    assert isinstance(model, SplitModel)
    x = torch.randn(3, channels, size, size)
    with torch.no_grad():
        feats = model.features(x)
        logits = model(x)
        assert feats.shape == (3, model.feature_dim)
        assert logits.shape == (3, 7)
        torch.testing.assert_close(logits, model.head(feats))


@pytest.mark.parametrize("name", ALL_MODELS)
def test_param_groups_partition_state_dict(name):
    model = create_model(name, num_classes=5)
    groups = model.param_groups()
    keys = set(model.state_dict())
    assert set(groups) == {"features", "head"}
    assert set(groups["features"]) | set(groups["head"]) == keys
    assert not set(groups["features"]) & set(groups["head"])
    assert set(groups["head"]) == head_keys(model) == {"head.weight", "head.bias"}


@pytest.mark.parametrize("name", ALL_MODELS)
def test_same_seed_same_weights_and_global_rng_untouched(name):
    torch.manual_seed(123)
    before = torch.random.get_rng_state()
    a = create_model(name, num_classes=4, seed=7).state_dict()
    assert torch.equal(torch.random.get_rng_state(), before)
    b = create_model(name, num_classes=4, seed=7).state_dict()
    c = create_model(name, num_classes=4, seed=8).state_dict()
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a)
    if name == "clip":  # a frozen pretrained CLIP and a zero head: nothing is drawn from the seed
        assert all(torch.equal(a[k], c[k]) for k in a)
        return
    assert any(not torch.equal(a[k], c[k]) for k in a if a[k].is_floating_point())


def test_bn_keys():
    keys = bn_keys(create_model("resnet8", 10))
    # 9 BatchNorm layers (stem, 2+3+3 in the blocks) × 5 entries each
    assert len(keys) == 45
    assert "features.stem.1.running_var" in keys and "features.stem.1.num_batches_tracked" in keys
    assert not any(k.startswith("head.") for k in keys)
    assert bn_keys(create_model("mlp", 10)) == set()
    assert bn_keys(create_model("cnn", 10)) and not bn_keys(create_model("cnn", 10, norm="none"))
    assert not bn_keys(create_model("resnet8", 10, norm="gn"))


def test_count_params_trainable_only():
    model = create_model("mlp", 10, in_channels=1, image_size=28)
    total = count_params(model)
    for p in model.features.parameters():
        p.requires_grad_(False)
    assert count_params(model, trainable_only=True) == count_params(model.head) == 64 * 10 + 10
    assert count_params(model) == total
