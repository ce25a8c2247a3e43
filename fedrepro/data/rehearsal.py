"""Rehearsal data: every dataset a profile reads, as seeded stand-in images of its real shape.

With the data root set to :data:`~fedrepro.data.root.REHEARSAL_ROOT` (``load_dataset(...,
root="rehearsal:")`` or ``$FEDREPRO_DATA=rehearsal:``), :func:`~fedrepro.data.load_dataset` reads
no file: for the same name and options it returns an :class:`ImageDataset` with the real dataset's
image size (the ``image_size`` option where the loader has one), channels, classes (the real names
where this module knows them), domains and per-class train/test sizes, so that a whole profile can
be run end to end before its data is installed, and every shape a model receives is the one the
real data gives it.

Each dataset is one row of :data:`SHAPES`. Images are held in memory as uint8, like every loader's,
so a dataset is served at the largest fraction of its per-class sizes that keeps it within
:func:`budget_bytes` (96 MiB unless ``$FEDREPRO_REHEARSAL_MIB`` says otherwise; all of it when it
fits), and never below a row's floor (``min_train`` per class: e.g. the 16 shots the few-shot CLIP
datasets are drawn at). :func:`served` says what a load gives before any image is made.

The images carry a learnable signal: each class is a smooth random colour field with a mean colour
of its own, each domain a colour gain, offset and texture of its own; a sample is its class field,
shifted and contrast-jittered, under its domain's style, plus pixel noise. A rehearsal run's
accuracy should therefore rise above chance; one that stays at chance points at a bug. Every
(domain, class, split) block is seeded on its own (dataset, domain, class, split and the ``seed``
option), so choosing a subset of domains or classes leaves the other blocks' images unchanged.
"""
from __future__ import annotations

import os
import zlib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from ..env.settings import ENV_REHEARSAL_BUDGET
from ..errors import ConfigError
from ..params import check_value
from ..registry import Registry
from .base import ImageDataset
from .imaging import check_image_size
from .options import is_names_list, pick_names
from .subsets import DOMAINNET_TEN

# What one rehearsal dataset may take in memory, uint8 images of both splits, unless
# $FEDREPRO_REHEARSAL_MIB says otherwise: a machine with memory to spare serves larger fractions, so
# that the paper profile's splits of many clients (or of fixed counts per client) fit.
BUDGET_BYTES = 96 * 2**20
ENV_BUDGET = ENV_REHEARSAL_BUDGET
# Loaders whose data needs no files (procedural): served by the loader itself in rehearsal mode too.
NO_FILES = ("synthetic", "glyphs")
# The loaders that read a multi-domain image folder (options path, image_size, test_fraction, seed,
# domains, classes); a folder's dataset is its path's last folder name.
FOLDER_LOADERS = ("image_folder", "domainnet", "office_caltech10", "pacs")

_LOW_RES = 4  # a class field is this many random values a side, upsampled: smooth and easy to tell apart
_TEXTURE_RES = 8  # a domain's texture: finer than a class field
_NOISE = 1.0  # pixel noise std, relative to the class field's
_TINT = 0.5  # std of a class's mean colour, per channel, relative to the class field's


@dataclass(frozen=True)
class DataShape:
    """One real dataset's shape: what the rehearsal serves in its place.

    ``per_class`` is the images per class in each domain (one entry for a single-domain set):
    training images where ``test_per_class`` is given (a ready-made split), else every image,
    split by the loader's ``test_fraction`` as the real folder is.
    """

    name: str
    image_size: int
    channels: int
    classes: tuple[str, ...]
    names_from: str
    per_class: tuple[int, ...]
    test_per_class: tuple[int, ...] | None
    domains: tuple[str, ...] | None = None
    min_train: int = 2
    source: str = ""
    # The loader that reads it, and the options that pick this row there (besides the defaults).
    loader: str = ""
    select: tuple[tuple[str, Any], ...] = ()
    # A dataset whose training images name their user (``ImageDataset.train_user``): at least
    # ``users`` users with ``user_min`` training images or more (``min_train`` must leave enough
    # images for them), the remaining images in smaller users; 0: no users.
    users: int = 0
    user_min: int = 0

    @property
    def num_classes(self) -> int:
        return len(self.classes)


