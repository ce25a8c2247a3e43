"""A tiny name -> object registry, shared by datasets, partitioners, models and methods."""
from __future__ import annotations

import difflib
from typing import Callable, Generic, Iterable, Iterator, TypeVar

from .errors import ConfigError

T = TypeVar("T")


class Registry(Generic[T]):
    """Maps names to objects; unknown names raise a :class:`ConfigError` listing valid names."""

    def __init__(self, kind: str):
        self.kind = kind
        self._items: dict[str, T] = {}

    def register(self, name: str) -> Callable[[T], T]:
        def deco(obj: T) -> T:
            old = self._items.get(name)
            # Re-running the cell (or re-importing the module) that defined it replaces it, so a
            # notebook can redefine a method; another object under a taken name is a clash.
            if old is not None and _origin(old) != _origin(obj):
                raise ValueError(f"{self.kind} {name!r} is registered twice: by {_origin(old)} and {_origin(obj)}")
            self._items[name] = obj
            return obj

        return deco

    def unregister(self, name: str) -> None:
        """Forget ``name`` (a method defined for a test or in a notebook); unknown names are ignored."""
        self._items.pop(name, None)

    def get(self, name: str) -> T:
        try:
            return self._items[name]
        except KeyError:
            raise ConfigError(f"unknown {self.kind} {name!r}{did_you_mean(name, self._items)}; valid {self.kind}s: "
                              f"{', '.join(sorted(self._items))}") from None

    def names(self) -> list[str]:
        return sorted(self._items)

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())


def did_you_mean(name: object, valid: Iterable[str]) -> str:
    """`` (did you mean 'fedprox'?)`` for the valid name closest to a misspelled one, else ""."""
    if not isinstance(name, str):
        return ""
    close = difflib.get_close_matches(name, list(valid), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _origin(obj: object) -> str:
    return f"{getattr(obj, '__module__', '?')}.{getattr(obj, '__qualname__', repr(obj))}"
