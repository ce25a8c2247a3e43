"""The features-then-head split every model follows, and key helpers FL methods use.

All four reproduced papers decompose the model the same way: a feature extractor φ and a
classifier h (FedPFT (ICLR) §3.2; pFedCSPC (TNNLS) §III, encoder E then head H and classifier F;
PEP-FedPT and FedOTP: frozen backbone + trainable head/prompts). Methods such as FedBN,
FedPer/FedRep, FedRoD and FedPFT keep, freeze or swap one of the two parts, so the split is part
of the model's contract rather than something each method rediscovers.
"""
from __future__ import annotations

from torch import Tensor, nn
from torch.nn.modules.batchnorm import _BatchNorm

from ..errors import ConfigError

FEATURES = "features"
HEAD = "head"


class SplitModel(nn.Module):
    """Every model is features (φ) then head (h). Methods freeze, swap and personalize these parts.

    ``features`` maps an input batch to ``[B, feature_dim]``; ``head`` maps that to logits
    ``[B, num_classes]``. State-dict keys therefore start with ``features.`` or ``head.``.
    """

    features: nn.Module
    head: nn.Module
    feature_dim: int
    num_classes: int

    def __init__(self, features: nn.Module, head: nn.Module, feature_dim: int, num_classes: int):
        super().__init__()
        self.features = features
        self.head = head
        self.feature_dim = int(feature_dim)
        self.num_classes = int(num_classes)

    def forward(self, x: Tensor) -> Tensor:
        return self.head(self.features(x))

    def param_groups(self) -> dict[str, list[str]]:
        """State-dict keys (parameters and buffers) of the ``features`` and ``head`` parts."""
        keys = list(self.state_dict().keys())
        return {
            FEATURES: [k for k in keys if k.startswith(FEATURES + ".")],
            HEAD: [k for k in keys if k.startswith(HEAD + ".")],
        }


def bn_keys(model: nn.Module) -> set[str]:
    """All state-dict keys that belong to BatchNorm layers (FedBN keeps exactly these local).

    Includes weight, bias, running_mean, running_var and num_batches_tracked: FedBN's point is
    that the per-client statistics, not only the affine parameters, stay private.
    """
    keys: set[str] = set()
    for prefix, module in model.named_modules():
        if isinstance(module, _BatchNorm):
            dot = prefix + "." if prefix else ""
            # keep_vars avoids detaching; only the names are needed.
            keys.update(dot + k for k in module.state_dict(keep_vars=True))
    return keys


def head_keys(model: SplitModel) -> set[str]:
    """State-dict keys of the classifier head (``head.*``)."""
    return {HEAD + "." + k for k in model.head.state_dict(keep_vars=True)}


def count_params(module: nn.Module, trainable_only: bool = False, include_buffers: bool = False) -> int:
    """Number of scalar parameters in ``module``.

    ``include_buffers`` adds every buffer (BN running stats *and* ``num_batches_tracked``), which
    is how :mod:`fedrepro.models.resnet` documents ResNet-8/10 sizes "with BN buffers".
    """
    n = sum(p.numel() for p in module.parameters() if p.requires_grad or not trainable_only)
    if include_buffers:
        n += sum(b.numel() for b in module.buffers())
    return n


NORMS = ("bn", "gn", "none")
GN_GROUPS = 2


def check_positive(**values: int) -> None:
    """Raise ConfigError naming the first argument that is not a positive integer."""
    for key, v in values.items():
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise ConfigError(f"{key} must be a positive integer, got {v!r}")


def check_choice(key: str, value: str, valid: tuple[str, ...]) -> None:
    """Raise ConfigError naming ``key`` and the valid values when ``value`` is not one of them."""
    if value not in valid:
        raise ConfigError(f"{key} must be one of {', '.join(valid)}; got {value!r}")


def norm2d(kind: str, channels: int) -> nn.Module:
    """A 2-d normalisation layer: BatchNorm ("bn"), GroupNorm ("gn") or nothing ("none").

    GroupNorm uses a fixed 2 groups (our choice, not from a paper): with narrow laptop widths
    (16 channels) more groups would leave too few channels per group for stable statistics.
    """
    check_choice("norm", kind, NORMS)
    if kind == "bn":
        return nn.BatchNorm2d(channels)
    if kind == "gn":
        return nn.GroupNorm(GN_GROUPS if channels % GN_GROUPS == 0 else 1, channels)
    return nn.Identity()