SHAPES: Registry[DataShape] = Registry("rehearsal dataset")


def _row(**kw: Any) -> None:
    shape = DataShape(**{"loader": kw["name"], **kw})
    SHAPES.register(shape.name)(shape)


def _placeholders(prefix: str, n: int) -> tuple[str, ...]:
    return tuple(f"{prefix}_{i:03d}" for i in range(n))


CIFAR10_CLASSES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")
CIFAR100_CLASSES = (
    "apple", "aquarium_fish", "baby", "bear", "beaver", "bed", "bee", "beetle", "bicycle", "bottle", "bowl", "boy",
    "bridge", "bus", "butterfly", "camel", "can", "castle", "caterpillar", "cattle", "chair", "chimpanzee", "clock",
    "cloud", "cockroach", "couch", "crab", "crocodile", "cup", "dinosaur", "dolphin", "elephant", "flatfish", "forest",
    "fox", "girl", "hamster", "house", "kangaroo", "keyboard", "lamp", "lawn_mower", "leopard", "lion", "lizard",
    "lobster", "man", "maple_tree", "motorcycle", "mountain", "mouse", "mushroom", "oak_tree", "orange", "orchid",
    "otter", "palm_tree", "pear", "pickup_truck", "pine_tree", "plain", "plate", "poppy", "porcupine", "possum",
    "rabbit", "raccoon", "ray", "road", "rocket", "rose", "sea", "seal", "shark", "shrew", "skunk", "skyscraper",
    "snail", "snake", "spider", "squirrel", "streetcar", "sunflower", "sweet_pepper", "table", "tank", "telephone",
    "television", "tiger", "tractor", "train", "trout", "tulip", "turtle", "wardrobe", "whale", "willow_tree", "wolf",
    "woman", "worm",
)
CIFAR100_COARSE = (
    "aquatic_mammals", "fish", "flowers", "food_containers", "fruit_and_vegetables", "household_electrical_devices",
    "household_furniture", "insects", "large_carnivores", "large_man-made_outdoor_things",
    "large_natural_outdoor_scenes", "large_omnivores_and_herbivores", "medium_mammals", "non-insect_invertebrates",
    "people", "reptiles", "small_mammals", "trees", "vehicles_1", "vehicles_2",
)
FASHION_CLASSES = ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag",
                   "Ankle boot")
FASHION_STYLES = ("original", "inverted", "rotated", "tinted", "noisy", "edges")
DOMAINNET_DOMAINS = ("clipart", "infograph", "painting", "quickdraw", "real", "sketch")

_row(name="cifar10", image_size=32, channels=3, classes=CIFAR10_CLASSES, names_from="the dataset's",
     per_class=(5000,), test_per_class=(1000,), source="50,000 / 10,000 images")
_row(name="cifar100", image_size=32, channels=3, classes=CIFAR100_CLASSES, names_from="the dataset's (fine)",
     per_class=(500,), test_per_class=(100,), source="50,000 / 10,000 images")
_row(name="cifar100_coarse", image_size=32, channels=3, classes=CIFAR100_COARSE,
     names_from="the dataset's (coarse)", per_class=(2500,), test_per_class=(500,),
     source="cifar100 with label_type=coarse", loader="cifar100", select=(("label_type", "coarse"),))
_row(name="tiny_imagenet", image_size=64, channels=3, classes=_placeholders("tiny_imagenet", 200),
     names_from="placeholders (real: words.txt)", per_class=(500,), test_per_class=(50,),
     source="100,000 train / 10,000 val images")
_row(name="fashion_mnist", image_size=28, channels=1, classes=FASHION_CLASSES, names_from="the dataset's",
     per_class=(6000,), test_per_class=(1000,), source="60,000 / 10,000 images")
_row(name="fashion_mnist_federated", image_size=28, channels=1, classes=FASHION_CLASSES,
     names_from="the dataset's", per_class=(3000,), test_per_class=(1000,),
     source="the training half no backbone saw")
