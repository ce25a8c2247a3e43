"""FedPFT's experimental setups at each profile (ICLR §4.1 and App. D; arXiv §4.1 and App. B).

``BASE`` is each profile's base config and ``CHANGES`` what each variant changes at each profile
(the form is :mod:`fedrepro.papers.setup_data`'s); :func:`layers` returns ``[base, change]`` for
:func:`fedrepro.papers.setup`.

Every method trains with R = 5 local epochs and SGD, and reports its best and final round
(ICLR App. D.3).
"""
from __future__ import annotations

from .. import setup_data

BASE = {
    # FedPFT (ICLR) §4.1: "we set the number of clients N = 40, batch size B = 100, and local update
    # rounds R = 5 ... T = 1000"; "each client is assigned 500 training samples" and 100 test
    # samples of CIFAR-10; ResNet-8 on CIFAR-10. App. D.3: lr 0.1. Dir(0.5) as the tables' default α.
    "paper": {"data": {"dataset": "cifar10", "partition": "fixed_dirichlet", "num_clients": 40,
                       "partition_args": {"alpha": 0.5, "train_per_client": 500, "test_per_client": 100}},
              "model": {"name": "resnet8", "args": {"width": 64}},
              "train": {"rounds": 1000, "local_epochs": 5, "batch_size": 100, "lr": 0.1}},
    # Ours: Fashion-MNIST stands in for CIFAR-10 (10 classes), 10 clients × 200/100 images, a width-8
    # ResNet-8 (m = 32), lr 0.05 at the smaller batch of 50; about 30-60 s per run on one core.
    # 50 rounds: the smallest budget at which FedAvg's mean-client curve is flat at every α in a
    # pilot over 3 seeds and 100 rounds (bench/fedpft_rounds_pilot.txt; rule of
    # fedrepro.analysis.by_round). FedPFT's best round moves by under a point from 50 to 100
    # rounds, but some of its runs swing from one 5-round window to the next, so they stay "not
    # flat" at budgets the laptop can afford; the pilot finds FedPFT − FedAvg's verdict unchanged
    # from 20 to 100 rounds, and notebook 17 shows each claim's verdict as the rounds grow.
    # Every run trains 25 rounds, then on until its curve is flat by the same rule, up to the 50
    # (train.stop_when_flat from train.flat_from = 25). Replayed on the stored 50-round runs
    # (bench/levers.py), that stop leaves all 17 verdicts that can be read by round as they were;
    # from round 0 it would change two of them. Methods whose schedule reads train.rounds (the
    # two-stage baseline) train all their rounds. The stop watches the accuracy curve, not what the
    # mismatch and linear probes measure on the final model: trained with the stop everywhere, three
    # probe verdicts moved (FedPFT's Origin under feature shift was 55.8 at the stop, 58.5 at 50
    # rounds). So the tables the probes read, and the attention claim's runs, train the full 50
    # (TableDef.final_models); with them, every FedPFT verdict is as at a fixed 50 rounds.
    "laptop": {"data": {"dataset": "fashion_mnist", "partition": "fixed_dirichlet", "num_clients": 10,
                        "partition_args": {"alpha": 0.5, "train_per_client": 200, "test_per_client": 100}},
               "model": {"name": "resnet8", "args": {"width": 8}},
               "train": {"rounds": 50, "stop_when_flat": True, "flat_from": 25,
                         "local_epochs": 5, "batch_size": 50, "lr": 0.05}},
    # Ours: the smoke profile's own sizes (4 clients × 200/50 images, 2 rounds), 2 local epochs so
    # that FedPFT's R_f/R_a phases both run.
    "smoke": {"train": {"local_epochs": 2}},
}

# The pathological split at each profile: the partitioner splits each class among its holders, so
# max_train / max_test (clients × images per client of the profile's base) fix the per-client count.
_PATHOLOGICAL_2 = {"partition": "pathological", "partition_args": {"classes_per_client": 2}}

