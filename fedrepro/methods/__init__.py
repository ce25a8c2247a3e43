"""Federated methods. Importing this package registers every method in :data:`METHODS`.

Every module of this package except the shared ones (``base``, ``registry``; ``pft``, what the
FedPFT methods share; ``contrastive``, MoCo's pieces; ``prompted``, the frozen-ViT prompt tuning
PEP-FedPT's baselines share) holds one method and registers it with
:func:`register_method` on import; the loop below imports them all, so adding a method is adding
its file.
"""
import importlib
import pkgutil

from .registry import METHODS, list_methods, register_method

_SHARED = {"base", "registry", "pft", "contrastive", "prompted", "clip_prompt"}
for _mod in sorted(m.name for m in pkgutil.iter_modules(__path__)):
    if _mod not in _SHARED and not _mod.startswith("_"):
        importlib.import_module(f"{__name__}.{_mod}")

__all__ = ["METHODS", "list_methods", "register_method"]