_row(name="fashion_mnist_domains", image_size=28, channels=3, classes=FASHION_CLASSES, names_from="the dataset's",
     per_class=(1000,) * 6, test_per_class=(167,) * 6, domains=FASHION_STYLES,
     source="Fashion-MNIST split over 6 styles")
# DomainNet (Peng et al., ICCV 2019): 586,575 images of 345 classes; per class, each domain's
# images / 345 (clipart 48,129; infograph 51,605; painting 72,266; quickdraw 172,500; real 172,947;
# sketch 69,128). Ten of the class names are the real ones (DOMAINNET_TEN), the rest placeholders.
_row(name="domainnet", image_size=224, channels=3,
     classes=tuple(sorted(DOMAINNET_TEN + _placeholders("domainnet", 345 - len(DOMAINNET_TEN)))),
     names_from="the ten of DOMAINNET_TEN, else placeholders", per_class=(140, 150, 209, 500, 501, 200),
     test_per_class=None, domains=DOMAINNET_DOMAINS, source="586,575 images, split by test_fraction",
     select=(("image_size", 224),))
# PACS (Li et al., ICCV 2017): art_painting 2,048, cartoon 2,344, photo 1,670, sketch 3,929 images.
_row(name="pacs", image_size=227, channels=3,
     classes=("dog", "elephant", "giraffe", "guitar", "horse", "house", "person"), names_from="the dataset's",
     per_class=(293, 335, 239, 561), test_per_class=None, domains=("art_painting", "cartoon", "photo", "sketch"),
     source="9,991 images, split by test_fraction", select=(("image_size", 227),))
# Office-Caltech10: amazon 958, caltech 1,123, dslr 157, webcam 295 images.
_row(name="office_caltech10", image_size=224, channels=3,
     classes=("back_pack", "bike", "calculator", "headphones", "keyboard", "laptop_computer", "monitor", "mouse",
              "mug", "projector"), names_from="the dataset's", per_class=(96, 112, 16, 30), test_per_class=None,
     domains=("amazon", "caltech", "dslr", "webcam"), source="2,533 images, split by test_fraction",
     select=(("image_size", 224),))
# VireoFood-172 (pFedCSPC), read as image_folder with domains=["vireo172"]: 110,241 images, 172 classes.
_row(name="vireo172", image_size=224, channels=3, classes=_placeholders("vireo172", 172),
     names_from="placeholders (real: folder names)", per_class=(641,), test_per_class=None, domains=("vireo172",),
     source="110,241 images, split by test_fraction", loader="image_folder",
     select=(("domains", ("vireo172",)), ("image_size", 224)))