CHANGES = {
    "default": {"paper": {}, "laptop": {}, "smoke": {}},
    # FedPFT (ICLR) §4.1, Table 2: "ResNet-10 for CIFAR-100 and Tiny ImageNet", 100 test images per
    # client on CIFAR-100, 200 on Tiny-ImageNet. The small profiles have no stand-in and keep their base.
    "cifar100": {
        "paper": {"data": {"dataset": "cifar100", "partition_args": {
                      "alpha": 0.5, "train_per_client": 500, "test_per_client": 100}},
                  "model": {"name": "resnet10", "args": {"width": 64}}},
        "laptop": {}, "smoke": {}},
    "tiny_imagenet": {
        "paper": {"data": {"dataset": "tiny_imagenet", "partition_args": {
                      "alpha": 0.5, "train_per_client": 500, "test_per_client": 200}},
                  "model": {"name": "resnet10", "args": {"width": 64}}},
        "laptop": {}, "smoke": {}},
    # FedPFT (ICLR) App. D.1: "we assign 2, 20, and 40 classes of data to each client" of CIFAR-10,
    # CIFAR-100 and Tiny-ImageNet, "with equal data volume per class" (Table 7).
    "pathological": {
        "paper": {"data": {**_PATHOLOGICAL_2, "max_train": 40 * 500, "max_test": 40 * 100}},
        "laptop": {"data": {**_PATHOLOGICAL_2, "max_train": 10 * 200, "max_test": 10 * 100}},
        "smoke": {"data": {**_PATHOLOGICAL_2, "max_train": 4 * 200, "max_test": 4 * 50}}},
    # 20 / 40 classes hold 25 / 12.5 of a client's 500 training images each: fixed_dirichlet's
    # pathological mode (no α) rounds them so that every client keeps exactly 500 training and
    # 100 / 200 test images (ICLR §4.1), which splitting each class among its holders cannot.
    # The small profiles' pathological split is their ``pathological``.
    "pathological_cifar100": {
        "paper": {"on": "cifar100", "data": {"partition_args": {"alpha": None, "classes_per_client": 20}}},
        "laptop": {"on": "pathological"}, "smoke": {"on": "pathological"}},
    "pathological_tiny_imagenet": {
        "paper": {"on": "tiny_imagenet", "data": {"partition_args": {"alpha": None, "classes_per_client": 40}}},
        "laptop": {"on": "pathological"}, "smoke": {"on": "pathological"}},
    # FedPFT (ICLR) App. I, Table 10: "PACS and DomainNet have four and six domains, respectively,
    # with each domain assigned to one client ... 1000 training samples and 500 testing samples" per
    # client. App. I names no model; ResNet-10 is our choice. Small profiles: the 6 Fashion-MNIST
    # styles, one per client, at the base's model and per-client counts.
    "feature_shift": {
        "paper": {"data": {"dataset": "domainnet", "partition": "domain", "num_clients": 6,
                           "partition_args": {"train_per_client": 1000, "test_per_client": 500}},
                  "model": {"name": "resnet10", "args": {"width": 64}}},
        "laptop": {"data": {"dataset": "fashion_mnist_domains", "partition": "domain", "num_clients": 6,
                            "partition_args": {"train_per_client": 200, "test_per_client": 100}},
                   "model": {"name": "resnet8", "args": {"width": 8}}},
        "smoke": {"data": {"dataset": "fashion_mnist_domains", "partition": "domain", "num_clients": 6,
                           "partition_args": {"train_per_client": 200, "test_per_client": 50}},
                  "model": {"name": "resnet8", "args": {"width": 8}}}},
    # PACS (Li et al. 2017) has no test split, and its smallest domain (photo, 1,670 images) must give
    # 1000 training and 500 test images: a third of each class is held out (the loader's default
    # fifth would leave about 330). The small profiles' feature shift is their ``feature_shift``.
    "feature_shift_pacs": {
        "paper": {"on": "feature_shift", "data": {"dataset": "pacs", "num_clients": 4,
                                                  "dataset_args": {"test_fraction": 0.33}}},
        "laptop": {"on": "feature_shift"}, "smoke": {"on": "feature_shift"}},
    # FedPFT (ICLR) App. J, Table 11: "experiments with 100 clients". Laptop: 100 clients × 40 images,
    # the base budget as every table a claim reads (twice the base run's images per round).
    "100_clients": {
        "paper": {"data": {"num_clients": 100,
                           "partition_args": {"alpha": 0.5, "train_per_client": 500, "test_per_client": 100}}},
        "laptop": {"data": {"num_clients": 100,
                            "partition_args": {"alpha": 0.5, "train_per_client": 40, "test_per_client": 40}}},
        "smoke": {"data": {"num_clients": 8}}},
    # FedPFT (ICLR) App. J, Table 12: "experiments using ResNet-18", at the base's width.
    "resnet18": {
        "paper": {"model": {"name": "resnet18", "args": {"width": 64}}},
        "laptop": {"model": {"name": "resnet18", "args": {"width": 8}}},
        "smoke": {"model": {"name": "resnet18", "args": {"width": 8}}}},
    # FedPFT (ICLR) §4.4 (Fig. 4) and §4.6 (Fig. 5): "10 clients, each allocated 1000 training images
    # and 500 testing images" of CIFAR-10. The paper names no α; ours is the notebook's (0.5 unless
    # overridden). The small profiles already have 10 clients (and reuse the main table's runs).
    "tsne": {
        "paper": {"data": {"num_clients": 10, "partition_args": {"train_per_client": 1000, "test_per_client": 500}}},
        "laptop": {}, "smoke": {}},
}

VARIANTS = tuple(CHANGES)


def layers(profile: str, variant: str = "default") -> list[dict]:
    """``[base, change]``: :data:`BASE` at ``profile``, then :data:`CHANGES` of ``variant`` there."""
    return setup_data.layers("fedpft", BASE, CHANGES, profile, variant)
