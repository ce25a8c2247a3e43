"""CIFAR-10 and CIFAR-100 loaders reading torchvision's on-disk (python pickle) format.

The batches are pickles, and unpickling runs arbitrary code, so they are read
with an unpickler that only admits the handful of numpy globals CIFAR actually
contains: a tampered file in a shared data root then fails instead of executing.
"""
from __future__ import annotations

import codecs
import pickle
from pathlib import Path
from typing import Any

import numpy as np
import numpy._core.multiarray as _multiarray
import torch

from ..errors import CorruptCacheError
from ..params import check_value
from .base import ImageDataset
from .imaging import check_image_size, resize_images
from .registry import DATASETS
from .root import data_not_found

_SAFE_GLOBALS: dict[tuple[str, str], Any] = {
    ("numpy.core.multiarray", "_reconstruct"): _multiarray._reconstruct,
    ("numpy._core.multiarray", "_reconstruct"): _multiarray._reconstruct,
    ("numpy.core.multiarray", "scalar"): _multiarray.scalar,
    ("numpy._core.multiarray", "scalar"): _multiarray.scalar,
    ("numpy", "ndarray"): np.ndarray,
    ("numpy", "dtype"): np.dtype,
    # protocol-2 pickles written by Python 3 encode bytes objects through this
    ("_codecs", "encode"): codecs.encode,
}


class _NumpyOnlyUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        try:
            return _SAFE_GLOBALS[(module, name)]
        except KeyError:
            raise pickle.UnpicklingError(f"refusing to load global {module}.{name}") from None


def read_cifar_pickle(path: Path) -> dict[bytes, Any]:
    """Unpickle one CIFAR batch/meta file (``encoding="bytes"``, as they were written by Python 2)."""
    try:
        with open(path, "rb") as f:
            obj = _NumpyOnlyUnpickler(f, encoding="bytes").load()
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError, IndexError) as exc:
        raise CorruptCacheError(
            f"CIFAR file {path} is corrupt or truncated ({type(exc).__name__}: {exc}); "
            f"delete its folder and fetch it again"
        ) from exc
    if not isinstance(obj, dict):
        raise CorruptCacheError(f"CIFAR file {path} holds a {type(obj).__name__}, expected a dict")
    return obj


def _field(d: dict[bytes, Any], key: bytes, path: Path) -> Any:
    try:
        return d[key]
    except KeyError:
        have = ", ".join(k.decode(errors="replace") if isinstance(k, bytes) else str(k) for k in d)
        raise CorruptCacheError(f"CIFAR file {path} has no {key.decode()!r} entry (has: {have})") from None


def _read_batches(paths: list[Path], label_key: bytes) -> tuple[torch.Tensor, torch.Tensor]:
    xs, ys = [], []
    for p in paths:
        d = read_cifar_pickle(p)
        data = np.asarray(_field(d, b"data", p), dtype=np.uint8)
        labels = np.asarray(_field(d, label_key, p), dtype=np.int64)
        if data.ndim != 2 or data.shape[1] != 3 * 32 * 32 or len(data) != len(labels):
            raise CorruptCacheError(
                f"CIFAR file {p}: data {data.shape} / {len(labels)} labels, expected [N, 3072] / N"
            )
        # Rows are channel-major (1024 R, 1024 G, 1024 B), i.e. already CHW.
        xs.append(data.reshape(-1, 3, 32, 32))
        ys.append(labels)
    return torch.from_numpy(np.concatenate(xs)), torch.from_numpy(np.concatenate(ys))


def _names(meta_path: Path, key: bytes) -> list[str]:
    meta = read_cifar_pickle(meta_path)
    return [n.decode() if isinstance(n, bytes) else str(n) for n in _field(meta, key, meta_path)]


