"""The IDX reader: truncated files (gzip or raw) are reported as corrupt, bad magic and dims raise."""
from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest

from fedrepro.data import load_dataset
from fedrepro.data.idx import read_idx
from fedrepro.errors import CorruptCacheError

from .fmnist_files import idx_bytes, write_fake_fmnist

pytestmark = pytest.mark.usefixtures("_isolated")


def test_truncated_idx_gz_raises_corrupt(tmp_path: Path) -> None:
    write_fake_fmnist(tmp_path / "fashion_mnist")
    f = tmp_path / "fashion_mnist" / "train-images-idx3-ubyte.gz"
    f.write_bytes(f.read_bytes()[:-40])
    with pytest.raises(CorruptCacheError, match="train-images-idx3-ubyte.gz"):
        load_dataset("fashion_mnist", root=tmp_path)


def test_truncated_idx_raw_raises_corrupt(tmp_path: Path) -> None:
    write_fake_fmnist(tmp_path / "fashion_mnist", gz=False)
    f = tmp_path / "fashion_mnist" / "t10k-images-idx3-ubyte"
    f.write_bytes(f.read_bytes()[:-1])
    with pytest.raises(CorruptCacheError, match="t10k-images-idx3-ubyte"):
        load_dataset("fashion_mnist", root=tmp_path)


def test_idx_bad_magic_and_dims(tmp_path: Path) -> None:
    bad = tmp_path / "bad"
    bad.write_bytes(b"\x12\x34\x08\x01" + struct.pack(">I", 1) + b"\x00")
    with pytest.raises(CorruptCacheError, match="magic"):
        read_idx(bad)
    ok = tmp_path / "ok"
    ok.write_bytes(idx_bytes(np.zeros((2, 3), np.uint8)))
    assert read_idx(ok).shape == (2, 3)
    with pytest.raises(CorruptCacheError, match="dimensions"):
        read_idx(ok, expect_ndim=3)
