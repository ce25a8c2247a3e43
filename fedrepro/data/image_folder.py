"""Generic multi-domain image-folder loader (DomainNet / Office-Caltech10 / PACS layout).

Layout: ``<path>/<domain>/<class>/*.{jpg,jpeg,png}``, or with a ready-made split
``<path>/<domain>/{train,test}/<class>/...``. Without a ready-made split, each
(domain, class) group is split on its own, seeded by (seed, domain name, class
name): so choosing a subset of domains, or adding a class, leaves every other
group's split unchanged.
"""
from __future__ import annotations

import warnings
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import torch

from ..params import check_value
from .base import ImageDataset
from .digest import files_digest
from .imaging import check_image_size, decode_images, is_image
from .options import is_names_list, pick_names
from .registry import DATASETS
from .root import data_not_found
from .verified_cache import holds_images, load_verified, save_verified

CACHE_VERSION = 2  # 2: keyed by the content digest of the domain's images, with a digest of its own
# Datasets whose archive nests the domain folders one level down: PACS's images sit in kfold/.
_NESTED = {"pacs": "kfold"}

_MANUAL = {
    "domainnet": "download DomainNet from https://ai.bu.edu/M3SDA/ and extract it so that "
    "{folder}/<domain>/<class>/*.jpg (domains clipart, infograph, painting, quickdraw, real, sketch)",
    "office_caltech10": "arrange Office-Caltech10 as {folder}/<domain>/<class>/*.jpg "
    "(domains amazon, caltech, dslr, webcam)",
    "pacs": "download PACS (Li et al., ICCV 2017) and extract its image folders so that "
    "{folder}/<domain>/<class>/*.jpg, or {folder}/kfold/<domain>/<class>/*.jpg as the archive has them "
    "(domains art_painting, cartoon, photo, sketch; classes dog, elephant, giraffe, guitar, horse, house, person)",
    "image_folder": "put images at {folder}/<domain>/<class>/*.jpg|png, or pass path=... to load_dataset",
}


@dataclass(frozen=True)
class _Entry:
    rel: str  # path relative to the domain folder; also the cache key
    cls: str
    split: str | None  # "train"/"test" for a ready-made split, else None


def _subdirs(folder: Path) -> list[Path]:
    # Hidden folders (.git, caches) are never domains or classes.
    return sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))


def _list_domain(domain_dir: Path) -> list[_Entry]:
    names = {p.name for p in _subdirs(domain_dir)}
    splits: Sequence[str | None] = ("train", "test") if {"train", "test"} <= names else (None,)
    entries = []
    for split in splits:
        base = domain_dir / split if split else domain_dir
        for class_dir in _subdirs(base):
            for f in sorted(class_dir.iterdir()):
                if f.is_file() and is_image(f):
                    entries.append(_Entry(f.relative_to(domain_dir).as_posix(), class_dir.name, split))
    return entries


def _group_seed(seed: int, domain: str, cls: str) -> list[int]:
    return [seed, zlib.crc32(domain.encode()), zlib.crc32(cls.encode())]


def _split_flags(entries: list[_Entry], domain: str, test_fraction: float, seed: int) -> np.ndarray:
    """Boolean "is test" per entry: the ready-made split, or a seeded per-class random split."""
    is_test = np.array([e.split == "test" for e in entries], dtype=bool)
    if entries and entries[0].split is not None:
        return is_test
    by_class: dict[str, list[int]] = {}
    for i, e in enumerate(entries):
        by_class.setdefault(e.cls, []).append(i)
    for cls, idx in by_class.items():
        n = len(idx)
        # Keep at least one training image per group, so no class vanishes from training.
        n_test = min(int(round(n * test_fraction)), n - 1)
        if n_test > 0:
            pick = np.random.default_rng(_group_seed(seed, domain, cls)).permutation(n)[:n_test]
            is_test[np.asarray(idx)[pick]] = True
    return is_test


def _decode_domain(domain_dir: Path, entries: list[_Entry], image_size: int, tag: str = "") -> torch.Tensor:
    """Decoded images of one domain, via a per-domain cache valid while the images are the ones it was
    decoded from (their content digest) and the cache is sound (its own digest); ``tag`` names a class
    subset's own cache, so that loading the subset and the whole folder in turn does not rebuild one
    cache over and over."""
    cache = domain_dir.parent / f".fedrepro_cache_{domain_dir.name}{tag}_{image_size}.pt"
    files = [e.rel for e in entries]
    source = files_digest([domain_dir / f for f in files], domain_dir)
    if cache.exists():
        # Images added, removed or changed since, or a damaged cache: rebuilt, with a warning naming it.
        c = load_verified(cache, ("version", "files", "source", "x"),
                          {"version": CACHE_VERSION, "files": files, "source": source}, stacklevel=4)
        if c is not None:
            if holds_images(c, "x", len(files), (3, image_size, image_size)):
                return c["x"]
            warnings.warn(f"cache file {cache} does not hold {len(files)} RGB {image_size}-pixel images; rebuilding "
                          f"it", stacklevel=4)
    x = decode_images([domain_dir / f for f in files], image_size)
    save_verified({"version": CACHE_VERSION, "files": files, "source": source, "x": x}, cache)
    return x