def _locate(name: str, folder: Path, files: list[str], root: Path, download: bool, tv_class: str) -> None:
    """Make sure ``folder`` holds ``files``, downloading with torchvision if allowed."""
    missing = [f for f in files if not (folder / f).is_file()]
    if not missing:
        return
    reason = f"Missing: {', '.join(missing)}."
    if download:
        try:
            import torchvision.datasets as tvd

            root.mkdir(parents=True, exist_ok=True)
            getattr(tvd, tv_class)(str(root), train=True, download=True)
        except Exception as exc:  # network, disk, checksum: all mean "still not here"
            reason += f" Download into {root} failed: {type(exc).__name__}: {exc}"
        else:
            if all((folder / f).is_file() for f in files):
                return
    raise data_not_found(
        name,
        [folder],
        downloadable=True,
        manual=f"download and extract the python version of {tv_class} from "
        f"https://www.cs.toronto.edu/~kriz/cifar.html into {root}",
        reason=reason,
    )


_C10_TRAIN = [f"data_batch_{i}" for i in range(1, 6)]


@DATASETS.register("cifar10")
def load_cifar10(root: Path, download: bool, image_size: int = 32) -> ImageDataset:
    """CIFAR-10 from ``<root>/cifar-10-batches-py``: 50000/10000 RGB 32x32, 10 classes.

    ``image_size`` (default 32, the native size) resizes every image on load, e.g. to the 224x224
    a ViT-B/16 or CLIP reads: 60000 images then take 9 GB as uint8.
    """
    image_size = check_image_size(image_size)
    folder = root / "cifar-10-batches-py"
    _locate("cifar10", folder, [*_C10_TRAIN, "test_batch", "batches.meta"], root, download, "CIFAR10")
    train_x, train_y = _read_batches([folder / f for f in _C10_TRAIN], b"labels")
    test_x, test_y = _read_batches([folder / "test_batch"], b"labels")
    classes = _names(folder / "batches.meta", b"label_names")
    return ImageDataset("cifar10", resize_images(train_x, image_size), train_y, resize_images(test_x, image_size),
                        test_y, classes)


def _cifar10_files(root: Path, **_: object) -> tuple[Path, list[Path]]:
    """The files :func:`load_cifar10` reads (digested into its runs: :func:`fedrepro.data.registry.input_digest`)."""
    folder = root / "cifar-10-batches-py"
    return folder, [folder / f for f in (*_C10_TRAIN, "test_batch", "batches.meta")]


load_cifar10.input_files = _cifar10_files  # type: ignore[attr-defined]

_LABEL_TYPES = {"fine": (b"fine_labels", b"fine_label_names"), "coarse": (b"coarse_labels", b"coarse_label_names")}


@DATASETS.register("cifar100")
def load_cifar100(root: Path, download: bool, label_type: str = "fine", image_size: int = 32) -> ImageDataset:
    """CIFAR-100 from ``<root>/cifar-100-python``: 50000/10000 RGB 32x32.

    ``label_type="fine"`` gives the 100 classes, ``"coarse"`` the 20 superclasses; ``image_size``
    resizes as for CIFAR-10.
    """
    image_size = check_image_size(image_size)
    check_value("label_type", label_type, str, choices=tuple(_LABEL_TYPES))
    label_key, names_key = _LABEL_TYPES[label_type]
    folder = root / "cifar-100-python"
    _locate("cifar100", folder, ["train", "test", "meta"], root, download, "CIFAR100")
    train_x, train_y = _read_batches([folder / "train"], label_key)
    test_x, test_y = _read_batches([folder / "test"], label_key)
    classes = _names(folder / "meta", names_key)
    return ImageDataset("cifar100", resize_images(train_x, image_size), train_y, resize_images(test_x, image_size),
                        test_y, classes)


def _cifar100_files(root: Path, **_: object) -> tuple[Path, list[Path]]:
    """The files :func:`load_cifar100` reads."""
    folder = root / "cifar-100-python"
    return folder, [folder / f for f in ("train", "test", "meta")]


load_cifar100.input_files = _cifar100_files  # type: ignore[attr-defined]
