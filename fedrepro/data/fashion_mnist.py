"""Fashion-MNIST loader: IDX files from fedrepro's, torchvision's or Debian's layout.

Searching several layouts means an existing torchvision download or the
``dataset-fashion-mnist`` Debian package is used as-is, with no copy and no
network access.
"""
from __future__ import annotations

from pathlib import Path
from types import MappingProxyType

import torch

from ..errors import CorruptCacheError
from .base import ImageDataset
from .idx import read_idx
from .registry import DATASETS
from .root import data_not_found

CLASSES = (
    "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
    "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot",
)
# Installed by `apt-get install dataset-fashion-mnist`.
DEBIAN_DIR = Path("/usr/share/datasets/fashion-mnist")

_FILES = {
    "train_x": "train-images-idx3-ubyte",
    "train_y": "train-labels-idx1-ubyte",
    "test_x": "t10k-images-idx3-ubyte",
    "test_y": "t10k-labels-idx1-ubyte",
}
# What each file is, for the message of a file that is not what it should be.
_WHAT = {"train_x": "the Fashion-MNIST training images", "train_y": "the Fashion-MNIST training labels",
         "test_x": "the Fashion-MNIST test images", "test_y": "the Fashion-MNIST test labels"}
# The manifest: sha256 of each file's IDX bytes (decompressed, so that a .gz of any compressor and
# torchvision's unpacked copy check alike), computed from Debian's dataset-fashion-mnist. Its labels
# are byte for byte those of the published .gz files (md5 25c81989df183df01b3e8a0aad5dffbe and
# bb300cfdad3c16e7a12a480ee83cd310, as zalandoresearch/fashion-mnist holds them), and its images have
# the published pixel statistics (train mean 0.2860, std 0.3530). Every read is checked against it:
# a damaged copy of the right size parses as well as the real file, and no config hash would tell
# the run it trains apart from the real one.
MANIFEST = MappingProxyType({
    "train-images-idx3-ubyte": frozenset({"c59f468a2f672dc815687fe0f83887768d799fd8a3f3276145d20f83aa44d888"}),
    "train-labels-idx1-ubyte": frozenset({"bad3541b69d912435c50bb6ba87bec294ff4f6a2e1246121d8633921760443d9"}),
    "t10k-images-idx3-ubyte": frozenset({"5b4141f0afbad91edebe8549f8fcffe087ea10ca49f1dbef5c9a5cd8815ce37b"}),
    "t10k-labels-idx1-ubyte": frozenset({"0402a96d92fd2663957122ceb108a494c5af83dab82d92729df917d7dec38c34"}),
})


def candidate_dirs(root: Path) -> list[Path]:
    """Folders searched, in order: fedrepro's layout, torchvision's layout, the Debian package."""
    return [root / "fashion_mnist", root / "FashionMNIST" / "raw", DEBIAN_DIR]


def _find_files(folder: Path) -> dict[str, Path] | None:
    """The four IDX files in ``folder`` (uncompressed preferred: faster), or None if any is missing."""
    found = {}
    for key, stem in _FILES.items():
        for name in (stem, stem + ".gz"):
            if (folder / name).is_file():
                found[key] = folder / name
                break
        else:
            return None
    return found


def _download(root: Path) -> None:
    # torchvision only for fetching: it knows the mirrors and checksums.
    from torchvision.datasets import FashionMNIST

    root.mkdir(parents=True, exist_ok=True)
    for train in (True, False):
        FashionMNIST(str(root), train=train, download=True)


def _read(files: dict[str, Path], key: str, ndim: int):
    return read_idx(files[key], expect_ndim=ndim, sha256=MANIFEST[_FILES[key]], what=_WHAT[key])


def _read_split(files: dict[str, Path], split: str) -> tuple[torch.Tensor, torch.Tensor]:
    xf, yf = files[f"{split}_x"], files[f"{split}_y"]
    x = _read(files, f"{split}_x", 3)
    y = _read(files, f"{split}_y", 1)
    # Past the manifest only what it admits: these checks name the file at fault should it admit more.
    if len(x) != len(y):
        raise CorruptCacheError(f"{xf} has {len(x)} images but {yf} has {len(y)} labels; delete both and fetch them "
                                f"again")
    if x.shape[1:] != (28, 28):
        raise CorruptCacheError(f"{xf} does not hold Fashion-MNIST images (shape {x.shape}, expected [N, 28, 28]); "
                                f"delete it and fetch it again")
    if len(y) and int(y.max()) >= len(CLASSES):
        raise CorruptCacheError(f"{yf} does not hold Fashion-MNIST labels (label {int(y.max())}, expected 0-9); "
                                f"delete it and fetch it again")
    return torch.from_numpy(x).unsqueeze(1), torch.from_numpy(y.astype("int64"))


def find_fashion_mnist(root: Path, download: bool) -> dict[str, Path]:
    """Locate the four IDX files, downloading into ``root`` if allowed and absent."""
    searched = candidate_dirs(root)
    for folder in searched:
        files = _find_files(folder)
        if files is not None:
            return files
    reason = None
    if download:
        try:
            _download(root)
        except Exception as exc:  # network, disk, checksum: all mean "still not here"
            reason = f"Download into {root} failed: {type(exc).__name__}: {exc}"
        else:
            files = _find_files(root / "FashionMNIST" / "raw")
            if files is not None:
                return files
            reason = f"Download into {root} finished but the IDX files are not in {root / 'FashionMNIST' / 'raw'}"
    raise data_not_found(
        "fashion_mnist",
        searched,
        downloadable=True,
        manual=(
            "on Debian/Ubuntu: apt-get install dataset-fashion-mnist; or copy "
            "train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz, t10k-images-idx3-ubyte.gz, "
            f"t10k-labels-idx1-ubyte.gz into {root / 'fashion_mnist'}"
        ),
        reason=reason,
    )


@DATASETS.register("fashion_mnist")
def load_fashion_mnist(root: Path, download: bool) -> ImageDataset:
    """Fashion-MNIST: 60000/10000 grey 28x28 images, 10 classes; [N, 1, 28, 28] uint8."""
    files = find_fashion_mnist(root, download)
    train_x, train_y = _read_split(files, "train")
    test_x, test_y = _read_split(files, "test")
    return ImageDataset("fashion_mnist", train_x, train_y, test_x, test_y, list(CLASSES))
