"""Tiny-ImageNet-200 loader (standard ``tiny-imagenet-200`` folder), val split used as test set.

Val labels come from ``val/val_annotations.txt``: all val images sit in one
folder, so labelling them by folder structure (as some libraries do) silently
gives every val image class 0. Decoded tensors are cached because decoding
110k JPEGs takes far longer than reading one tensor file; the cache is keyed by
the content digest of the files it was decoded from and checked against its own
digest on every read (:mod:`.verified_cache`), so changed images or a damaged
cache are decoded again, never trained on.
"""
from __future__ import annotations

import warnings
from pathlib import Path

import torch

from ..errors import CorruptCacheError
from .base import ImageDataset
from .digest import files_digest
from .imaging import check_image_size, decode_images, is_image
from .registry import DATASETS
from .root import data_not_found
from .verified_cache import load_verified, save_verified

FOLDER = "tiny-imagenet-200"
URL = "http://cs231n.stanford.edu/tiny-imagenet-200.zip"
# Bump when the cached content or layout changes, so old caches are rebuilt.
CACHE_VERSION = 2  # 2: keyed by the source files' digest, with a digest of its own
_CACHE_KEYS = ("version", "wnids", "source", "classes", "train_x", "train_y", "test_x", "test_y")


def cache_path(folder: Path, image_size: int) -> Path:
    return folder / f".fedrepro_cache_{image_size}.pt"


def _read_wnids(folder: Path) -> list[str]:
    wnids = [w.strip() for w in (folder / "wnids.txt").read_text().splitlines() if w.strip()]
    if len(set(wnids)) != len(wnids):
        raise CorruptCacheError(f"{folder / 'wnids.txt'} lists a wnid twice")
    # Class index = position in sorted order, independent of the file's order.
    return sorted(wnids)


def _class_names(folder: Path, wnids: list[str]) -> list[str]:
    """Human-readable names (first synonym from words.txt), made unique with the wnid if needed."""
    words: dict[str, str] = {}
    words_file = folder / "words.txt"
    if words_file.is_file():
        for line in words_file.read_text(errors="replace").splitlines():
            wnid, _, text = line.partition("\t")
            words[wnid.strip()] = text.split(",")[0].strip()
    names = [words.get(w) or w for w in wnids]
    dup = {n for n in names if names.count(n) > 1}
    return [f"{n} ({w})" if n in dup else n for n, w in zip(names, wnids)]


def _train_files(folder: Path, wnids: list[str]) -> tuple[list[Path], list[int]]:
    paths, labels = [], []
    for label, wnid in enumerate(wnids):
        img_dir = folder / "train" / wnid / "images"
        if not img_dir.is_dir():
            raise CorruptCacheError(f"Tiny-ImageNet is incomplete: {img_dir} is missing; re-extract the archive")
        files = sorted(p for p in img_dir.iterdir() if is_image(p))
        paths += files
        labels += [label] * len(files)
    return paths, labels


def _val_files(folder: Path, wnids: list[str]) -> tuple[list[Path], list[int]]:
    ann = folder / "val" / "val_annotations.txt"
    if not ann.is_file():
        raise CorruptCacheError(f"Tiny-ImageNet is incomplete: {ann} is missing; re-extract the archive")
    index = {w: i for i, w in enumerate(wnids)}
    rows: dict[str, int] = {}
    for n, line in enumerate(ann.read_text().splitlines(), 1):
        if not line.strip():
            continue
        parts = line.split("\t")
        if len(parts) < 2 or parts[1].strip() not in index:
            raise CorruptCacheError(f"{ann} line {n}: expected '<file>\\t<wnid from wnids.txt>...', got {line!r}")
        rows[parts[0].strip()] = index[parts[1].strip()]
    names = sorted(rows)
    paths = [folder / "val" / "images" / f for f in names]
    missing = [p for p in paths if not p.is_file()]
    if missing:
        raise CorruptCacheError(
            f"{ann} lists {len(missing)} images that do not exist (first: {missing[0]}); re-extract the archive"
        )
    return paths, [rows[f] for f in names]


def _download(root: Path) -> None:
    from torchvision.datasets.utils import download_and_extract_archive

    root.mkdir(parents=True, exist_ok=True)
    download_and_extract_archive(URL, download_root=str(root))


