"""Reader for the IDX format used by (Fashion-)MNIST, gzipped or not.

Parsed with numpy directly (no torchvision dependency for reading) and checked
strictly: a truncated download must fail loudly, not yield a short dataset.
"""
from __future__ import annotations

import gzip
import hashlib
import zlib
from collections.abc import Collection
from pathlib import Path

import numpy as np

from ..errors import CorruptCacheError

# Third magic byte -> element dtype (big-endian, as the format specifies).
_DTYPES = {
    0x08: np.dtype(np.uint8),
    0x09: np.dtype(np.int8),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}


def _read_bytes(path: Path) -> bytes:
    try:
        if path.suffix == ".gz":
            with gzip.open(path, "rb") as f:
                return f.read()
        return path.read_bytes()
    except (EOFError, OSError, zlib.error) as exc:  # truncated gzip -> EOFError, garbage -> BadGzipFile
        raise CorruptCacheError(
            f"IDX file {path} is corrupt or truncated ({type(exc).__name__}: {exc}); delete it and fetch it again"
        ) from exc


def read_idx(path: str | Path, expect_ndim: int | None = None, sha256: Collection[str] | None = None,
             what: str = "the expected file") -> np.ndarray:
    """Read an IDX file into an array of its declared dtype and shape.

    Raises :class:`CorruptCacheError` naming ``path`` on a bad magic number,
    a wrong number of dimensions, or a payload whose size does not match the header; and, when
    ``sha256`` is given, when the sha256 of its IDX bytes (decompressed) is none of those digests:
    a damaged copy of the right size parses as well as the real one (``what`` names the real one).
    """
    path = Path(path)
    raw = _read_bytes(path)

    def corrupt(why: str) -> CorruptCacheError:
        return CorruptCacheError(f"IDX file {path} is corrupt: {why}; delete it and fetch it again")

    if len(raw) < 4:
        raise corrupt(f"only {len(raw)} bytes")
    if raw[0] != 0 or raw[1] != 0 or raw[2] not in _DTYPES:
        raise corrupt(f"bad magic number 0x{raw[:4].hex()}")
    dtype, ndim = _DTYPES[raw[2]], raw[3]
    if expect_ndim is not None and ndim != expect_ndim:
        raise corrupt(f"expected {expect_ndim} dimensions, header says {ndim}")
    header = 4 + 4 * ndim
    if len(raw) < header:
        raise corrupt("header is truncated")
    shape = tuple(int(d) for d in np.frombuffer(raw, dtype=">u4", count=ndim, offset=4))
    expected = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if len(raw) - header != expected:
        raise corrupt(f"payload is {len(raw) - header} bytes, header {shape} needs {expected}")
    if sha256 is not None:
        got = hashlib.sha256(raw).hexdigest()
        if got not in sha256:
            raise CorruptCacheError(
                f"IDX file {path} is not {what}: its content's sha256 is {got[:16]}..., expected "
                f"{' or '.join(sorted(d[:16] + '...' for d in sha256))}; it is damaged or another file: "
                f"delete it and fetch it again")
    # frombuffer is zero-copy over `raw`; astype gives a writable native-endian array.
    return np.frombuffer(raw, dtype=dtype, offset=header).reshape(shape).astype(dtype.newbyteorder("="))
