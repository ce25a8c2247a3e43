"""ResNets: FedPFT's parameter counts (φ 1.24M / 4.91M, ICLR App. N Table 15), the CIFAR stem, and the width."""
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
    # Our "with BN buffers" counts include running_mean, running_var and num_batches_tracked.
    assert count_params(model.features, include_buffers=True) == with_buffers
    assert sum(v.numel() for k, v in model.state_dict().items() if k.startswith("features.")) == with_buffers


def test_resnet_cifar_stem_counts_match_spec_alternative():
    # Our derivation: a CIFAR 3×3 stem gives 1.228M / 4.904M with BN buffers, a worse fit to ICLR Table 15.
    r8 = create_model("resnet8", 10, stem="cifar")
    r10 = create_model("resnet10", 10, stem="cifar")
    assert round(count_params(r8.features, include_buffers=True) / 1e6, 3) == 1.228
    assert round(count_params(r10.features, include_buffers=True) / 1e6, 3) == 4.904


def test_resnet_width_scales_feature_dim():
    assert create_model("resnet8", 10, width=16).feature_dim == 64
    assert create_model("resnet18", 10, width=16).feature_dim == 128


@pytest.mark.parametrize("stem, side, out", [("imagenet", 32, 8), ("cifar", 32, 32), ("conv3_s2", 64, 32),
                                             ("conv7_s2", 224, 112), ("imagenet", 64, 16)])
def test_resnet_stems_map_sizes(stem, side, out):
    import torch

    model = create_model("resnet18", 10, stem=stem, width=4, seed=0).eval()
    with torch.no_grad():
        assert model.features.stem(torch.zeros(2, 3, side, side)).shape[-2:] == (out, out)
        assert model(torch.zeros(2, 3, side, side)).shape == (2, 10)
    # Only the ImageNet stem max-pools.
    assert any(isinstance(m, torch.nn.MaxPool2d) for m in model.features.stem) == (stem == "imagenet")


def test_resnet_default_stem_is_unchanged():
    import torch

    a, b = create_model("resnet8", 10, width=8, seed=3), create_model("resnet8", 10, width=8, stem="imagenet", seed=3)
    assert list(a.state_dict()) == list(b.state_dict())
    assert all(torch.equal(a.state_dict()[k], b.state_dict()[k]) for k in a.state_dict())


def test_resnet_bad_stem_names_the_parameter():
    from fedrepro.errors import ConfigError

    with pytest.raises(ConfigError, match="stem must be one of imagenet, cifar, conv3_s2, conv7_s2"):
        create_model("resnet18", 10, stem="tiny")


def test_resnet_projection_head():
    import torch

    model = create_model("resnet18", 100, width=8, stem="cifar", projection_dim=32, seed=0)
    assert model.feature_dim == 32 and model.head.in_features == 32
    # E (m = 64 at width 8) then H: Linear(m, m), ReLU, Linear(m, 32).
    assert model.features.encoder.out_dim == 64
    assert [type(m).__name__ for m in model.features.projection] == ["Linear", "ReLU", "Linear"]
    assert model.features.projection[0].in_features == 64
    assert model(torch.zeros(2, 3, 32, 32)).shape == (2, 100)
    assert create_model("resnet18", 10, width=8).feature_dim == 64  # no head by default
    from fedrepro.errors import ConfigError

    with pytest.raises(ConfigError, match="projection_dim must be a positive integer"):
        create_model("resnet18", 10, projection_dim=0)


def test_pfedcspc_uses_the_resnet_projection_head():
    from fedrepro.methods.pfedcspc import CSPCNet

    base = create_model("resnet18", 10, width=8, stem="cifar", projection_dim=32, seed=0)
    net = CSPCNet(base, proj_dim=256, num_classes=10)
    assert net.proj is base.features.projection and net.cls is base.head
    assert net.enc_dim == 64 and net.feature_dim == 32
