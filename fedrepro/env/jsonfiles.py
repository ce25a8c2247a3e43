"""Reading the JSON files that commands take as input besides run folders: the claims the notebooks
recorded, their verdicts by round, the report of a ``reproduce`` pass.

A file that is torn, emptied, garbled or of the wrong shape (``{}``, a field missing or of the wrong
type) is a one-line :class:`~fedrepro.errors.CorruptCacheError` that names it and says what to
do, never a traceback from deep inside the page that reads it. Such a file is read only when it is a
regular file of at most :data:`MAX_INPUT_BYTES` (:func:`read_plain_file`: a FIFO, a device such as
``/dev/zero`` or a sparse file of terabytes is refused before it is read, never waited on or read
into memory), and parsed by :func:`loads`, for which a document nested deeper than Python's
recursion limit is damage like any other, not a ``RecursionError``.

The same two readers serve the results store (:mod:`fedrepro.runs.store`) and the reference
archive, whose files are input from whoever can write them (docs/reliability.md, "Threat model").
"""
from __future__ import annotations

import errno
import json
import os
import reprlib
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Union

from ..errors import CorruptCacheError

# A field that holds a number (a JSON true is not one).
NUMBER = (int, float)
# The most bytes an input JSON file (a claims record, a timings report, a seed stages file) may
# hold: such a file is kilobytes, so only one that is not (a planted or runaway one) is refused.
MAX_INPUT_BYTES = 64 << 20

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)


class RefusedFile(Exception):
    """A file :func:`read_plain_file` would not read; its text says why ("is a symbolic link ...")."""


def read_plain_file(path: str | Path, limit: int, follow_links: bool = False) -> bytes:
    """The bytes of ``path``, read only when it is a regular file (not a FIFO, a device or a folder,
    and, unless ``follow_links``, not a symbolic link) of at most ``limit`` bytes: opened without
    blocking (and without following a link), then checked on the open descriptor, so that what is
    checked is what is read. Otherwise, or when it cannot be read, :class:`RefusedFile` saying why
    (FileNotFoundError when it does not exist)."""
    flags = _OPEN_FLAGS | (0 if follow_links else _NOFOLLOW)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise
    except ValueError as e:  # a NUL byte in the name: no file has it
        raise RefusedFile(f"has a name no file can have ({e})") from e
    except OSError as e:
        if e.errno == errno.ELOOP and _NOFOLLOW and not follow_links:
            raise RefusedFile("is a symbolic link, not a file fedrepro wrote (refused: it may point anywhere)") from e
        raise RefusedFile(f"is unreadable ({e.strerror or e})") from e
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise RefusedFile("is not a regular file (a FIFO, device or folder; refused)")
        if st.st_size > limit:
            raise RefusedFile(f"holds {st.st_size} bytes, more than the {limit} a file of its kind may hold")
        chunks, left = [], limit + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 24))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
        if len(data) > limit:
            raise RefusedFile(f"grew past the {limit} bytes a file of its kind may hold while it was read")
        return data
    except OSError as e:
        raise RefusedFile(f"is unreadable ({e.strerror or e})") from e
    finally:
        os.close(fd)


def loads(data: bytes | str) -> Any:
    """``json.loads(data)``, where a document nested deeper than Python's recursion limit (``[[[...``
    a hundred thousand deep: a few hundred kilobytes) is a ``json.JSONDecodeError`` like any other
    damage, not a ``RecursionError`` that escapes every handler written for damaged files."""
    try:
        return json.loads(data)
    except RecursionError:
        raise json.JSONDecodeError("nested too deeply to be a file fedrepro wrote", "", 0) from None


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
        # Bounded, and never a FIFO or a device: a link is followed (a user may name one), but a link
        # to /dev/zero or a planted FIFO is refused before it is read or waited on.
        data = read_plain_file(path, MAX_INPUT_BYTES, follow_links=True)
    except FileNotFoundError as e:
        raise bad(f"cannot be read ({e.strerror or e})") from None
    except RefusedFile as e:
        raise bad(str(e)) from None
    if not data.strip():
        raise bad("is empty")
    try:
        obj = loads(data)
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
