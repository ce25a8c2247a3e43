"""Reading a paper's setups from its tables: one base layer per profile, one change per variant.

Each paper's ``setup.py`` declares two mappings:

- ``BASE``: profile -> the override layer of that profile's base config;
- ``CHANGES``: variant -> profile -> what the variant changes at that profile, one of:

  - a layer (``{}`` when the variant changes nothing there);
  - a layer with ``"on": <variant>``: that variant's change at this profile, then this layer's
    keys merged over it (nested mappings merge, other values replace);
  - a string: the variant does not run at this profile, and why.

A value in a layer that is a function is called when the setup is resolved, so that a path read
from the environment (a weights file, the data root) is read at that moment.

:func:`layers` turns the tables into ``[base, change]`` for :func:`fedrepro.papers.setup`, and
:func:`check` is what the tests run on every paper's tables.
"""
from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from ..config import PROFILES
from ..errors import ConfigError

Layer = Mapping[str, Any]
ON = "on"


def layers(paper: str, base: Mapping[str, Layer], changes: Mapping[str, Mapping[str, Layer | str]],
           profile: str, variant: str = "default") -> list[dict]:
    """``[base of profile, change of variant at profile]`` from a paper's ``BASE`` and ``CHANGES``."""
    if profile not in base:
        valid = ", ".join(p for p in PROFILES if p in base)
        raise ConfigError(f"unknown {paper} setup profile {profile!r}; valid: {valid}")
    if variant not in changes:
        raise ConfigError(f"unknown {paper} setup variant {variant!r}; valid: {', '.join(changes)}")
    return [_called(copy.deepcopy(dict(base[profile]))), _called(_change(paper, changes, profile, variant, ()))]


def _change(paper: str, changes, profile: str, variant: str, seen: tuple[str, ...]) -> dict:
    entry = changes[variant].get(profile)
    if entry is None or isinstance(entry, str):
        here = [v for v, c in changes.items() if isinstance(c.get(profile), Mapping)]
        why = f" ({entry})" if entry else ""
        raise ConfigError(f"{paper} setup {variant!r} does not run at the {profile} profile{why}; "
                          f"valid there: {', '.join(here)}")
    own = {k: v for k, v in entry.items() if k != ON}
    if ON not in entry:
        return copy.deepcopy(own)
    under = entry[ON]
    if under not in changes or under in (*seen, variant):
        raise ConfigError(f"{paper} setup {variant!r} at {profile}: 'on' names {under!r}, which is "
                          f"{'not a variant' if under not in changes else 'a cycle'}; valid: {', '.join(changes)}")
    return _merged(_change(paper, changes, profile, under, (*seen, variant)), own)


def _merged(under: dict, over: Mapping[str, Any]) -> dict:
    out = copy.deepcopy(under)
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = _merged(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _called(layer: Any) -> Any:
    if isinstance(layer, dict):
        return {k: _called(v) for k, v in layer.items()}
    return layer() if callable(layer) else layer


def check(paper: str, base: Mapping[str, Layer], changes: Mapping[str, Mapping[str, Layer | str]]) -> None:
    """Every profile has a base and every variant an entry at every profile (a layer, or a string
    saying why it does not run there); ``default`` changes nothing. Raises :class:`ConfigError`."""
    if set(base) != set(PROFILES):
        raise ConfigError(f"{paper} BASE: profiles {', '.join(base)}; expected {', '.join(PROFILES)}")
    if changes.get("default") != {p: {} for p in PROFILES}:
        raise ConfigError(f"{paper} CHANGES['default'] must change nothing at every profile")
    for variant, entry in changes.items():
        if set(entry) != set(PROFILES):
            raise ConfigError(f"{paper} CHANGES[{variant!r}]: profiles {', '.join(entry)}; "
                              f"expected each of {', '.join(PROFILES)}")
        for profile in PROFILES:
            if not isinstance(entry[profile], str):
                _change(paper, changes, profile, variant, ())


__all__ = ["ON", "check", "layers"]