# FedOTP's five few-shot CLIP datasets, CoOp's splits (FedOTP Table A1: train / test images); one
# domain folder holding train/ and test/. Few-shot runs draw up to 16 shots a class from train.
for _name, _classes, _train, _test in (("caltech101", 100, 4128, 2465), ("flowers102", 102, 4093, 2463),
                                        ("oxford_pets", 37, 2944, 3669), ("food101", 101, 50500, 30300),
                                        ("dtd", 47, 2820, 1692)):
    _row(name=_name, image_size=224, channels=3, classes=_placeholders(_name, _classes),
         names_from="placeholders (real: folder names)", per_class=(_train // _classes,),
         test_per_class=(_test // _classes,), domains=(_name,), min_train=16,
         source=f"CoOp split: {_train:,} / {_test:,} images", loader="image_folder",
         select=(("path", f"data/{_name}"), ("image_size", 224)))


# The federated iNaturalist of Hsu et al. (ECCV 2020), iNaturalist-User-120k: 120,300 training images
# of 9,275 users and 35,641 test images, 1,203 classes. PEP-FedPT (arXiv) §5 keeps the 1,018 users
# with at least 16 training images: the floor of 14 training images a class (1,203 x 14 = 16,842 >=
# 1,018 x 16) serves that many users, which at 224 pixels is 2.5 GB, far over the budget.
_row(name="inaturalist", image_size=224, channels=3, classes=_placeholders("inaturalist", 1203),
     names_from="placeholders (real: species folders)", per_class=(100,), test_per_class=(29,), min_train=14,
     source="120,300 / 35,641 images, 9,275 users", select=(("image_size", 224),), users=1018, user_min=16)


@dataclass(frozen=True)
class Served:
    """What a rehearsal load gives: the row, the classes and domains chosen, the image size, and per
    domain the training and test images per class (after the fraction)."""

    shape: DataShape
    loader: str
    image_size: int
    classes: tuple[str, ...]
    domains: tuple[str, ...] | None
    train_per_class: tuple[int, ...]
    test_per_class: tuple[int, ...]
    fraction: float
    seed: int
    full_train: int = 0  # the real dataset's training images for these options, before the fraction

    @property
    def num_images(self) -> int:
        return len(self.classes) * (sum(self.train_per_class) + sum(self.test_per_class))

    @property
    def nbytes(self) -> int:
        return self.num_images * self.shape.channels * self.image_size**2


def identity(name: str, options: Mapping[str, Any]) -> str:
    """The row of :data:`SHAPES` that loader ``name`` with ``options`` stands for: an image folder's
    path's last folder name (or its one domain, when no path is given and that domain is a row),
    CIFAR-100's coarse labels their own row, else the loader's name."""
    if name in FOLDER_LOADERS:
        path = options.get("path")
        if path is not None:
            return Path(path).name
        domains = options.get("domains")
        if name == "image_folder" and is_names_list(domains) and len(domains) == 1 and domains[0] in SHAPES:
            return domains[0]
    if name == "cifar100" and options.get("label_type") == "coarse":
        return "cifar100_coarse"
    return name


def served(name: str, defaults: Mapping[str, Any], **options: Any) -> Served:
    """What loading ``name`` with ``options`` in rehearsal mode gives (``defaults``: the real
    loader's option defaults), checked as the real loader checks them; no image is made."""
    opts = {**defaults, **options}
    row = SHAPES.get(identity(name, opts))
    size = check_image_size(opts.get("image_size", row.image_size))
    seed = check_value("seed", opts.get("seed", 0), int, ge=0)
    if "label_type" in opts:
        check_value("label_type", opts["label_type"], str, choices=("fine", "coarse"))
    if "half" in opts:
        check_value("half", opts["half"], str | None, choices=("federated",))
    domains = row.domains
    per_class, test_per_class = row.per_class, row.test_per_class
    for option in ("domains", "styles"):
        if opts.get(option) is not None:
            check_value(option, opts[option], Sequence[str] | None, valid="null or a list of domain names",
                        check=is_names_list)
            chosen = pick_names(option, name, opts[option], row.domains or ())
            if option == "styles":  # the styles loader keeps the order given (its domain ids follow it)
                chosen = list(opts[option])
            keep = [row.domains.index(d) for d in chosen] if row.domains else []
            domains = tuple(chosen)
            per_class = tuple(row.per_class[i] for i in keep)
            test_per_class = None if row.test_per_class is None else tuple(row.test_per_class[i] for i in keep)
    if opts.get("half") == "federated" and name == "fashion_mnist_domains":
        per_class = tuple(n // 2 for n in per_class)
    classes = row.classes
    if opts.get("classes") is not None:
        check_value("classes", opts["classes"], Sequence[str] | None, valid="null or a list of class folder names",
                    check=is_names_list)
        classes = tuple(pick_names("classes", name, opts["classes"], row.classes))
    test_fraction = None
    if test_per_class is None:
        test_fraction = check_value("test_fraction", opts.get("test_fraction", 0.2), float, ge=0, lt=1)
    full = len(classes) * (sum(per_class) + sum(test_per_class or ())) * row.channels * size**2
    fraction = min(1.0, budget_bytes() / full)
    full_train = len(classes) * (sum(per_class) if test_per_class is not None
                                 else sum(n - round(n * test_fraction) for n in per_class))
    train, test = [], []
    for i, n in enumerate(per_class):
        if test_per_class is not None:
            # Rounded down, so that the whole stays within the budget.
            train.append(max(row.min_train, min(n, int(n * fraction))))
            test.append(max(1, int(test_per_class[i] * fraction)))
        else:
            assert test_fraction is not None
            # As the real folder split: at least one training image per (domain, class).
            total = max(row.min_train + 1, min(n, int(n * fraction)))
            n_test = min(int(round(total * test_fraction)), total - 1)
            train.append(total - n_test)
            test.append(n_test)
    return Served(row, name, size, classes, domains, tuple(train), tuple(test), fraction, seed, full_train)


def budget_bytes() -> int:
    """The memory budget of one rehearsal dataset: ``$FEDREPRO_REHEARSAL_MIB`` MiB, else :data:`BUDGET_BYTES`."""
    raw = os.environ.get(ENV_BUDGET, "").strip()
    if not raw:
        return BUDGET_BYTES
    try:
        mib = float(raw)
    except ValueError:
        mib = -1.0
    if not mib > 0 or mib != mib or mib == float("inf"):
        raise ConfigError(f"environment variable {ENV_BUDGET}={raw!r} is not valid; valid: a positive number of MiB")
    return int(mib * 2**20)


def _crc(text: str) -> int:
    return zlib.crc32(text.encode())


def _field(rng: np.random.Generator, channels: int, res: int, size: int) -> torch.Tensor:
    """[channels, size, size] smooth zero-mean unit-std field: ``res`` x ``res`` random values,
    upsampled; colour channels correlated, as in natural images."""
    coef = rng.standard_normal((1, channels, res, res))
    if channels > 1:
        coef = 0.8 * coef[:, :1] + 0.6 * coef
    f = F.interpolate(torch.from_numpy(coef).float(), size=(size, size), mode="bilinear", align_corners=False)[0]
    f -= f.mean()
    return f / (f.std() + 1e-8)


@lru_cache(maxsize=8)
def _style(dataset: str, domain: str, channels: int, size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A domain's colour gain [C, 1, 1] and its texture plus offset [C, S, S] (the same for every
    block of the domain, so computed once)."""
    rng = np.random.default_rng([_crc(dataset), _crc(domain), 1])
    texture = 0.5 * _field(rng, channels, _TEXTURE_RES, size)
    gain = torch.from_numpy(rng.uniform(0.6, 1.4, (channels, 1, 1))).float()
    offset = torch.from_numpy(rng.normal(0.0, 0.5, (channels, 1, 1))).float()
    return gain, gain * texture + offset


def _block(s: Served, domain: str, cls: str, split: str, count: int) -> torch.Tensor:
    """uint8 [count, C, S, S]: class ``cls`` in ``domain``'s style, seeded by the block alone."""
    c, size, name = s.shape.channels, s.image_size, s.shape.name
    gain, styled = _style(name, domain, c, size)
    m = max(1, size // 8)  # the largest shift, each way
    # The class field on a canvas m pixels wider each side; a shifted sample is a crop of it. Its
    # mean colour is the class's too: a cue that a network picks up within its first steps.
    c_rng = np.random.default_rng([_crc(name), _crc(cls)])
    tint = torch.from_numpy(c_rng.normal(0.0, _TINT, (c, 1, 1))).float()
    template = (_field(c_rng, c, _LOW_RES, size + 2 * m) + tint) * gain
    rng = np.random.default_rng([s.seed, _crc(name), _crc(domain), _crc(cls), _crc(split)])
    contrast = rng.uniform(0.7, 1.3, count)
    shifts = rng.integers(0, 2 * m + 1, (count, 2))
    gen = torch.Generator().manual_seed(int(rng.integers(2**62)))
    x = torch.randn((count, c, size, size), generator=gen).mul_(_NOISE).add_(styled)
    for i in range(count):
        dy, dx = int(shifts[i, 0]), int(shifts[i, 1])
        x[i].add_(template[:, dy:dy + size, dx:dx + size], alpha=float(contrast[i]))
    return x.mul_(40.0).add_(128.0).round_().clamp_(0, 255).to(torch.uint8)


def load_rehearsal(name: str, defaults: Mapping[str, Any], **options: Any) -> ImageDataset:
    """The rehearsal stand-in of loader ``name`` with ``options`` (see the module docstring)."""
    s = served(name, defaults, **options)
    domains = s.domains or ("",)
    parts: dict[str, list[torch.Tensor]] = {k: [] for k in ("train_x", "train_y", "train_d", "test_x", "test_y",
                                                            "test_d")}
    for d_id, domain in enumerate(domains):
        for label, cls in enumerate(s.classes):
            for split, counts in (("train", s.train_per_class), ("test", s.test_per_class)):
                n = counts[d_id]
                parts[f"{split}_x"].append(_block(s, domain, cls, split, n))
                parts[f"{split}_y"].append(torch.full((n,), label, dtype=torch.int64))
                parts[f"{split}_d"].append(torch.full((n,), d_id, dtype=torch.int64))
    cat = {k: torch.cat(v) for k, v in parts.items()}
    multi = s.domains is not None
    return ImageDataset(
        name, cat["train_x"], cat["train_y"], cat["test_x"], cat["test_y"], list(s.classes),
        train_domain=cat["train_d"] if multi else None, test_domain=cat["test_d"] if multi else None,
        domains=list(s.domains) if multi else None,
        train_user=_users(s, len(cat["train_y"])) if s.shape.users else None,
    )


def _users(s: Served, n: int) -> torch.Tensor:
    """A user index per training image: ``users`` users of at least ``user_min`` images and, from
    half of the images left over, users of ``user_min // 2`` images (below the minimum, as most of
    the real dataset's users are); the rest go one by one to the large users. Images are dealt in a
    seeded random order and user ids shuffled, so a user holds a random set of classes."""
    big, least = s.shape.users, s.shape.user_min
    spare = n - big * least
    if spare < 0:
        raise ConfigError(f"rehearsal {s.shape.name!r} serves {n} training images, fewer than its {big} users x "
                          f"{least} images; valid: a row whose min_train leaves enough")
    small_size = max(1, least // 2)
    n_small = (spare // 2) // small_size
    sizes = np.full(big, least, dtype=np.int64)
    sizes += np.bincount(np.arange(spare - n_small * small_size) % big, minlength=big)
    sizes = np.concatenate([sizes, np.full(n_small, small_size, dtype=np.int64)])
    rng = np.random.default_rng([s.seed, _crc(s.shape.name), _crc("users")])
    ids = rng.permutation(sizes.size)
    user = np.empty(n, dtype=np.int64)
    user[rng.permutation(n)] = np.repeat(ids, sizes)
    return torch.from_numpy(user)


def markdown_table() -> str:
    """The rows of :data:`SHAPES` as the markdown table in docs/data.md, with the fraction served
    at each row's own image size (every option at its default)."""
    lines = ["| dataset | size | channels | classes | class names | train / test per class | domains | served |",
             "|---|---|---|---|---|---|---|---|"]
    for key in SHAPES.names():
        row = SHAPES.get(key)
        if row.test_per_class is None:
            per = f"{'/'.join(map(str, row.per_class))} in all, split by test_fraction"
        else:
            per = f"{'/'.join(map(str, row.per_class))} / {'/'.join(map(str, row.test_per_class))}"
        s = served(row.loader, {}, **dict(row.select))
        doms = f"{len(row.domains)}: {', '.join(row.domains)}" if row.domains else "-"
        lines.append(f"| `{key}` | {row.image_size} | {row.channels} | {row.num_classes} | {row.names_from} | "
                     f"{per} | {doms} | {s.fraction:.3g} ({sum(s.train_per_class) * len(s.classes)} / "
                     f"{sum(s.test_per_class) * len(s.classes)} images) |")
    return "\n".join(lines)


__all__ = ["BUDGET_BYTES", "ENV_BUDGET", "DataShape", "FOLDER_LOADERS", "NO_FILES", "SHAPES", "Served", "identity",
           "budget_bytes", "load_rehearsal", "markdown_table", "served"]
