"""Seeded random images in the on-disk formats of the paper profile's datasets, at their real
shapes, for rehearsing the paper profile where the real data is not installed (a data root for
``fedrepro.app.reproduce.reproduce(..., rehearse=True, rehearsal_data=...)``)."""
from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np

CIFAR_TRAIN, CIFAR_TEST = 50_000, 10_000


def _labels(rng: np.random.Generator, n: int, classes: int) -> list[int]:
    return rng.permutation(np.arange(n) % classes).tolist()


def _images(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.integers(0, 256, size=(n, 3 * 32 * 32), dtype=np.uint8)


def _dump(obj: dict, path: Path) -> None:
    with open(path, "wb") as f:
        pickle.dump(obj, f, protocol=2)


def write_cifar10(root: Path, seed: int = 0) -> None:
    folder = root / "cifar-10-batches-py"
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    per = CIFAR_TRAIN // 5
    for i in range(1, 6):
        _dump({b"data": _images(rng, per), b"labels": _labels(rng, per, 10)}, folder / f"data_batch_{i}")
    _dump({b"data": _images(rng, CIFAR_TEST), b"labels": _labels(rng, CIFAR_TEST, 10)}, folder / "test_batch")
    _dump({b"label_names": [f"class{i}".encode() for i in range(10)]}, folder / "batches.meta")


def write_cifar100(root: Path, seed: int = 1) -> None:
    folder = root / "cifar-100-python"
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    for name, n in (("train", CIFAR_TRAIN), ("test", CIFAR_TEST)):
        fine = _labels(rng, n, 100)
        _dump({b"data": _images(rng, n), b"fine_labels": fine, b"coarse_labels": [y // 5 for y in fine]},
              folder / name)
    _dump({b"fine_label_names": [f"fine{i}".encode() for i in range(100)],
           b"coarse_label_names": [f"coarse{i}".encode() for i in range(20)]}, folder / "meta")


def write_image_folder(folder: Path, domains: tuple[str, ...], classes: int, per_class: int, seed: int = 2) -> None:
    """``folder/<domain>/<class>/<i>.png``, 32x32 RGB (the loaders resize them to the setup's size)."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    for domain in domains:
        for c in range(classes):
            d = folder / domain / f"class{c:03d}"
            d.mkdir(parents=True, exist_ok=True)
            for i in range(per_class):
                Image.fromarray(rng.integers(0, 256, size=(32, 32, 3), dtype=np.uint8)).save(d / f"{i}.png")


def write_shaped_data(root: str | Path) -> Path:
    """CIFAR-10, CIFAR-100 (full size) and Caltech101 as an image folder (100 classes of 10 images,
    enough for FedOTP's 10 clients x 10 classes x 4 shots) under ``root``; written once."""
    root = Path(root)
    done = root / "done"
    if done.is_file():
        return root
    write_cifar10(root)
    write_cifar100(root)
    write_image_folder(root / "caltech101", ("images",), classes=100, per_class=10)
    done.write_text("ok")
    return root
