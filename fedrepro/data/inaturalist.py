"""The federated iNaturalist of Hsu et al. (ECCV 2020), "iNaturalist-User-120k": iNaturalist 2017
images split by the user who took them.

Layout under the data root (default folder ``<root>/inaturalist``, or ``path=``)::

    inaturalist/
      train_val_images/<supercategory>/<species>/<image_id>.jpg     iNaturalist 2017's image archive
      inaturalist-user-120k/federated_train_user_120k.csv           the federated split (train)
      inaturalist-user-120k/test.csv                                its test split

The split files are the ``inaturalist-user-120k.zip`` of Google Research's ``federated_vision_datasets``:
one header line, then one row per image. The train file's columns are ``user_id,image_id,class,label``
and the test file's ``image_id,class,label`` (the test split names no user): ``image_id`` is the
image's file name without ``.jpg`` anywhere under ``train_val_images``, ``class`` the label used by
Hsu et al. (0-1202) and ``label`` iNaturalist 2017's own category id (not read). The column names
the loader reads are options (``user_column``, ``image_column``, ``class_column``), as are the two
files' paths relative to the folder, so the release's geo splits (or a renamed copy) read the same.

The release has 120,300 training images of 9,275 users and 35,641 test images, of 1,203 classes.
Labels keep the release's class ids (the class count is the largest id + 1); a class is named by
the species folder of its images. ``train_user`` holds each training image's user as an index into
the users' ids in increasing order (numerically where every id is a number); rows with an empty or
``NA`` user belong to no user and are left out. Decoded images are cached per image size, keyed by
the split files' and the listed images' contents, and checked against the cache's own digest on every
read (:mod:`.verified_cache`); with the images gone, a sound cache of the same split files stands in
for them.
"""
from __future__ import annotations

import csv
import hashlib
import os
import warnings
from pathlib import Path

import torch

from ..errors import CorruptCacheError
from ..params import check_value
from .base import ImageDataset
from .digest import files_digest
from .imaging import check_image_size, decode_images
from .registry import DATASETS
from .root import data_not_found
from .verified_cache import load_verified, save_verified

FOLDER = "inaturalist"
IMAGES = "train_val_images"
TRAIN_CSV = "inaturalist-user-120k/federated_train_user_120k.csv"
TEST_CSV = "inaturalist-user-120k/test.csv"
SPLIT_URL = "http://storage.googleapis.com/gresearch/federated-vision-datasets/inaturalist-user-120k.zip"
IMAGES_URL = "https://github.com/visipedia/inat_comp/tree/master/2017 (train_val_images.tar.gz)"
# Rows whose user is one of these belong to no user.
NO_USER = ("", "NA")
# Bump when the cached content or layout changes, so old caches are rebuilt.
CACHE_VERSION = 2  # 2: keyed by the listed images' content too, with a digest of its own
_CACHE_KEYS = ("version", "splits", "source", "classes", "train_x", "train_y", "train_user", "test_x", "test_y")


def cache_path(folder: Path, image_size: int) -> Path:
    return folder / f".fedrepro_cache_{image_size}.pt"


def _read_rows(path: Path, columns: dict[str, str]) -> list[dict[str, str]]:
    """The csv's rows as {role: value} for the ``columns`` (role -> the column's name)."""
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        header = reader.fieldnames or []
        missing = [name for name in columns.values() if name not in header]
        if missing:
            raise CorruptCacheError(
                f"{path} has no column(s) {', '.join(missing)}; its header is {','.join(header) or '(empty)'} "
                f"(set the loader's column options to the file's names)")
        return [{role: (row[name] or "").strip() for role, name in columns.items()} for row in reader]


def _class_ids(rows: list[dict[str, str]], path: Path) -> list[int]:
    out = []
    for n, row in enumerate(rows, 2):
        text = row["class"]
        if not text.isdigit():
            raise CorruptCacheError(f"{path} line {n}: class {text!r} is not a class id (an integer >= 0)")
        out.append(int(text))
    return out


