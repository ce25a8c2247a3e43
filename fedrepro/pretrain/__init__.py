"""``fedrepro pretrain vit|clip``: regenerate the committed backbone checkpoints.

Each pretrainer is ``run(cfg) -> Path`` whose ``cfg`` is a typed dataclass (its annotation), so the
CLI's ``--set key=value`` overrides are checked against the fields. Pretrainer modules are imported
only when asked for: their dependencies (timm, open_clip) are optional, and a module that is not
there yet (``clip``) makes only its own name unavailable.
"""
from __future__ import annotations

import dataclasses
import importlib
import typing
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import yaml

from ..errors import ConfigError
from ..registry import Registry

Pretrainer = Callable[..., Path]

PRETRAINERS: Registry[Pretrainer] = Registry("pretrainer")
# name -> (module under fedrepro.pretrain, its run function); imported on first use.
_MODULES = {"vit": ("vit", "pretrain_vit"), "clip": ("clip", "pretrain_clip"),
            "clip_patch": ("clip", "pretrain_clip_patch")}


def get_pretrainer(name: str) -> Pretrainer:
    """The pretrainer registered as ``name``, importing its module on first use."""
    if name not in PRETRAINERS and name in _MODULES:
        module, attr = _MODULES[name]
        try:
            mod = importlib.import_module(f"{__name__}.{module}")
        except ModuleNotFoundError as e:
            if e.name != f"{__name__}.{module}":
                raise  # a missing dependency inside the module: show it as it is
            raise ConfigError(f"pretrainer {name!r} is not available (no module fedrepro.pretrain.{module})") from e
        if name not in PRETRAINERS:
            PRETRAINERS.register(name)(getattr(mod, attr))
    if name not in PRETRAINERS:
        raise ConfigError(f"unknown pretrainer {name!r}; valid pretrainers: {', '.join(sorted(_MODULES))}")
    return PRETRAINERS.get(name)


def config_type(run: Pretrainer) -> type:
    """The dataclass a pretrainer takes, read from its first parameter's annotation."""
    hints = typing.get_type_hints(run)
    first = next(iter(p for p in hints if p != "return"), None)
    cls = hints.get(first) if first else None
    if cls is None or not dataclasses.is_dataclass(cls):
        raise TypeError(f"pretrainer {run.__qualname__} must annotate its first parameter with a dataclass")
    return cls


def parse_overrides(cls: type, sets: Sequence[str]) -> Any:
    """``cls`` with ``KEY=VALUE`` overrides (values parsed as YAML); unknown keys name the valid ones."""
    fields = {f.name for f in dataclasses.fields(cls)}
    values: dict[str, Any] = {}
    for item in sets:
        key, sep, raw = item.partition("=")
        if not sep:
            raise ConfigError(f"--set expects KEY=VALUE, got {item!r}")
        if key not in fields:
            raise ConfigError(f"unknown key {key!r} for {cls.__name__}; valid keys: {', '.join(sorted(fields))}")
        values[key] = yaml.safe_load(raw)
    return cls(**values)


def run_pretrainer(name: str, sets: Sequence[str] = ()) -> Path:
    """Run pretrainer ``name`` with ``--set`` style overrides; returns the checkpoint path."""
    run = get_pretrainer(name)
    return run(parse_overrides(config_type(run), sets))


__all__ = ["PRETRAINERS", "config_type", "get_pretrainer", "parse_overrides", "run_pretrainer"]
