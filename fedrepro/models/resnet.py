"""CIFAR-scale ResNet-8/10/18 as inferred from FedPFT's parameter counts.

The FedPFT paper gives no architecture, only the models used (ICLR §4.1, App. J) and their
sizes (ICLR Table 15 / arXiv Table 10: ResNet-8 φ ≈ 1.24M, ResNet-10 ≈ 4.91M). The definition
below reproduces those sizes and matches the same group's ``FedDecomp/models/LoraResnet1.py``
(code by FedPFT's first author; there is no official FedPFT code):

- torchvision-style BasicBlock; **ImageNet stem**: 7×7 conv stride 2 pad 3 (no bias), BN, ReLU,
  3×3 max-pool stride 2;
- one BasicBlock per stage (ResNet-8: [1,1,1], widths 64/128/256, m = 256; ResNet-10: [1,1,1,1],
  m = 512); ResNet-18: [2,2,2,2], m = 512; stride 2 from stage 2 on; 1×1 conv + BN shortcut when
  the shape changes;
- AdaptiveAvgPool + flatten give the features; the head is Linear(m, C).

Parameter counts at the default width 64, ``in_channels=3`` (checked in tests/models/test_resnet.py):

- ResNet-8  φ = 1,232,704 parameters; 1,235,401 with BN buffers (running mean/var *and* the nine
  ``num_batches_tracked`` scalars).
- ResNet-10 φ = 4,905,792 parameters; 4,911,564 with BN buffers (12 ``num_batches_tracked``).

Options of ours: ``width`` (base width; 16 gives m = 64 for ResNet-8, the laptop profile),
``stem`` (:data:`STEMS`) and ``norm`` ("bn" | "gn" | "none"). The stems:

- ``"imagenet"`` (default): 7×7 stride 2 + 3×3 max-pool stride 2, FedPFT's inferred model above;
- ``"cifar"``: 3×3 stride 1, no max-pool, the usual ResNet for 32-pixel inputs (MOON's
  ``ResNet18_cifar10``, which the FedCSPC code uses on CIFAR-100). A slightly worse fit to FedPFT's
  sizes: φ = 1,225,024 / 4,898,112 parameters, 1,227,721 / 4,903,884 with BN buffers;
- ``"conv3_s2"``: 3×3 stride 2, no max-pool, the FedCSPC code's ResNet-18 on Tiny-ImageNet
  (``resnet.py``, ``kernel_size=3``; its padding of 3 is taken as the conventional 1 here, so 64 px
  give a 32×32 map, as a CIFAR stem does on CIFAR);
- ``"conv7_s2"``: 7×7 stride 2, no max-pool, the same code's model on VireoFood172 (224 px).
"""
from __future__ import annotations

from torch import Tensor, nn

from ..errors import ConfigError
from .base import NORMS, SplitModel, check_choice, check_positive, norm2d
from .registry import MODELS

STEMS = ("imagenet", "cifar", "conv3_s2", "conv7_s2")
# kernel, stride, padding and whether a 3×3 stride-2 max-pool follows
_STEM_SHAPES = {"imagenet": (7, 2, 3, True), "cifar": (3, 1, 1, False), "conv3_s2": (3, 2, 1, False),
                "conv7_s2": (7, 2, 3, False)}


class BasicBlock(nn.Module):
    """torchvision's BasicBlock: two 3×3 convs with a residual; 1×1 conv + norm shortcut on shape change."""

    def __init__(self, in_planes: int, planes: int, stride: int, norm: str):
        super().__init__()
        bias = norm == "none"  # without a norm layer the conv bias is the only per-channel offset
        self.conv1 = nn.Conv2d(in_planes, planes, 3, stride=stride, padding=1, bias=bias)
        self.bn1 = norm2d(norm, planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride=1, padding=1, bias=bias)
        self.bn2 = norm2d(norm, planes)
        self.downsample: nn.Module | None = None
        if stride != 1 or in_planes != planes:
            self.downsample = nn.Sequential(
                nn.Conv2d(in_planes, planes, 1, stride=stride, bias=bias), norm2d(norm, planes)
            )

    def forward(self, x: Tensor) -> Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + identity)


def _stem(in_channels: int, width: int, stem: str, norm: str) -> nn.Sequential:
    kernel, stride, padding, pool = _STEM_SHAPES[stem]
    layers = [nn.Conv2d(in_channels, width, kernel, stride=stride, padding=padding, bias=norm == "none"),
              norm2d(norm, width), nn.ReLU(inplace=True)]
    if pool:
        layers.append(nn.MaxPool2d(3, stride=2, padding=1))
    return nn.Sequential(*layers)


