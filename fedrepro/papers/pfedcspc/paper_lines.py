"""pFedCSPC's setup line by line against the paper profile (:mod:`fedrepro.papers.paper_lines`):
Tables II and III on each dataset, Table IV's half participation and Table VII's β = 0.1. Sources
are pFedCSPC (TNNLS)'s sections; the paraphrases are ours. Our copy of §V-A3 has lost its inline
values after the batch size and rounds (each reads "I=0.01", the same string for the learning rate,
the weight decay, the Dirichlet parameter and the cluster count), so those rows say so. pFedCSPC
learns no prompts: there are no prompt rows."""
from __future__ import annotations

from ..paper_lines import (Line, Setting, across, augment, batch_size, clients, input_size, local_epochs, lr, lr_grid,
                           model, model_args, momentum, per_round, rounds, split, weight_decay, with_args)

M, A = "method.name", "data.partition_args.alpha"
_A3 = "§V-A3: for every method N = 10 clients, sample fraction C = 1.0, E = 10 local epochs, B = 64"
_T = "§V-A3: T = 100 rounds on CIFAR10 and CIFAR100, T = 50 on TinyImagenet and VireoFood172"
_LOST = "§V-A3: SGD for local training; the rate's value is lost in our copy (it reads 'I=0.01')"
_HEAD = ("§V-B: every method is an image encoder, a two-layer MLP projection head and a linear classifier; the "
         "head's width is not given")


def _model(r) -> str:
    return with_args(model(r), model_args(r))


def _weights(r) -> str:
    return str(model_args(r).get("weights") or "none (trained from scratch)")


def _drawn(r) -> tuple:
    d = r.cfg.data
    return d.max_train or "all", d.max_test or "all"


def _arch(expect: str, ours: str) -> bool:
    return ours.split(" ")[0] == expect


def _lines(rounds_paper: int, arch: str, arch_ours: str, arch_source: str) -> tuple[Line, ...]:
    return (
        Line("clients", "N = 10", _A3, clients, 10),
        Line("clients per round", "all 10 (C = 1.0)", _A3, per_round, 10),
        Line("rounds", f"T = {rounds_paper}", _T, rounds, rounds_paper),
        Line("local epochs", "E = 10", _A3, local_epochs, 10),
        Line("batch size", "B = 64", _A3, batch_size, 64),
        Line("optimiser: momentum", "SGD; momentum not stated", "§V-A3 names SGD and no momentum", momentum),
        Line("optimiser: weight decay", "lost in the text", "§V-A3: a weight decay whose value reads 'I=0.01'",
             weight_decay),
        Line("learning rate", "lost in the text", _LOST, lr),
        Line("learning-rate search (every row's)", "none: one rate for every method",
             "§V-A3: the same settings 'for all methods'", lr_grid, None),
        Line("model", arch, arch_source, _model, arch_ours, agree=_arch),
        Line("model: projection head width", "not stated", _HEAD, lambda r: model_args(r).get("projection_dim")),
        Line("pretrained weights", "not stated (trained from scratch, as we read §V-B)", "§V-B names the "
             "architectures only", _weights),
        Line("input size", "not stated", "§V-A1 and Table I give the datasets' sizes in images, not pixels",
             input_size),
        Line("training augmentation", "not stated", "§V-A names none", augment),
        Line("data split", "Dirichlet over the training set; each client's test set follows its training "
             "distribution", "§V-A1: the training set is split by a Dirichlet distribution, and a client's test set "
             "has its training set's distribution", split, "dirichlet", agree=lambda e, o: o.startswith(e)),
        Line("data split: β", "lost in the text; Tables IV-VI's captions give β = 0.5",
             "§V-A3: the Dirichlet parameter reads 'I=0.01'", across(A)),
        Line("data split: images drawn (train, test)", "the whole training and test sets",
             "§V-A1 and Table I: the datasets' full splits", _drawn, ("all", "all")),
    )


_CNN = ("§V-B: on CIFAR10 the encoder is a CNN of two 5×5 convolutions, each followed by 2×2 max-pooling, and two "
        "fully connected ReLU layers (MOON's)")
_RESNET = "§V-B: on the other datasets a ResNet18 without its last fully connected layer"

SETTINGS = (
    Setting("Tables II-III, CIFAR10 (pFedCSPC)", "main_default",
            _lines(100, "MOON's two-conv CNN", "moon_cnn", _CNN), row={M: "pfedcspc"}),
    Setting("Tables II-III, CIFAR100 (pFedCSPC)", "main_cifar100",
            _lines(100, "ResNet18", "resnet18", _RESNET), row={M: "pfedcspc"}),
    Setting("Tables II-III, TinyImagenet (pFedCSPC)", "main_tiny_imagenet",
            _lines(50, "ResNet18", "resnet18", _RESNET), row={M: "pfedcspc"}),
    Setting("Tables II-III, VireoFood172 (pFedCSPC)", "main_vireo172",
            _lines(50, "ResNet18", "resnet18", _RESNET), row={M: "pfedcspc"}),
    Setting("Table IV, CIFAR10, C = 0.5 (pFedCSPC)", "ablation_global", (
        Line("clients per round", "5 of 10 (C = 0.5)", "Table IV's caption: sample fractions C = 0.5 and 1.0",
             per_round, 5),
        Line("data split: β", "0.5", "Table IV's caption: β = 0.5", across(A), (0.5,)),
    ), row={M: "pfedcspc"}, column="C10 C=0.5"),
    Setting("Table VII, CIFAR10, β = 0.1 (pFedCSPC)", "rounds_beta0.1", (
        Line("data split: β", "0.1", "Table VII's caption: β = 0.1 and 0.5", across(A), (0.1,)),
    ), row={M: "pfedcspc"}, column="C10 β=0.1"),
)
