"""A log of the runs a process read and the figures it wrote, for ``fedrepro reproduce``'s checks.

With ``FEDREPRO_TRACE`` set to a file, :func:`fedrepro.run` appends one line per run it returns
(its hash, and whether it had to train it) and :func:`fedrepro.app.figures.savefig` one per figure.
``reproduce`` gives every notebook it renders its own file, so that it can say which runs a
notebook read, which of them the plan missed (the notebook trained them itself) and which figures
it wrote. Unset, nothing is written.

A trace lies in the output root, which whoever shares it can write (docs/reliability.md, "Threat
model"): it is appended to without following a link, and read bounded and without a
``RecursionError``; a damaged line is a one-line error naming the file, never a run silently left
out of what ``fedrepro archive`` packs.
"""
from __future__ import annotations

import errno
import json
import os
from pathlib import Path

from ..errors import CorruptCacheError
from .atomic import write_error
from .jsonfiles import MAX_INPUT_BYTES, RefusedFile, loads, read_plain_file

ENV = "FEDREPRO_TRACE"
# What each kind of event holds, and of which type (what the readers of a trace use); an event of
# another kind (a later version's) needs only its name.
_FIELDS = {"run": {"event": str, "hash": str, "trained": bool}, "figure": {"event": str, "path": str}}
_APPEND = (os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0)
           | getattr(os, "O_CLOEXEC", 0))
_FIX = "delete it and render its notebook again (fedrepro reproduce --only <its notebook>)"


def notebook_file(notebook: str) -> str:
    """The name of the trace file ``reproduce`` gives the notebook at ``notebook`` (its path under
    ``notebooks/``): ``"pfedcspc/01_x.ipynb"`` → ``"pfedcspc__01_x.ipynb.jsonl"``."""
    return notebook.replace("/", "__") + ".jsonl"


def active() -> bool:
    """Whether this process is traced (a notebook that ``fedrepro reproduce`` renders)."""
    return bool(os.environ.get(ENV))


def record(event: str, **fields) -> None:
    path = os.environ.get(ENV)
    if not path:
        return
    line = (json.dumps({"event": event, **fields}) + "\n").encode()
    try:
        # Never through a link planted in place of the trace (it would append to any file its
        # planter names); O_APPEND: the processes of one notebook append whole lines side by side.
        fd = os.open(path, _APPEND, 0o666)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise CorruptCacheError(f"trace file {path} is a symbolic link, not a file fedrepro wrote "
                                    f"(refused: it may point anywhere); delete it") from None
        raise write_error(e, Path(path), f"unset {ENV}") from e
    try:
        # One short line per write: whole lines survive a crash (only the last can be torn).
        while line:
            line = line[os.write(fd, line):]
    except OSError as e:
        raise write_error(e, Path(path), f"unset {ENV}") from e
    finally:
        os.close(fd)


def _event(line: bytes) -> tuple[dict | None, str]:
    """The event on ``line``, or None and what is wrong with it."""
    try:
        event = loads(line)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        return None, f"is not JSON ({e})"
    if not isinstance(event, dict) or not isinstance(event.get("event"), str):
        return None, "is not an event"
    for key, kind in _FIELDS.get(event["event"], {"event": str}).items():
        if not isinstance(event.get(key), kind):
            return None, f"has no {key} of type {kind.__name__} in its {event['event']} event"
    return event, ""


def read(path: str | os.PathLike) -> list[dict]:
    """The events of the trace ``path`` ([] when there is none: a process that read no run and
    wrote no figure). A damaged one is a one-line :class:`CorruptCacheError` naming it, since a line
    skipped would drop a run from what ``archive`` packs or ``reproduce`` reports; only a last line
    without its newline (an append torn by a crash, which the render it belongs to did not survive)
    is left out."""
    p = Path(path)
    try:
        # Bounded, and never a FIFO or a device (a trace is kilobytes); a link is followed, as a
        # user may keep the output root's folders elsewhere.
        data = read_plain_file(p, MAX_INPUT_BYTES, follow_links=True)
    except FileNotFoundError:
        return []
    except RefusedFile as e:
        raise CorruptCacheError(f"trace file {p} {e}; {_FIX}") from None
    lines = data.split(b"\n")
    if lines[-1]:
        lines.pop()  # torn by a crash
    out = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        event, problem = _event(line)
        if event is None:
            raise CorruptCacheError(f"trace file {p} is damaged: line {number} {problem}; {_FIX}")
        out.append(event)
    return out