def _ensure_present(root: Path, folder: Path, download: bool) -> None:
    if (folder / "wnids.txt").is_file():
        return
    reason = None
    if download:
        try:
            _download(root)
        except Exception as exc:  # network, disk, archive: all mean "still not here"
            reason = f"Download of {URL} into {root} failed: {type(exc).__name__}: {exc}"
        else:
            if (folder / "wnids.txt").is_file():
                return
            reason = f"Download into {root} finished but {folder / 'wnids.txt'} is missing"
    raise data_not_found(
        "tiny_imagenet",
        [folder],
        downloadable=True,
        manual=f"download {URL} and unzip it into {root} (giving {folder}/wnids.txt, train/, val/)",
        reason=reason,
    )


def _from_cache(path: Path, wnids: list[str], image_size: int, source: str | None) -> ImageDataset | None:
    """The cached dataset, or None (after a warning naming the file) when the cache is damaged, or was
    built by another version, for another class list or from other source files (``source``: their
    digest; None when they are gone)."""
    expect = {"version": CACHE_VERSION, "wnids": wnids, **({} if source is None else {"source": source})}
    c = load_verified(path, _CACHE_KEYS, expect, stacklevel=4)
    if c is None:
        return None
    try:
        ds = ImageDataset(
            "tiny_imagenet", c["train_x"], c["train_y"], c["test_x"], c["test_y"], list(c["classes"])
        )
    except (ValueError, AttributeError, TypeError) as exc:
        warnings.warn(f"cache file {path} is inconsistent ({exc}); rebuilding it", stacklevel=3)
        return None
    if ds.image_size != image_size or ds.in_channels != 3:
        warnings.warn(f"cache file {path} holds {tuple(ds.train_x.shape[1:])} images, expected "
                      f"(3, {image_size}, {image_size}); rebuilding it", stacklevel=3)
        return None
    return ds


def _sources(folder: Path, wnids: list[str]) -> tuple[list[Path], list[int], list[Path], list[int], list[Path]]:
    """Training and val images with their labels, and every file the dataset is read from."""
    train_paths, train_labels = _train_files(folder, wnids)
    val_paths, val_labels = _val_files(folder, wnids)
    texts = [folder / "wnids.txt", folder / "val" / "val_annotations.txt"]
    texts += [folder / "words.txt"] if (folder / "words.txt").is_file() else []
    return train_paths, train_labels, val_paths, val_labels, texts + train_paths + val_paths


@DATASETS.register("tiny_imagenet")
def load_tiny_imagenet(root: Path, download: bool, image_size: int = 64) -> ImageDataset:
    """Tiny-ImageNet-200: 100000 train / 10000 val (as test) RGB images, 200 classes.

    ``image_size`` (default 64, the native size) resizes; each size has its own cache file.
    """
    image_size = check_image_size(image_size)
    folder = root / FOLDER
    _ensure_present(root, folder, download)
    wnids = _read_wnids(folder)
    cache = cache_path(folder, image_size)
    sources = _present_sources(folder, wnids) if cache.exists() else _sources(folder, wnids)
    # The cache must come from the images as they are; with them gone it stands in for them alone.
    source = None if sources is None else files_digest(sources[4], folder)
    if cache.exists():
        ds = _from_cache(cache, wnids, image_size, source)
        if ds is not None:
            return ds
    train_paths, train_labels, val_paths, val_labels, read = sources or _sources(folder, wnids)
    classes = _class_names(folder, wnids)
    ds = ImageDataset(
        "tiny_imagenet",
        decode_images(train_paths, image_size),
        torch.tensor(train_labels, dtype=torch.int64),
        decode_images(val_paths, image_size),
        torch.tensor(val_labels, dtype=torch.int64),
        classes,
    )
    save_verified(
        {
            "version": CACHE_VERSION, "wnids": wnids, "source": files_digest(read, folder), "classes": classes,
            "train_x": ds.train_x, "train_y": ds.train_y, "test_x": ds.test_x, "test_y": ds.test_y,
        },
        cache,
    )
    return ds


def _present_sources(folder: Path, wnids: list[str]) -> tuple | None:
    """:func:`_sources`, or None when the training images are gone (a cache then stands in for them)."""
    try:
        sources = _sources(folder, wnids)
    except CorruptCacheError:
        return None
    return sources if sources[0] else None


def _input_files(root: Path, **_: object) -> tuple[Path, list[Path]]:
    """The files :func:`load_tiny_imagenet` reads (digested into its runs:
    :func:`fedrepro.data.registry.input_digest`); none when the images are gone and the cache serves."""
    folder = root / FOLDER
    sources = _present_sources(folder, _read_wnids(folder))
    return folder, [] if sources is None else sources[4]


load_tiny_imagenet.input_files = _input_files  # type: ignore[attr-defined]
