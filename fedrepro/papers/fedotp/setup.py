"""FedOTP's experimental setups at each profile (FedOTP (CVPR 2024) §5.1 and App. B).

:func:`layers` returns the override layers that :func:`fedrepro.papers.setup` applies in order: the
profile's base, then the variant's changes.

The small profiles run on the committed CLIP stand-in (``model.name: clip``, ``arch: standin``)
and on images it never saw: the second half of Fashion-MNIST's training images and its test split,
drawn in the style domains of :mod:`fedrepro.data.fashion_mnist_domains`
(``half: federated``). Only the "original" style was in the stand-in's pretraining; in "noisy"
and "edges" its zero-shot accuracy is well above chance and well below 16-shot CoOp
(docs/backbones.md), so prompts have room to learn, as they have on the paper's datasets.
"""
from __future__ import annotations

import os

from ...errors import ConfigError

# The paper profile's CLIP: a local OpenAI/LAION file named by $FEDREPRO_CLIP_WEIGHTS (read by
# fedrepro.models.clip_model); the data: image folders under the data root (no download).
PAPER_DATASETS = ("food101", "dtd", "caltech101", "flowers102", "oxford_pets")
# The official split gives each of 10 clients a block of round(C/10) shuffled classes and the last
# client the rest (Pets: 4 each, the last 1). Our pathological partitioner gives every client the same
# number, spreading the surplus over clients, so where 10·k exceeds C a few classes are shared.
PAPER_CLASSES_PER_CLIENT = {"food101": 10, "dtd": 5, "caltech101": 10, "flowers102": 10, "oxford_pets": 4}
STANDIN_DATASETS = ("original", "noisy", "edges")
# Table 2/A3's domains at the small profiles: four styles, as Office-Caltech10 has four domains.
STANDIN_DOMAINS = ["original", "noisy", "edges", "tinted"]
DEFAULT_DATASET = {"paper": "caltech101", "laptop": "noisy", "smoke": "noisy"}

BASE_VARIANTS = ("default", "pathological", "dirichlet", "feature_shift", "feature_label_shift", "style_groups")
# The paper's other datasets for a setting (the first is the variant's default); at the small
# profiles these variants are the stand-in's setting itself, so every table resolves everywhere.
PAPER_ONLY = {"dirichlet": ("cifar100", "cifar10"), "feature_shift": ("office_caltech10", "domainnet"),
              "feature_label_shift": ("office_caltech10", "domainnet")}
# Clients per domain under feature + label shift: Table A3 splits each Office domain into 3, Table 2
# each DomainNet domain into 5.
LABEL_SHIFT_CLIENTS = {"office_caltech10": 3, "domainnet": 5}
NUM_DOMAINS = {"office_caltech10": 4, "domainnet": 6}
VARIANTS = (*BASE_VARIANTS, *(f"pathological:{d}" for d in (*STANDIN_DATASETS, *PAPER_DATASETS)),
            *(f"{v}:{d}" for v, ds in PAPER_ONLY.items() for d in ds[1:]))


def datasets(profile: str) -> tuple[str, ...]:
    """Table 1's columns at ``profile``: the paper's five CLIP datasets, the stand-in's styles, or
    one style at smoke."""
    return {"paper": PAPER_DATASETS, "laptop": STANDIN_DATASETS}.get(profile, (DEFAULT_DATASET["smoke"],))


def _styled(style: str) -> dict:
    return {"dataset": "fashion_mnist_domains", "dataset_args": {"styles": [style], "half": "federated"}}


def _image_folder(name: str) -> dict:
    # One folder per dataset under the data root (its class folders inside); CoOp's splits are not
    # reproduced: the loader holds out test_fraction of each class, seeded (a stated gap).
    root = os.environ.get("FEDREPRO_DATA", "data")
    return {"dataset": "image_folder", "dataset_args": {"path": os.path.join(root, name), "image_size": 224}}


