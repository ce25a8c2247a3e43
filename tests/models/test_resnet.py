"""ResNets: FedPFT's parameter counts (specs/fedpft.md §3.2), the CIFAR stem, and the width."""
from __future__ import annotations

import pytest

from fedrepro.models import (
    count_params,
    create_model,
)


@pytest.mark.parametrize(
    "name, params, with_buffers, m",
    [("resnet8", 1_232_704, 1_235_401, 256), ("resnet10", 4_905_792, 4_911_564, 512)],
)
def test_resnet_feature_counts_match_fedpft_spec(name, params, with_buffers, m):
    model = create_model(name, num_classes=100, in_channels=3)
    assert model.feature_dim == m
    assert count_params(model.features) == params
    # The spec's "with BN buffers" counts running_mean, running_var and num_batches_tracked.
    assert count_params(model.features, include_buffers=True) == with_buffers
    assert sum(v.numel() for k, v in model.state_dict().items() if k.startswith("features.")) == with_buffers


def test_resnet_cifar_stem_counts_match_spec_alternative():
    # §3.2: "A CIFAR 3×3 stem would give 1.228M / 4.904M" (those figures include BN buffers).
    r8 = create_model("resnet8", 10, stem="cifar")
    r10 = create_model("resnet10", 10, stem="cifar")
    assert round(count_params(r8.features, include_buffers=True) / 1e6, 3) == 1.228
    assert round(count_params(r10.features, include_buffers=True) / 1e6, 3) == 4.904


def test_resnet_width_scales_feature_dim():
    assert create_model("resnet8", 10, width=16).feature_dim == 64
    assert create_model("resnet18", 10, width=16).feature_dim == 128
