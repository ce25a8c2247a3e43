"""The model registry: unknown names and arguments are named with the valid ones, bad values raise
ConfigError."""
from __future__ import annotations

import pytest

from fedrepro.errors import ConfigError
from fedrepro.models import (
    MODELS,
    create_model,
    list_models,
)

ALL_MODELS = list_models()


def test_unknown_model_lists_valid_names():
    with pytest.raises(ConfigError) as e:
        create_model("resnet9000", 10)
    for name in ALL_MODELS:
        assert name in str(e.value)


def test_unknown_kwarg_names_it_and_valid_ones():
    with pytest.raises(ConfigError) as e:
        create_model("resnet8", 10, widht=16)
    msg = str(e.value)
    assert "widht" in msg and "width" in msg and "stem" in msg


@pytest.mark.parametrize(
    "name, kwargs",
    [
        ("resnet8", {"stem": "tiny"}),
        ("resnet8", {"norm": "ln"}),
        ("cnn", {"width": 0}),
        ("tiny_vit", {"patch_size": 5}),
        ("tiny_vit", {"dim": 30, "heads": 4}),
        ("moon_cnn", {"projection_dim": -1}),
    ],
)
def test_bad_values_raise_config_error(name, kwargs):
    with pytest.raises(ConfigError):
        create_model(name, 10, **kwargs)


def test_bad_common_args():
    with pytest.raises(ConfigError):
        create_model("mlp", 0)
    with pytest.raises(ConfigError):
        create_model("moon_cnn", 10, image_size=8)


def test_registry_is_shared():
    assert set(ALL_MODELS) >= {"resnet8", "resnet10", "resnet18", "moon_cnn", "cnn", "mlp", "tiny_vit"}
    assert MODELS.get("mlp") is not None
