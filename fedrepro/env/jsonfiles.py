"""Reading the JSON files that commands take as input besides run folders: the claims the notebooks
recorded, their verdicts by round, the report of a ``reproduce`` pass.

A file that is torn, emptied, garbled or of the wrong shape (``{}``, a field missing or of the wrong
type) is a one-line :class:`~fedrepro.errors.CorruptCacheError` that names it and says what to
do, never a traceback from deep inside the page that reads it.
"""
from __future__ import annotations

import json
import reprlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Union

from ..errors import CorruptCacheError

# A field that holds a number (a JSON true is not one).
NUMBER = (int, float)


@dataclass(frozen=True)
class ListOf:
    """A field that holds a list of ``item`` (a kind as :func:`field_problem` takes)."""
    item: Any


@dataclass(frozen=True)
class OneOf:
    """A field that holds one of ``values``."""
    values: tuple


@dataclass(frozen=True)
class MapOf:
    """A field that holds an object whose every value is of ``item`` (a kind as :func:`field_problem` takes)."""
    item: Any


@dataclass(frozen=True, eq=False)
class Obj:
    """A field that holds an object with ``fields`` (as :func:`field_problem` takes them)."""
    fields: Mapping[str, Any]


@dataclass(frozen=True)
class MayLack:
    """A field that a record may lack (one written before the field existed) or hold null in (a row
    without it, kept beside rows with it); otherwise it holds ``kind``."""
    kind: Any


Kind = Union[type, tuple, ListOf, MapOf, Obj, OneOf, MayLack]


def _type_ok(value: Any, kind: Kind) -> bool:
    """Whether ``value`` is of a kind whose parts are not objects with fields of their own."""
    if isinstance(kind, ListOf):
        return isinstance(value, list) and all(_type_ok(v, kind.item) for v in value)
    if isinstance(kind, MapOf):
        return isinstance(value, dict) and all(_type_ok(v, kind.item) for v in value.values())
    if isinstance(kind, OneOf):
        return isinstance(value, str) and value in kind.values
    if isinstance(value, bool) and kind in (NUMBER, int):
        return False
    return isinstance(value, kind)


def _kind_name(kind: Kind) -> str:
    if isinstance(kind, ListOf):
        return "a list of " + {int: "integers", str: "strings", NUMBER: "numbers"}.get(kind.item, "objects")
    if isinstance(kind, MapOf):
        return "an object of objects" if isinstance(kind.item, Obj) else f"an object of {_kind_name(kind.item)}s"
    if isinstance(kind, OneOf):
        return "one of " + ", ".join(kind.values)
    if isinstance(kind, Obj):
        return "an object"
    return {NUMBER: "a number", int: "an integer", str: "text", list: "a list", dict: "an object"}.get(kind, str(kind))


def _value_problem(owner: str, key: str, value: Any, kind: Kind) -> str | None:
    """What is wrong with ``value``, the field ``key`` of ``owner`` (``"it"``: the file's object), as
    ``kind``; an object inside is judged field by field, so the message names the innermost one."""
    path = key if owner == "it" else f"{owner}.{key}"
    if isinstance(kind, Obj):
        return field_problem(value, kind.fields, path)
    if isinstance(kind, (ListOf, MapOf)) and isinstance(kind.item, Obj):
        container = list if isinstance(kind, ListOf) else dict
        if not isinstance(value, container):
            return f"{owner} has {key}={reprlib.repr(value)}, not {_kind_name(kind)}"
        items = enumerate(value) if container is list else value.items()
        return next((p for k, v in items if (p := field_problem(v, kind.item.fields, f"{path}[{k!r}]"))), None)
    if not _type_ok(value, kind):
        return f"{owner} has {key}={reprlib.repr(value)}, not {_kind_name(kind)}"
    return None


def field_problem(obj: Any, required: Mapping[str, Kind], where: str) -> str | None:
    """What is wrong with ``obj`` as an object with the ``required`` fields (None when nothing); a
    field declared :class:`MayLack` may be absent or null."""
    if not isinstance(obj, dict):
        return f"{where} holds {type(obj).__name__}, not an object"
    missing = [k for k, kind in required.items() if k not in obj and not isinstance(kind, MayLack)]
    if missing:
        return f"{where} has no {', '.join(repr(k) for k in missing)}"
    for key, kind in required.items():
        if isinstance(kind, MayLack):
            if obj.get(key) is None:
                continue
            kind = kind.kind
        problem = _value_problem(where, key, obj[key], kind)
        if problem is not None:
            return problem
    return None


def read_json_file(path: str | Path, what: str, fix: str, required: Mapping[str, Kind] | None = None,
                   rows: tuple[str, Mapping[str, Kind]] | None = None) -> dict:
    """The object in the JSON file ``path``, holding the ``required`` fields (and, with ``rows``,
    ``(field, fields of each item)``: a list of objects holding theirs). Otherwise a
    :class:`CorruptCacheError` naming the file (``what`` says what it is) and ``fix``."""
    path = Path(path)

    def bad(why: str) -> CorruptCacheError:
        return CorruptCacheError(f"{what} {path} {why}; {fix}")

    try:
        data = path.read_bytes()
    except OSError as e:
        raise bad(f"cannot be read ({e.strerror or e})") from None
    if not data.strip():
        raise bad("is empty")
    try:
        obj = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise bad(f"is not valid JSON (truncated or damaged: {e})") from None
    problem = field_problem(obj, required or {}, "it")
    if problem is not None:
        raise bad(problem.removeprefix("it "))
    if rows is not None:
        field, item_fields = rows
        for i, item in enumerate(obj.get(field) or []):
            problem = field_problem(item, item_fields, f"{field}[{i}]")
            if problem is not None:
                raise bad(f"is damaged: {problem}")
    return obj
