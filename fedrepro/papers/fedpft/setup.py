"""FedPFT's experimental setups at each profile (ICLR §4.1 and App. D; arXiv §4.1 and App. B).

:func:`layers` returns the override layers that :func:`fedrepro.papers.setup` applies in order:
the profile's base, then the variant's changes.
"""
from __future__ import annotations

from ...config import make_config
from ...errors import ConfigError


VARIANTS = ("default", "cifar100", "tiny_imagenet", "pathological", "pathological_cifar100",
            "pathological_tiny_imagenet", "feature_shift", "feature_shift_pacs", "100_clients", "resnet18", "tsne")
# FedPFT (ICLR) §4.1: every client holds 500 training images and 100 test images, 200 on Tiny-ImageNet.
TEST_PER_CLIENT = {"cifar10": 100, "cifar100": 100, "tiny_imagenet": 200}
# FedPFT (ICLR) App. D.1: the pathological split gives each client 2, 20 and 40 classes of CIFAR-10,
# CIFAR-100 and Tiny-ImageNet ("equal data volume per class"); the variant names its dataset at the
# paper profile.
PATHOLOGICAL = {"pathological": "cifar10", "pathological_cifar100": "cifar100",
                "pathological_tiny_imagenet": "tiny_imagenet"}
CLASSES_PER_CLIENT = {"cifar10": 2, "cifar100": 20, "tiny_imagenet": 40}
# FedPFT (ICLR) App. I, Table 10: one client per domain, PACS's 4 and DomainNet's 6.
FEATURE_SHIFT = {"feature_shift": ("domainnet", 6), "feature_shift_pacs": ("pacs", 4)}
# PACS (Li et al. 2017) has no test split, and its smallest domain (photo, 1,670 images) must give
# 1000 training and 500 test images: a third of each class is held out (the loader's default fifth
# would leave about 330).
PACS_TEST_FRACTION = 0.33


def _resnet10_on(dataset: str) -> dict:
    """FedPFT (ICLR) §4.1: ResNet-10 on CIFAR-100 and Tiny-ImageNet, with their per-client counts."""
    return {"data": {"dataset": dataset, "partition_args": {
                "alpha": 0.5, "train_per_client": 500, "test_per_client": TEST_PER_CLIENT[dataset]}},
            "model": {"name": "resnet10", "args": {"width": 64}}}