def _user_order(ids: set[str]) -> list[str]:
    """User ids in increasing order: numerically where every id is a number, else as text."""
    if all(i.isdigit() for i in ids):
        return sorted(ids, key=int)
    return sorted(ids)


def _image_index(images: Path) -> dict[str, Path]:
    """Image id (file name without ``.jpg``) -> its file, over every folder under ``images``."""
    index: dict[str, Path] = {}
    for top, _, files in os.walk(images):
        for f in files:
            if f.lower().endswith(".jpg"):
                index[f[:-4]] = Path(top) / f
    return index


def _digest(*paths: Path) -> str:
    h = hashlib.sha256()
    for p in paths:
        h.update(p.read_bytes())
    return h.hexdigest()[:16]


def _check_options(image_size: object, columns: dict[str, object], files: dict[str, object]) -> int:
    size = check_image_size(image_size)
    for option, value in {**columns, **files}.items():
        check_value(option, value, str, check=lambda v: isinstance(v, str) and bool(v.strip()),
                    valid="a non-empty string")
    return size


def _from_cache(path: Path, splits: str, image_size: int, source: str | None) -> ImageDataset | None:
    """The cached dataset, or None (after a warning naming the file) when the cache is damaged or was
    built by another version, from other split files or other images (``source``: their digest, None
    when they are gone)."""
    expect = {"version": CACHE_VERSION, "splits": splits, **({} if source is None else {"source": source})}
    c = load_verified(path, _CACHE_KEYS, expect, stacklevel=4)
    if c is None:
        return None
    try:
        ds = ImageDataset("inaturalist", c["train_x"], c["train_y"], c["test_x"], c["test_y"], list(c["classes"]),
                          train_user=c["train_user"])
    except (ValueError, AttributeError, TypeError) as exc:
        warnings.warn(f"cache file {path} is inconsistent ({exc}); rebuilding it", stacklevel=3)
        return None
    if ds.image_size != image_size:
        warnings.warn(f"cache file {path} holds {ds.image_size}-pixel images, expected {image_size}; rebuilding it",
                      stacklevel=3)
        return None
    return ds


def _splits(train_file: Path, test_file: Path, user_column: str, image_column: str,
            class_column: str) -> tuple[list[dict[str, str]], list[int], list[dict[str, str]], list[int], list[str]]:
    """The split files read and checked: training rows with a user and their classes, test rows and
    their classes, and every listed image id (training first)."""
    train = _read_rows(train_file, {"user": user_column, "image": image_column, "class": class_column})
    test = _read_rows(test_file, {"image": image_column, "class": class_column})
    # Class ids checked on every row, so that an error names the file's own line.
    train_y, test_y = _class_ids(train, train_file), _class_ids(test, test_file)
    train_y = [y for y, r in zip(train_y, train) if r["user"] not in NO_USER]
    train = [r for r in train if r["user"] not in NO_USER]
    if not train:
        raise CorruptCacheError(f"{train_file} lists no training image with a user; check the file and user_column")
    ids = [r["image"] for r in train] + [r["image"] for r in test]
    if len(set(ids)) != len(ids):
        raise CorruptCacheError(f"{train_file} and {test_file} list an image twice (in one split or in both); "
                                f"the split must be disjoint")
    return train, train_y, test, test_y, ids


def _listed_images(image_dir: Path, ids: list[str]) -> tuple[dict[str, Path], list[Path]]:
    """The image index, and the files of the listed images that are there."""
    index = _image_index(image_dir)
    return index, [index[i] for i in ids if i in index]


