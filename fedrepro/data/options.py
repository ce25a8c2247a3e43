"""Checks shared by the loaders' list-of-names options (``domains``, ``classes``)."""
from __future__ import annotations

from typing import Sequence

from ..errors import ConfigError


def is_names_list(value: object) -> bool:
    """A list (not a string) of strings: what a ``domains`` or ``classes`` option holds."""
    return not isinstance(value, str) and isinstance(value, Sequence) and all(isinstance(x, str) for x in value)


def pick_names(option: str, name: str, wanted: Sequence[str] | None, available: Sequence[str]) -> list[str]:
    """``wanted`` (every one of ``available`` when None), sorted; a name not in ``available``, a
    repeated name or an empty list is a one-line error naming the valid ones."""
    if wanted is None:
        return sorted(available)
    unknown = [d for d in wanted if d not in available]
    if unknown or not wanted or len(set(wanted)) != len(wanted):
        raise ConfigError(
            f"{option} for {name!r} must be distinct names from: {', '.join(sorted(available)) or '(none found)'}; "
            f"got {list(wanted)!r}"
        )
    return sorted(wanted)