def layers(profile: str, variant: str = "default") -> list[dict]:
    """FedPFT (ICLR) §4.1 and App. D.3: fixed train/test counts per client (500/100), ResNet-8, R = 5 local epochs
    for every method, SGD lr 0.1 (0.05 at the laptop's smaller batch), best and final round reported.

    Laptop: Fashion-MNIST stands in for CIFAR-10 (10 classes), 10 clients × 200/100 images, a
    width-8 ResNet-8 (m = 32) and 50 rounds (about 30-60 s per run on one core). 50 is the smallest
    budget at which FedAvg's mean-client curve is flat at every α in a pilot over 3 seeds and 100
    rounds (bench/fedpft_rounds_pilot.txt; rule of :mod:`fedrepro.analysis.by_round`). FedPFT's
    best round moves by under a point from 50 to 100 rounds, but some of its runs swing from one
    5-round window to the next, so they stay "not flat" at budgets the laptop can afford; the
    pilot finds FedPFT − FedAvg's verdict unchanged from 20 to 100 rounds, and notebook 17 shows
    each claim's verdict as the rounds grow.

    Variants (ICLR §4.1, App. D.1): ``cifar100`` / ``tiny_imagenet`` (paper: ResNet-10, Table 2; the laptop
    has no stand-in and keeps Fashion-MNIST), ``pathological`` (2 classes per client) and at the
    paper profile ``pathological_cifar100`` / ``pathological_tiny_imagenet`` (20 / 40 classes per
    client on ResNet-10, Table 7; the laptop's are its ``pathological``), ``feature_shift`` (ICLR
    App. I, one domain per client: DomainNet's 6 at paper, the 6 Fashion-MNIST styles at laptop) and
    ``feature_shift_pacs`` (PACS's 4 at paper; the laptop's is its ``feature_shift``),
    ``100_clients`` and ``resnet18`` (ICLR App. J), ``tsne`` (the t-SNE figures' 10 clients ×
    1000/500 images at the paper profile, ICLR §4.4).
    """
    if variant not in VARIANTS:

        raise ConfigError(f"unknown fedpft setup variant {variant!r}; valid: {', '.join(VARIANTS)}")
    paper = profile == "paper"
    if paper:
        base = {"data": {"dataset": "cifar10", "partition": "fixed_dirichlet", "num_clients": 40,
                         "partition_args": {"alpha": 0.5, "train_per_client": 500, "test_per_client": 100}},
                "model": {"name": "resnet8", "args": {"width": 64}},
                "train": {"rounds": 1000, "local_epochs": 5, "batch_size": 100, "lr": 0.1}}
    elif profile == "laptop":
        base = {"data": {"dataset": "fashion_mnist", "partition": "fixed_dirichlet", "num_clients": 10,
                         "partition_args": {"alpha": 0.5, "train_per_client": 200, "test_per_client": 100}},
                "model": {"name": "resnet8", "args": {"width": 8}},
                "train": {"rounds": 50, "local_epochs": 5, "batch_size": 50, "lr": 0.05}}
    else:
        base = {"train": {"local_epochs": 2}}
    width = 64 if paper else 8
    dataset = PATHOLOGICAL.get(variant, "cifar10")
    if paper and dataset != "cifar10":
        layer = _resnet10_on(dataset)
        base = {**base, "data": {**base["data"], **layer["data"]}, "model": layer["model"]}
    resolved = make_config(profile, overrides=base).data  # the smoke profile's own sizes
    n, per = resolved.num_clients, resolved.partition_args
    extra: dict = {}
    if variant in ("cifar100", "tiny_imagenet") and paper:
        extra = _resnet10_on(variant)
    elif variant in PATHOLOGICAL and dataset != "cifar10" and paper:
        # 20 / 40 classes hold 25 / 12.5 of a client's 500 training images each: fixed_dirichlet's
        # pathological mode (no α) rounds them so that every client keeps exactly 500 training and
        # 100 / 200 test images (ICLR §4.1), which splitting each class among its holders cannot.
        extra = {"data": {"partition_args": {"alpha": None, "classes_per_client": CLASSES_PER_CLIENT[dataset]}}}
    elif variant in PATHOLOGICAL:
        # The partitioner splits each class among its holders; subsampling fixes the per-client count.
        extra = {"data": {"partition": "pathological", "partition_args": {"classes_per_client": 2},
                          "max_train": n * per["train_per_client"], "max_test": n * per["test_per_client"]}}
    elif variant in FEATURE_SHIFT:
        counts = {"train_per_client": 1000, "test_per_client": 500} if paper else \
            {k: per[k] for k in ("train_per_client", "test_per_client")}
        name, domains = FEATURE_SHIFT[variant] if paper else ("fashion_mnist_domains", 6)
        data = {"dataset": name, "partition": "domain", "num_clients": domains, "partition_args": counts}
        if name == "pacs":
            data["dataset_args"] = {"test_fraction": PACS_TEST_FRACTION}
        extra = {"data": data, "model": {"name": "resnet10" if paper else "resnet8", "args": {"width": width}}}
    elif variant == "100_clients":
        counts = {"alpha": 0.5, "train_per_client": 500, "test_per_client": 100} if paper else \
            {"alpha": 0.5, "train_per_client": 40, "test_per_client": 40}
        # Laptop: the base budget, as every table a claim reads (100 clients × 40 images is twice the
        # base run's images per round).
        extra = {"data": {"num_clients": 100, "partition_args": counts}}
        if profile == "smoke":
            extra = {"data": {"num_clients": 8}}
    elif variant == "tsne" and paper:
        # ICLR §4.4 (Fig. 4) and §4.6 (Fig. 5): "10 clients, each allocated 1000 training images and
        # 500 testing images" of CIFAR-10. The paper names no α; ours is the notebook's (0.5 unless
        # overridden). The laptop and smoke profiles already have 10 clients (and reuse the main
        # table's runs), so the variant changes nothing there.
        extra = {"data": {"num_clients": 10, "partition_args": {"train_per_client": 1000, "test_per_client": 500}}}
    elif variant == "resnet18":
        extra = {"model": {"name": "resnet18", "args": {"width": width}}}
    return [base, extra]