@DATASETS.register("inaturalist")
def load_inaturalist(
    root: Path,
    download: bool,
    path: str | Path | None = None,
    image_size: int = 224,
    train_csv: str = TRAIN_CSV,
    test_csv: str = TEST_CSV,
    images: str = IMAGES,
    user_column: str = "user_id",
    image_column: str = "image_id",
    class_column: str = "class",
) -> ImageDataset:
    """The federated iNaturalist (see the module docstring): training images with their users, and
    the test split, resized to ``image_size`` (default 224, ViT-B/16's input: PEP-FedPT (arXiv) §5
    resizes every dataset to it). Nothing is downloaded: the error says where to get the files."""
    columns = {"user_column": user_column, "image_column": image_column, "class_column": class_column}
    files = {"train_csv": train_csv, "test_csv": test_csv, "images": images}
    image_size = _check_options(image_size, columns, files)
    folder = Path(path).expanduser() if path is not None else root / FOLDER
    train_file, test_file, image_dir = folder / train_csv, folder / test_csv, folder / images
    needed = [p for p in (train_file, test_file) if not p.is_file()] + ([] if image_dir.is_dir() else [image_dir])
    if needed:
        raise data_not_found(
            "inaturalist", [folder, train_file, test_file, image_dir], downloadable=False,
            manual=f"download the split files {SPLIT_URL} and unzip them into {folder} (giving {train_file} and "
                   f"{test_file}), and iNaturalist 2017's images from {IMAGES_URL}, extracted into {folder} "
                   f"(giving {image_dir}/<supercategory>/<species>/<image_id>.jpg)",
            reason=f"Missing: {', '.join(map(str, needed))}.")
    splits = f"{_digest(train_file, test_file)}:{user_column},{image_column},{class_column}"
    train, train_y, test, test_y, ids = _splits(train_file, test_file, user_column, image_column, class_column)
    index, present = _listed_images(image_dir, ids)
    cache = cache_path(folder, image_size)
    if cache.exists():
        # From the listed images as they are; with every one of them gone, the cache stands in for them.
        ds = _from_cache(cache, splits, image_size, files_digest(present, image_dir) if present else None)
        if ds is not None:
            return ds
    missing = [i for i in ids if i not in index]
    if missing:
        raise CorruptCacheError(f"{len(missing)} images listed in the split files are not under {image_dir} "
                                f"(first: {missing[0]}.jpg); extract the whole iNaturalist 2017 image archive there")
    num_classes = max(train_y + test_y) + 1
    names: dict[int, str] = {}
    for y, i in zip(train_y + test_y, ids):
        names.setdefault(y, index[i].parent.name)
    classes = [names.get(k, f"class_{k:04d}") for k in range(num_classes)]
    users = {u: k for k, u in enumerate(_user_order({r["user"] for r in train}))}
    ds = ImageDataset(
        "inaturalist",
        decode_images([index[r["image"]] for r in train], image_size),
        torch.tensor(train_y, dtype=torch.int64),
        decode_images([index[r["image"]] for r in test], image_size),
        torch.tensor(test_y, dtype=torch.int64),
        classes,
        train_user=torch.tensor([users[r["user"]] for r in train], dtype=torch.int64),
    )
    save_verified({"version": CACHE_VERSION, "splits": splits, "source": files_digest(present, image_dir),
                   "classes": classes, "train_x": ds.train_x, "train_y": ds.train_y, "train_user": ds.train_user,
                   "test_x": ds.test_x, "test_y": ds.test_y}, cache)
    return ds


def _input_files(root: Path, path: str | Path | None = None, train_csv: str = TRAIN_CSV, test_csv: str = TEST_CSV,
                 images: str = IMAGES, user_column: str = "user_id", image_column: str = "image_id",
                 class_column: str = "class", **_: object) -> tuple[Path, list[Path]]:
    """The files :func:`load_inaturalist` reads (digested into its runs:
    :func:`fedrepro.data.registry.input_digest`): the split files and the listed images; none when the
    images are gone and the cache serves."""
    folder = Path(path).expanduser() if path is not None else root / FOLDER
    train_file, test_file = folder / train_csv, folder / test_csv
    ids = _splits(train_file, test_file, user_column, image_column, class_column)[4]
    present = _listed_images(folder / images, ids)[1]
    return folder, [train_file, test_file, *present] if present else []


load_inaturalist.input_files = _input_files  # type: ignore[attr-defined]
