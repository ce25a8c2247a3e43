"""A log of the runs a process read and the figures it wrote, for ``fedrepro reproduce``'s checks.

With ``FEDREPRO_TRACE`` set to a file, :func:`fedrepro.run` appends one line per run it returns
(its hash, and whether it had to train it) and :func:`fedrepro.app.figures.savefig` one per figure.
``reproduce`` gives every notebook it renders its own file, so that it can say which runs a
notebook read, which of them the plan missed (the notebook trained them itself) and which figures
it wrote. Unset, nothing is written.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

ENV = "FEDREPRO_TRACE"
# What each kind of event holds (what the readers of a trace use); a line without them is skipped.
_FIELDS = {"run": ("event", "hash", "trained"), "figure": ("event", "path")}


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
    with open(path, "a", encoding="utf-8") as f:  # one short line per append: whole lines survive a crash
        f.write(json.dumps({"event": event, **fields}) + "\n")


def read(path: str | os.PathLike) -> list[dict]:
    p = Path(path)
    if not p.is_file():
        return []
    out = []
    # A log, not a record: a line torn by a crash (or garbled) says nothing and is skipped, and the
    # rest is still read.
    for line in p.read_bytes().decode("utf-8", errors="replace").splitlines():
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(event, dict) and all(key in event for key in _FIELDS.get(event.get("event"), ("event",))):
            out.append(event)
    return out
