"""Models: every model is a :class:`SplitModel` (features φ, then head h).

Importing this package registers all models in :data:`MODELS`; build them with
:func:`create_model`.
"""
from .base import SplitModel, bn_keys, count_params, head_keys
from .registry import MODELS, create_model, list_models, model_kwargs

# Imported for their registration side effect.
from . import backbones, clip_model, cnn, resnet, vit  # noqa: E402,F401  isort:skip
from .backbones import FrozenBackbone, load_pretrained  # noqa: E402

__all__ = [
    "MODELS",
    "FrozenBackbone",
    "SplitModel",
    "bn_keys",
    "count_params",
    "create_model",
    "head_keys",
    "list_models",
    "load_pretrained",
    "model_kwargs",
]