class ResNetFeatures(nn.Module):
    """φ: stem, one stage per entry of ``blocks`` (widths width·2^i), global average pool, flatten."""

    def __init__(self, blocks: list[int], in_channels: int, width: int, stem: str, norm: str):
        super().__init__()
        self.stem = _stem(in_channels, width, stem, norm)
        stages: list[nn.Module] = []
        in_planes = width
        for i, n in enumerate(blocks):
            planes = width * 2**i
            layers = []
            for j in range(n):
                # stride 2 only at the first block of stages 2.. (as in torchvision's ResNets)
                layers.append(BasicBlock(in_planes, planes, 2 if (i > 0 and j == 0) else 1, norm))
                in_planes = planes
            stages.append(nn.Sequential(*layers))
        self.stages = nn.Sequential(*stages)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.out_dim = in_planes
        self._init_weights()

    def _init_weights(self) -> None:
        # Same scheme as torchvision.models.resnet: Kaiming-normal convs, BN weight 1, bias 0.
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
            elif isinstance(m, (nn.BatchNorm2d, nn.GroupNorm)):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)

    def forward(self, x: Tensor) -> Tensor:
        return self.pool(self.stages(self.stem(x))).flatten(1)


class ProjectedFeatures(nn.Module):
    """φ = H∘E: a ResNet encoder E (``.encoder``) and pFedCSPC's 2-layer projection head H
    (``.projection``: Linear(m, m), ReLU, Linear(m, projection_dim)).

    pFedCSPC (TNNLS) §V-B: "all methods comprise an image encoder, a projection head, and a
    classifier", so every compared method trains this φ and a Linear(projection_dim, C) head. The
    head's shape is the FedCSPC code's CIFAR-100 model (512 → 512, ReLU, → 256); its Tiny-ImageNet
    file uses 512 → 512 → 512 without the ReLU, which ``projection_dim=512`` approaches. Kept as two
    named children, as :class:`~fedrepro.models.cnn.MoonCNNFeatures` is, so that pFedCSPC and
    LG-FedAvg can address E and H apart.
    """

    def __init__(self, encoder: ResNetFeatures, projection_dim: int):
        super().__init__()
        m = encoder.out_dim
        self.encoder = encoder
        self.projection = nn.Sequential(nn.Linear(m, m), nn.ReLU(inplace=True), nn.Linear(m, projection_dim))
        self.out_dim = projection_dim

    def forward(self, x: Tensor) -> Tensor:
        return self.projection(self.encoder(x))


def build_resnet(
    blocks: list[int], num_classes: int, in_channels: int, width: int, stem: str, norm: str,
    projection_dim: int | None = None,
) -> SplitModel:
    check_choice("stem", stem, STEMS)
    check_choice("norm", norm, NORMS)
    if not isinstance(width, int) or isinstance(width, bool) or width < 1:
        raise ConfigError(f"width must be a positive integer, got {width!r}")
    if projection_dim is not None:
        check_positive(projection_dim=projection_dim)
    features: nn.Module = ResNetFeatures(blocks, in_channels, width, stem, norm)
    if projection_dim is not None:
        features = ProjectedFeatures(features, projection_dim)
    head = nn.Linear(features.out_dim, num_classes)
    return SplitModel(features, head, features.out_dim, num_classes)


# ``projection_dim`` (None: no head; φ ends at the pooled encoder output) adds
# :class:`ProjectedFeatures`' projection head to φ.
@MODELS.register("resnet8")
def resnet8(
    num_classes: int, in_channels: int = 3, image_size: int = 32, *,
    width: int = 64, stem: str = "imagenet", norm: str = "bn", projection_dim: int | None = None,
) -> SplitModel:
    """ResNet-8 (FedPFT CIFAR-10): blocks [1,1,1], m = 4·width (256 at width 64)."""
    return build_resnet([1, 1, 1], num_classes, in_channels, width, stem, norm, projection_dim)


@MODELS.register("resnet10")
def resnet10(
    num_classes: int, in_channels: int = 3, image_size: int = 32, *,
    width: int = 64, stem: str = "imagenet", norm: str = "bn", projection_dim: int | None = None,
) -> SplitModel:
    """ResNet-10 (FedPFT CIFAR-100/Tiny-ImageNet): blocks [1,1,1,1], m = 8·width (512)."""
    return build_resnet([1, 1, 1, 1], num_classes, in_channels, width, stem, norm, projection_dim)


@MODELS.register("resnet18")
def resnet18(
    num_classes: int, in_channels: int = 3, image_size: int = 32, *,
    width: int = 64, stem: str = "imagenet", norm: str = "bn", projection_dim: int | None = None,
) -> SplitModel:
    """ResNet-18 (FedPFT scaling study; pFedCSPC CIFAR-100 encoder): blocks [2,2,2,2], m = 8·width."""
    return build_resnet([2, 2, 2, 2], num_classes, in_channels, width, stem, norm, projection_dim)
