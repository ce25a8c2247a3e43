"""What a file for ``torch.load`` may be before it is read: one that cannot inflate.

``torch.save`` writes a zip archive whose entries are stored, not compressed, so a state takes as
many bytes in memory as on disk. ``torch.load`` also reads an archive whose entries are deflated,
and a deflated entry of zeros inflates about a thousand times: a planted 64 MiB file would take
64 GiB when read, whatever bound the reader put on the file's size (issue 53). :func:`inflation_problem`
refuses such an archive from its central directory (the entry table both Python's ``zipfile`` and
torch's reader go by), before torch reads a byte of it. A file in torch's legacy format (not a
zip) reads its storages from the file itself, so it cannot claim more than it holds.
"""
from __future__ import annotations

import io
import os
import zipfile
from typing import BinaryIO

# The first bytes of a zip archive (a local file header): torch.save's format since torch 1.6.
ZIP_MAGIC = b"PK\x03\x04"


def inflation_problem(data: bytes) -> str | None:
    """Why the torch file ``data`` could take more memory than its size when loaded (None when it
    cannot): a zip archive with a compressed entry, or one whose size is not what it takes in the
    archive. ``torch.save`` writes neither."""
    if not data.startswith(ZIP_MAGIC):
        return None
    return _entries_problem(io.BytesIO(data))


def file_inflation_problem(path: str | os.PathLike[str]) -> str | None:
    """:func:`inflation_problem` of the file ``path``, reading only its first bytes and its central
    directory (at its end), not its entries: a data cache or weights file of any size costs a few reads
    (the pre-flight check of a run's inputs, :mod:`fedrepro.runs.inputs`)."""
    with open(path, "rb") as f:
        if f.read(len(ZIP_MAGIC)) != ZIP_MAGIC:
            return None
        f.seek(0)
        return _entries_problem(f)


def _entries_problem(f: BinaryIO) -> str | None:
    try:
        entries = zipfile.ZipFile(f).infolist()
    except (zipfile.BadZipFile, ValueError, OSError, EOFError) as e:
        return f"is not a readable torch archive ({type(e).__name__}: {e})"
    bad = next((i for i in entries if i.compress_type != zipfile.ZIP_STORED or i.file_size != i.compress_size),
               None)
    if bad is not None:
        return (f"holds the compressed entry {bad.filename!r} ({bad.compress_size} bytes that inflate to "
                f"{bad.file_size}); torch.save writes none, so it was not written by fedrepro (refused unread: "
                "it could inflate to any size)")
    return None
