"""Small convolutional and MLP models: the MOON CNN, a fast 2-conv CNN and a tiny MLP.

- ``moon_cnn``: the pFedCSPC/MOON CIFAR-10 encoder (pFedCSPC (TNNLS) §V-B; MOON (CVPR 2021)).
- ``cnn``: the fast default for Fashion-MNIST experiments on a laptop (a narrowed FedAvg CNN).
- ``mlp``: flatten → hidden → ReLU; only meant for fast unit tests.
"""
from __future__ import annotations

from torch import Tensor, nn

from ..errors import ConfigError
from .base import NORMS, SplitModel, check_choice, check_positive, norm2d
from .registry import MODELS

MOON_ENCODER_DIM = 84


def _side_after(image_size: int, shrink, model: str) -> int:
    """Spatial side after the conv/pool stack; a non-positive side means the input is too small."""
    side = shrink(image_size)
    if side < 1:
        raise ConfigError(f"image_size={image_size} is too small for model {model!r}")
    return side


class MoonCNNFeatures(nn.Module):
    """MOON encoder E (84-d), optionally followed by pFedCSPC's projection head H.

    Kept as two named children so pFedCSPC can address E (``.encoder``) and H (``.projection``)
    separately while plain methods see one φ.
    """

    def __init__(self, in_channels: int, image_size: int, projection_dim: int | None):
        super().__init__()
        # conv5 (no pad) → pool2 → conv5 → pool2: 32 → 5 (flatten 400), 28 → 4 (flatten 256)
        side = _side_after(image_size, lambda s: ((s - 4) // 2 - 4) // 2, "moon_cnn")
        self.encoder = nn.Sequential(
            nn.Conv2d(in_channels, 6, 5),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(2),
            nn.Conv2d(6, 16, 5),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(2),
            nn.Flatten(),
            nn.Linear(16 * side * side, 120),
            nn.ReLU(inplace=True),
            nn.Linear(120, MOON_ENCODER_DIM),
            nn.ReLU(inplace=True),
        )
        self.projection: nn.Module | None = None
        self.out_dim = MOON_ENCODER_DIM
        if projection_dim is not None:
            # FedCSPC code: Linear 84→84, ReLU, Linear 84→out_dim (out_dim = 256 there)
            self.projection = nn.Sequential(
                nn.Linear(MOON_ENCODER_DIM, MOON_ENCODER_DIM),
                nn.ReLU(inplace=True),
                nn.Linear(MOON_ENCODER_DIM, projection_dim),
            )
            self.out_dim = projection_dim

    def forward(self, x: Tensor) -> Tensor:
        z = self.encoder(x)
        return z if self.projection is None else self.projection(z)


@MODELS.register("moon_cnn")
def moon_cnn(
    num_classes: int, in_channels: int = 3, image_size: int = 32, *, projection_dim: int | None = None
) -> SplitModel:
    """MOON simple CNN (pFedCSPC (TNNLS) §V-B; layer sizes as in the official FedCSPC/MOON code):
    Conv(in→6,5)-ReLU-Pool-Conv(6→16,5)-ReLU-Pool-FC(→120)-ReLU-FC(120→84)-ReLU; head
    Linear(feature_dim, C).

    The flatten size follows the input (400 at 3×32×32, 256 at 1×28×28). With ``projection_dim``
    (the official FedCSPC code uses 256) φ also contains the 2-layer projection head and
    ``feature_dim = projection_dim``; without it ``feature_dim = 84`` (plain MOON/FedAvg use).
    """
    if projection_dim is not None:
        check_positive(projection_dim=projection_dim)
    features = MoonCNNFeatures(in_channels, image_size, projection_dim)
    return SplitModel(features, nn.Linear(features.out_dim, num_classes), features.out_dim, num_classes)


class ConvFeatures(nn.Module):
    """Two 5×5 'same' conv blocks (conv, norm, ReLU, 2×2 max-pool), then FC → ReLU."""

    def __init__(self, in_channels: int, image_size: int, width: int, feature_dim: int, norm: str):
        super().__init__()
        side = _side_after(image_size, lambda s: s // 2 // 2, "cnn")
        bias = norm == "none"  # a following norm layer makes the conv bias redundant
        self.conv = nn.Sequential(
            nn.Conv2d(in_channels, width, 5, padding=2, bias=bias),
            norm2d(norm, width),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(2),
            nn.Conv2d(width, 2 * width, 5, padding=2, bias=bias),
            norm2d(norm, 2 * width),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(2),
            nn.Flatten(),
        )
        self.fc = nn.Sequential(nn.Linear(2 * width * side * side, feature_dim), nn.ReLU(inplace=True))

    def forward(self, x: Tensor) -> Tensor:
        return self.fc(self.conv(x))


@MODELS.register("cnn")
def cnn(
    num_classes: int, in_channels: int = 3, image_size: int = 32, *,
    width: int = 32, feature_dim: int = 128, norm: str = "bn",
) -> SplitModel:
    """Fast default CNN for Fashion-MNIST on a laptop: the FedAvg paper's CNN (McMahan et al. 2017:
    conv 32/64 5×5, FC 512) with a narrower FC (``feature_dim`` 128) and optional BatchNorm.

    ``norm="bn"`` is the default so FedBN has BatchNorm layers to keep local; use ``"none"`` for the
    plain FedAvg CNN or ``"gn"``. Any ``image_size`` works (flatten follows ``image_size // 4``).
    """
    check_positive(width=width, feature_dim=feature_dim)
    check_choice("norm", norm, NORMS)
    features = ConvFeatures(in_channels, image_size, width, feature_dim, norm)
    return SplitModel(features, nn.Linear(feature_dim, num_classes), feature_dim, num_classes)


class MLPFeatures(nn.Module):
    """Flatten → Linear → ReLU."""

    def __init__(self, in_features: int, feature_dim: int):
        super().__init__()
        self.net = nn.Sequential(nn.Flatten(), nn.Linear(in_features, feature_dim), nn.ReLU(inplace=True))

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x)


@MODELS.register("mlp")
def mlp(
    num_classes: int, in_channels: int = 3, image_size: int = 32, *, feature_dim: int = 64
) -> SplitModel:
    """Tiny one-hidden-layer MLP for unit tests; has no BatchNorm (FedBN degenerates to FedAvg)."""
    check_positive(feature_dim=feature_dim)
    features = MLPFeatures(in_channels * image_size * image_size, feature_dim)
    return SplitModel(features, nn.Linear(feature_dim, num_classes), feature_dim, num_classes)