def layers(profile: str, variant: str = "default") -> list[dict]:
    """FedOTP (CVPR 2024) §5.1 and App. B.2: a frozen CLIP (ResNet-50 for Table 1, ViT-B/16
    otherwise), CoOp prompts of L = 16 context vectors, SGD (lr 0.001, momentum 0.9, weight decay
    5e-4: the official code's values; the paper does not print them), γ = 0.8, λ = 0.1 (the method's
    defaults). Table 1: 10 clients with disjoint class blocks, all taking part, 10 rounds, few-shot
    (4 shots, our inference from Table A4), E = 5 (the official rn50.yaml), batch 32.

    Small profiles (our choices, scaled for a 2-core CPU): the CLIP stand-in, whose 16-position text
    context leaves room for fewer than 16 context vectors (``n_ctx`` None: as many as fit); Table 1's
    pathological split as 5 clients with 2 disjoint classes each (10 Fashion-MNIST classes cannot
    give 10 clients a block each without leaving one class per client), 4 shots, 10 rounds, E = 5,
    batch 32 (the official code's; one batch holds a client's whole 4-shot set), 500 test images;
    every client evaluated at the last round only (the claims read the final round; the
    learning-curve table evaluates every round).
    The learning rate is each method's best of {0.001, 0.01, 0.1, 1} on seed 0 of the noisy
    pathological split (:data:`fedrepro.papers.fedotp.variants.LR`), the same search for every
    method.

    Variants:

    - ``pathological`` (= ``default``) and ``pathological:<dataset>``: Table 1 (and Tables 4, A4,
      Fig. 3 on the same split); ``<dataset>`` is a style at the small profiles, a CLIP dataset's
      image folder at paper;
    - ``dirichlet``: Tables 3 and A5, Dir(α) label skew, α = 0.3 by default (paper: CIFAR-100, or
      ``dirichlet:cifar10`` for Table 3's other column, 100 clients with 500 training and 100 test
      images each (our reading of the official hierarchical split), 10% taking part, 150 rounds,
      E = 1 with ViT-B/16; small: 20 clients of the noisy style, 40 training and 40 test images
      each, 25% taking part, 10 rounds);

    The ``:<dataset>`` variants of ``dirichlet`` and the feature-shift settings name the paper
    profile's other datasets; at the small profiles they are the stand-in's setting itself.

    - ``feature_shift``: Table A2, one client per domain, the same label distribution (paper:
      Office-Caltech10, 4 clients, or ``feature_shift:domainnet``, 6; small: four styles, one
      client each, 160 training images);
    - ``feature_label_shift``: Tables 2 and A3, each domain split into 3 clients by Dir(0.1)
      (paper: Office-Caltech10's 4 domains into 12 clients, the official default α = 0.1, or
      ``feature_label_shift:domainnet``, Table 2's 6 DomainNet domains into 5 clients each; small:
      four styles into 12 clients);
    - ``style_groups``: Fig. A5's structure, groups of clients that share one data distribution
      (the paper: 5 clients per CIFAR-100 coarse label, its fine labels spread evenly): each domain
      split into 3 clients with the same label distribution (ours: domains rather than coarse
      labels, which the partitioners do not group by).
    """
    if variant not in VARIANTS:
        raise ConfigError(f"unknown fedotp setup variant {variant!r}; valid: {', '.join(VARIANTS)}")
    name, _, dataset = variant.partition(":")
    if name in PAPER_ONLY:
        dataset = dataset or PAPER_ONLY[name][0]
    if name == "default":
        name = "pathological"
    train = {"momentum": 0.9, "weight_decay": 5e-4}
    if profile == "paper":
        model = {"name": "clip", "args": {"arch": "RN50"}}
        table1 = dataset if name == "pathological" and dataset else DEFAULT_DATASET["paper"]
        data = {**_image_folder(table1), "partition": "pathological",
                "num_clients": 10, "partition_args": {"classes_per_client": PAPER_CLASSES_PER_CLIENT[table1], "shots": 4},
                "max_train": None, "max_test": None}
        train = {**train, "lr": 0.001, "rounds": 10, "local_epochs": 5, "batch_size": 32, "participation": 1.0,
                 "eval_every": 1}
    else:
        model = {"name": "clip", "args": {"arch": "standin"}}
        smoke = profile == "smoke"
        if name == "pathological" and dataset and dataset not in STANDIN_DATASETS:
            raise ConfigError(f"fedotp setup {variant!r}: at the {profile} profile the datasets are the styles "
                              f"{', '.join(STANDIN_DATASETS)}")
        style = dataset if name == "pathological" and dataset else DEFAULT_DATASET[profile]
        data = {**_styled(style), "partition": "pathological",
                "num_clients": 5, "partition_args": {"classes_per_client": 2, "shots": 4},
                "max_train": None, "max_test": 100 if smoke else 500}
        rounds = 2 if smoke else 10
        train = {**train, "lr": 0.01, "rounds": rounds, "local_epochs": 1 if smoke else 5, "batch_size": 32,
                 "participation": 1.0, "eval_every": rounds}
    base = {"data": data, "model": model, "train": train}
    extra: dict = {}
    if name == "dirichlet":
        if profile == "paper":
            extra = {"data": {"dataset": dataset, "dataset_args": {}, "partition": "fixed_dirichlet",
                              "num_clients": 100, "partition_args": {"alpha": 0.3, "train_per_client": 500,
                                                                     "test_per_client": 100}},
                     "model": {"name": "clip", "args": {"arch": "ViT-B-16"}},
                     "train": {"rounds": 150, "local_epochs": 1, "participation": 0.1}}
        else:
            per = (20, 20) if profile == "smoke" else (40, 40)
            extra = {"data": {"partition": "fixed_dirichlet", "num_clients": 8 if profile == "smoke" else 20,
                              "partition_args": {"alpha": 0.3, "train_per_client": per[0],
                                                 "test_per_client": per[1]},
                              "max_test": None},
                     "train": {"participation": 0.25}}
    elif name in ("feature_shift", "feature_label_shift", "style_groups"):
        per_domain = 1 if name == "feature_shift" else 3
        domains = 4
        if profile == "paper":
            dataset = dataset or PAPER_ONLY["feature_shift"][0]
            if name == "feature_label_shift":
                per_domain = LABEL_SHIFT_CLIENTS[dataset]
            domains = NUM_DOMAINS[dataset]
            data = {"dataset": dataset, "dataset_args": {"image_size": 224}}
            extra_model = {"model": {"name": "clip", "args": {"arch": "ViT-B-16"}}}
        else:
            data = {"dataset": "fashion_mnist_domains", "dataset_args": {"styles": STANDIN_DOMAINS, "half": "federated"}}
            extra_model = {}
        alpha = 0.1 if name == "feature_label_shift" else None
        partition_args = {"clients_per_domain": per_domain, "alpha": alpha}
        if profile != "paper":
            # ours: a few-shot budget per client, as in the label-shift tables
            data["max_train"] = 160 * per_domain if profile == "laptop" else 40 * per_domain
            data["max_test"] = 400 * per_domain if profile == "laptop" else 80 * per_domain
        extra = {"data": {**data, "partition": "domain_dirichlet", "num_clients": domains * per_domain,
                          "partition_args": partition_args}, **extra_model}
    return [base, extra]