def _check_options(test_fraction: float, seed: int, domains: object, classes: object = None) -> None:
    check_value("test_fraction", test_fraction, float, ge=0, lt=1)
    check_value("seed", seed, int, ge=0)
    check_value("domains", domains, Sequence[str] | None, valid="null or a list of domain names", check=is_names_list)
    check_value("classes", classes, Sequence[str] | None, valid="null or a list of class folder names",
                check=is_names_list)


def _listing(name: str, folder: Path, domains: Sequence[str] | None,
             classes: Sequence[str] | None) -> tuple[list[str], dict[str, list[_Entry]], str]:
    """The chosen domains, their images (of the chosen classes) and the class subset's cache tag."""
    chosen = pick_names("domains", name, domains, [d.name for d in _subdirs(folder)])
    listing = {d: _list_domain(folder / d) for d in chosen}
    tag = ""
    if classes is not None:
        keep = set(pick_names("classes", name, classes, sorted({e.cls for es in listing.values() for e in es})))
        listing = {d: [e for e in es if e.cls in keep] for d, es in listing.items()}
        tag = f"_classes{zlib.crc32(','.join(sorted(keep)).encode()):08x}"
    return chosen, listing, tag


def load_image_folder_at(
    name: str,
    folder: Path,
    image_size: int = 32,
    test_fraction: float = 0.2,
    seed: int = 0,
    domains: Sequence[str] | None = None,
    classes: Sequence[str] | None = None,
) -> ImageDataset:
    """Load the multi-domain image folder ``folder`` as dataset ``name`` (see module docstring).

    ``classes`` keeps only those class folders (every one must exist in some chosen domain), e.g.
    a benchmark's class subset of DomainNet; labels follow their sorted order.
    """
    image_size = check_image_size(image_size)
    _check_options(test_fraction, seed, domains, classes)
    manual = _MANUAL.get(name, _MANUAL["image_folder"]).format(folder=folder)
    if not folder.is_dir():
        raise data_not_found(name, [folder], downloadable=False, manual=manual)
    chosen, listing, tag = _listing(name, folder, domains, classes)
    empty = [d for d, e in listing.items() if not e]
    if empty and len(empty) < len(listing):
        warnings.warn(f"{name}: skipping domain folder(s) without images: {', '.join(empty)}", stacklevel=3)
    listing = {d: e for d, e in listing.items() if e}
    if not listing:
        raise data_not_found(
            name, [folder / d for d in chosen] or [folder], downloadable=False, manual=manual,
            reason=f"No .jpg/.jpeg/.png images under {folder}/<domain>/<class>/.",
        )
    doms = sorted(listing)
    class_names = sorted({e.cls for entries in listing.values() for e in entries})
    cls_index = {c: i for i, c in enumerate(class_names)}
    parts: dict[str, list[torch.Tensor]] = {k: [] for k in ("train_x", "train_y", "train_d", "test_x", "test_y",
                                                            "test_d")}
    for d_id, dom in enumerate(doms):
        entries = listing[dom]
        x = _decode_domain(folder / dom, entries, image_size, tag)
        y = torch.tensor([cls_index[e.cls] for e in entries], dtype=torch.int64)
        is_test = torch.from_numpy(_split_flags(entries, dom, float(test_fraction), int(seed)))
        for split, mask in (("train", ~is_test), ("test", is_test)):
            parts[f"{split}_x"].append(x[mask])
            parts[f"{split}_y"].append(y[mask])
            parts[f"{split}_d"].append(torch.full((int(mask.sum()),), d_id, dtype=torch.int64))
    cat = {k: torch.cat(v) for k, v in parts.items()}
    return ImageDataset(
        name, cat["train_x"], cat["train_y"], cat["test_x"], cat["test_y"], class_names,
        train_domain=cat["train_d"], test_domain=cat["test_d"], domains=doms,
    )


def _folder(name: str, root: Path, path: str | Path | None) -> Path:
    folder = Path(path).expanduser() if path is not None else root / name
    if name in _NESTED and (folder / _NESTED[name]).is_dir():
        folder = folder / _NESTED[name]
    return folder


def _make_loader(name: str) -> Callable[..., ImageDataset]:
    def loader(
        root: Path,
        download: bool,
        path: str | Path | None = None,
        image_size: int = 32,
        test_fraction: float = 0.2,
        seed: int = 0,
        domains: Sequence[str] | None = None,
        classes: Sequence[str] | None = None,
    ) -> ImageDataset:
        # No download: these sets have no stable, licence-free URL; the error says how to get them.
        return load_image_folder_at(name, _folder(name, root, path), image_size, test_fraction, seed, domains,
                                    classes)

    def input_files(root: Path, path: str | Path | None = None, domains: Sequence[str] | None = None,
                    classes: Sequence[str] | None = None, **_: object) -> tuple[Path, list[Path]]:
        """The images the loader reads (digested into its runs: :func:`fedrepro.data.registry.input_digest`)."""
        folder = _folder(name, root, path)
        _, listing, _ = _listing(name, folder, domains, classes)
        return folder, [folder / d / e.rel for d, es in listing.items() for e in es]

    loader.input_files = input_files  # type: ignore[attr-defined]
    loader.__name__ = f"load_{name}"
    loader.__doc__ = (
        f"Multi-domain image folder {name!r} (default folder ``<root>/{name}``), one domain per "
        f"top-level folder. Options: path, image_size, test_fraction, seed, domains, classes."
    )
    return loader


for _name in ("image_folder", "domainnet", "office_caltech10", "pacs"):
    DATASETS.register(_name)(_make_loader(_name))
