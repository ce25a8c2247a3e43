"""CIFAR-10 and CIFAR-100 loaders reading torchvision's on-disk (python pickle) format.

The batches are pickles, and unpickling runs arbitrary code, so they are read
with an unpickler that only admits the handful of numpy globals CIFAR actually
contains: a tampered file in a shared data root then fails instead of executing.

At an ``image_size`` other than 32 the images are resized when they are read out, not on load
(:class:`ResizedImages`): a run takes a subset of the dataset (``data.max_train``, the rehearsal's
cut) and its clients' splits, so it resizes those images only. CIFAR at ViT-B/16's 224 px
(PEP-FedPT) held all 60,000 images at 224 px, 9 GB a process, before any run chose its images.
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


class ResizedImages(torch.Tensor):
    """uint8 ``[N, C, size, size]``: the images ``source`` (uint8 ``[N, C, h, w]``) resized with
    :func:`resize_images`, each when it is read out and never kept.

    Indexing the images (``x[rows]``, ``x[rows, channel]``: a subset, a client's split, a channel of
    all of them) resizes only the images and channels it selects and gives a plain tensor. Bicubic
    resizing computes each output pixel from its own image and channel alone, so these are the very
    values a resize of the whole set holds (tests/data/test_cifar_resized.py checks it). Any other
    operation (``.float()``, ``torch.cat``, ``.to(device)``) resizes all of them first and works on
    that, as on the tensor the loader returned before. Shape, dtype, device and size queries read the
    shape it stands for and resize nothing; pickling keeps the small images and the size."""

    @staticmethod
    def __new__(cls, source: torch.Tensor, size: int) -> ResizedImages:
        shape = (source.shape[0], source.shape[1], size, size)
        self = torch.Tensor._make_wrapper_subclass(cls, shape, dtype=torch.uint8, device=source.device)
        self.source, self.side = source, size
        return self

    def resized(self, index: Any = slice(None)) -> torch.Tensor:
        """``self[index]`` as a plain tensor, resizing only the images (and, for a channel index after
        them, the channels) that ``index`` selects."""
        rows, rest = (index[0], index[1:]) if isinstance(index, tuple) else (index, ())
        n, channels = self.source.shape[:2]
        basic = all(isinstance(r, slice) or (isinstance(r, int) and not isinstance(r, bool)) for r in rest)
        if not basic or rows is None or rows is Ellipsis or isinstance(rows, (bool, tuple)):
            return resize_images(self.source, self.side)[index]  # a layout this does not cut: the whole set
        if isinstance(rows, torch.Tensor) and rows.dim() == 0 and rows.dtype != torch.bool:
            rows = int(rows)
        if isinstance(rows, int):  # one image: a batch of one, then dropped
            if not -n <= rows < n:
                raise IndexError(f"index {rows} is out of bounds for dimension 0 with size {n}")
            return self.resized((slice(rows % n, rows % n + 1), *rest))[0]
        picked = self.source[rows]
        if rest and isinstance(rest[0], int):  # one channel: resize that channel alone (norm statistics)
            if not -channels <= rest[0] < channels:
                raise IndexError(f"index {rest[0]} is out of bounds for dimension 1 with size {channels}")
            c = rest[0] % channels
            return resize_images(picked[:, c:c + 1], self.side)[(slice(None), 0, *rest[1:])]
        if rest:
            return resize_images(picked[:, rest[0]], self.side)[(slice(None), slice(None), *rest[1:])]
        return resize_images(picked, self.side)

    def __reduce_ex__(self, protocol: Any) -> tuple:
        return ResizedImages, (self.source, self.side)  # pickled as it is: the small images and the size

    def __deepcopy__(self, memo: dict) -> ResizedImages:
        return ResizedImages(self.source.clone(), self.side)

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if func is torch.Tensor.__getitem__ and type(args[0]) is cls:
            return args[0].resized(args[1])
        if func in _METADATA:
            with torch._C.DisableTorchFunctionSubclass():
                return func(*args, **(kwargs or {}))
        return func(*_whole(args), **_whole(kwargs or {}))

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        return func(*_whole(args), **_whole(kwargs or {}))


# What ResizedImages answers from the shape it stands for, resizing nothing (ImageDataset's checks,
# the pipeline's memory count); anything else resizes the whole set first.
_T = torch.Tensor
_METADATA = frozenset({_T.shape.__get__, _T.dtype.__get__, _T.device.__get__, _T.ndim.__get__, _T.is_cuda.__get__,
                       _T.layout.__get__, _T.requires_grad.__get__, _T.dim, _T.ndimension, _T.size, _T.__len__,
                       _T.numel, _T.nelement, _T.element_size, _T.is_floating_point, _T.is_complex})


def _whole(arg: Any) -> Any:
    """``arg`` (an operation's argument: a value, or a list, tuple or dict of them) with every
    :class:`ResizedImages` in it resized whole, a plain tensor."""
    if isinstance(arg, ResizedImages):
        return resize_images(arg.source, arg.side)
    if isinstance(arg, (list, tuple)):
        return type(arg)(map(_whole, arg)) if not hasattr(arg, "_fields") else type(arg)(*map(_whole, arg))
    if isinstance(arg, dict):
        return {k: _whole(v) for k, v in arg.items()}
    return arg


def resized(x: torch.Tensor, size: int) -> torch.Tensor:
    """``x`` at ``size`` x ``size``: itself at its own size, else resized as it is read (:class:`ResizedImages`)."""
    return x if tuple(x.shape[-2:]) == (size, size) else ResizedImages(x, size)


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

    ``image_size`` (default 32, the native size) resizes the images, e.g. to the 224x224 a ViT-B/16 or
    CLIP reads, as they are read out (:class:`ResizedImages`): the 60000 images would take 9 GB at 224.
    """
    image_size = check_image_size(image_size)
    folder = root / "cifar-10-batches-py"
    _locate("cifar10", folder, [*_C10_TRAIN, "test_batch", "batches.meta"], root, download, "CIFAR10")
    train_x, train_y = _read_batches([folder / f for f in _C10_TRAIN], b"labels")
    test_x, test_y = _read_batches([folder / "test_batch"], b"labels")
    classes = _names(folder / "batches.meta", b"label_names")
    return ImageDataset("cifar10", resized(train_x, image_size), train_y, resized(test_x, image_size), test_y,
                        classes)


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
    return ImageDataset("cifar100", resized(train_x, image_size), train_y, resized(test_x, image_size), test_y,
                        classes)


def _cifar100_files(root: Path, **_: object) -> tuple[Path, list[Path]]:
    """The files :func:`load_cifar100` reads."""
    folder = root / "cifar-100-python"
    return folder, [folder / f for f in ("train", "test", "meta")]


load_cifar100.input_files = _cifar100_files  # type: ignore[attr-defined]
