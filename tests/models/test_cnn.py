"""The CNNs: MOON's CNN (flatten size, projection) and the plain CNN at other image sizes."""
from __future__ import annotations

import torch

from fedrepro.models import (
    create_model,
)


def test_moon_cnn_flatten_and_projection():
    m = create_model("moon_cnn", 10, in_channels=3, image_size=32)
    assert m.features.encoder[7].in_features == 400  # pFedCSPC (TNNLS) §V-B; 16·5·5 as in MOON's code
    assert create_model("moon_cnn", 10, in_channels=1, image_size=28).features.encoder[7].in_features == 256
    p = create_model("moon_cnn", 10, projection_dim=256)
    assert p.feature_dim == 256 and p.head.in_features == 256
    assert p.features.encoder(torch.randn(2, 3, 32, 32)).shape == (2, 84)


def test_cnn_other_image_sizes():
    m = create_model("cnn", 10, in_channels=1, image_size=16, width=8, feature_dim=32)
    assert m(torch.randn(2, 1, 16, 16)).shape == (2, 10)
