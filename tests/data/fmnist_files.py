"""Tiny Fashion-MNIST files in the true IDX format, for the Fashion-MNIST, IDX and Fashion-MNIST
domains loader tests.

The loader admits only files in its manifest (fedrepro.data.fashion_mnist.MANIFEST); the
``_isolated`` fixture (tests/data/conftest.py) gives each test a copy of it, to which
:func:`write_fake_fmnist` adds the files it writes. A file damaged afterwards is not in it."""
from __future__ import annotations

import gzip
import hashlib
import struct
from pathlib import Path

import numpy as np
import torch

import fedrepro.data.fashion_mnist as fm

DEBIAN = Path("/usr/share/datasets/fashion-mnist")


def idx_bytes(a: np.ndarray) -> bytes:
    assert a.dtype == np.uint8
    return struct.pack(">BBBB", 0, 0, 0x08, a.ndim) + struct.pack(f">{a.ndim}I", *a.shape) + a.tobytes()


def write_fake_fmnist(folder: Path, n_train: int = 60, n_test: int = 24, gz: bool = True, seed: int = 0) -> dict:
    """Write the four Fashion-MNIST IDX files; returns the arrays written."""
    rng = np.random.default_rng(seed)
    arrays = {
        "train-images-idx3-ubyte": rng.integers(0, 256, (n_train, 28, 28), dtype=np.uint8),
        "train-labels-idx1-ubyte": (np.arange(n_train) % 10).astype(np.uint8),
        "t10k-images-idx3-ubyte": rng.integers(0, 256, (n_test, 28, 28), dtype=np.uint8),
        "t10k-labels-idx1-ubyte": ((np.arange(n_test) * 3) % 10).astype(np.uint8),
    }
    folder.mkdir(parents=True, exist_ok=True)
    for name, a in arrays.items():
        # Outside _isolated the manifest is read-only: this fails rather than trust a fake for good.
        fm.MANIFEST[name] = fm.MANIFEST[name] | {hashlib.sha256(idx_bytes(a)).hexdigest()}
        if gz:
            with gzip.open(folder / f"{name}.gz", "wb") as f:
                f.write(idx_bytes(a))
        else:
            (folder / name).write_bytes(idx_bytes(a))
    return arrays


def check_fmnist(ds, arrays: dict) -> None:
    assert ds.name == "fashion_mnist"
    assert ds.train_x.shape == (len(arrays["train-labels-idx1-ubyte"]), 1, 28, 28)
    assert ds.train_x.dtype == torch.uint8 and ds.train_y.dtype == torch.int64
    assert np.array_equal(ds.train_x[:, 0].numpy(), arrays["train-images-idx3-ubyte"])
    assert np.array_equal(ds.test_y.numpy(), arrays["t10k-labels-idx1-ubyte"])
    assert ds.classes[0] == "T-shirt/top" and ds.classes[9] == "Ankle boot" and ds.num_classes == 10
