"""PEP-FedPT's setup line by line against the paper profile (:mod:`fedrepro.papers.paper_lines`):
Table 1 (CIFAR-100 and Tiny-ImageNet, pathological and Dir(0.3)), Table 2 (DomainNet and
iNaturalist), Table 3 (held-out clients) and Table 13's iNaturalist columns. Sources are PEP-FedPT
(arXiv)'s sections (its setup is in §5's paragraphs Datasets, Setup, Model Details and Evaluation
Methodology, before §5.1); the paraphrases are ours."""
from __future__ import annotations

import inspect

from ...models.registry import MODELS
from ...models.vit import IN21K_TAGS, VIT_B16
from ...methods.pep_fedpt import ccmp_blocks
from .tables import LATE_FRACTION
from ..paper_lines import (Line, Setting, augment, batch_size, class_options, clients, held_out, input_size,
                           keeps_classes, local_epochs, lr, method_arg, model, momentum, partition_arg, per_round,
                           rounds, searched, show_classes, split, weight_decay, with_args)

M = "method.name"
_SETUP = "§5 Setup"
_CLIENTS = "§5 Setup: 100 clients on CIFAR-100, 200 on Tiny-ImageNet, 5 chosen at random each round"
_A32 = "App. A.3.2"
_OPT = "App. A.3.2: SGD with momentum 0.9 at learning rate 0.1, decayed exponentially"
_ROUNDS = "App. A.3.2: 100 rounds on CIFAR-100 and Tiny-ImageNet, 50 on DomainNet, 500 on iNaturalist"
_EPOCHS = "App. A.3.2: 5 epochs in every experiment but iNaturalist's 2"
_MODEL = "§5 Model Details: ViT-B/16 pretrained on ImageNet-21K; only the prompts and the head are tuned"
_SIZE = "§5 Model Details: inputs resized to 224×224, the size ViT-B/16 was trained at"
_CCMP = "App. A.3.2: class prompts (CCMP) at layers 5, 6 and 7"


def _model(r) -> str:
    return with_args(model(r), {k: v for k, v in r.cfg.model.args.items() if k != "weights"})


def _tag(r) -> str:
    """The pretrained tag the model loads its local weights file as (the builder's default unless set)."""
    default = inspect.signature(MODELS.get(r.cfg.model.name)).parameters.get("tag")
    tag = r.cfg.model.args.get("tag", None if default is None else default.default)
    return f"{tag} (file: {r.cfg.model.args.get('weights')})"


def _drawn(r) -> tuple:
    d = r.cfg.data
    return d.max_train or "all", d.max_test or "all"


def _in21k(expect, ours: str) -> bool:
    return ours.split(" ")[0] in expect


def _prompt_lr(r) -> float:
    return r.cfg.train.prompt_lr or r.cfg.train.lr


def _ccmp_layers(r) -> tuple:
    """CCMP's layers, 1-indexed as the paper counts them, on ViT-B/16's depth."""
    return tuple(b + 1 for b in ccmp_blocks(r.params, VIT_B16.depth))


def _optimiser(n_shared: int, n_shared_source: str) -> tuple[Line, ...]:
    return (
        Line("batch size", "not stated", "App. A.3.2 and §5 give none", batch_size),
        Line("optimiser: momentum", "SGD, momentum 0.9", _OPT, momentum, 0.9),
        Line("optimiser: weight decay", "not stated", "App. A.3.2 gives none", weight_decay),
        Line("learning rate (head)", "0.1", _OPT, lr, 0.1),
        Line("learning rate (prompts)", "0.1 (one optimiser for prompts and head)", _OPT, _prompt_lr, 0.1),
        Line("learning-rate search", "none", "App. A.3.2 gives one rate",
             lambda r: searched(r, "train.lr") or searched(r, "train.prompt_lr"), None),
        Line("learning rate: decay per round", "exponential; its rate not stated", _OPT, method_arg("lr_decay")),
        Line("gradient clipping", "10", "App. A.3.2: gradients clipped at 10, after Acar et al.",
             method_arg("grad_clip"), 10.0),
        Line("model", "ViT-B/16, frozen", _MODEL, _model, "vit_b16", agree=lambda e, o: o.split(" ")[0] == e),
        Line("pretrained weights", "ImageNet-21K", _MODEL, _tag, IN21K_TAGS, agree=_in21k),
        Line("input size", "224", _SIZE, input_size, 224),
        Line("training augmentation", "not stated", "§5 and App. A.3 name none", augment),
        Line("prompts: shared n_S", str(n_shared), n_shared_source, method_arg("n_shared"), n_shared),
        Line("prompts: CCMP layers (counted from 1)", "5, 6, 7", _CCMP, _ccmp_layers, (5, 6, 7)),
        Line("prompts: temperature τ", "0.05", "App. A.3.2: τ = 0.05 in every experiment", method_arg("tau"), 0.05),
    )


_NS1 = "App. A.3.2: n_S = 1 in every experiment but Tiny-ImageNet Dir(0.3)"
_NS5 = "App. A.3.2: n_S = 5 for Tiny-ImageNet Dir(0.3)"


def _label(n_clients: int, paper_split: str, expect_split: str, n_shared: int,
           ns_source: str) -> tuple[Line, ...]:
    return (
        Line("clients", str(n_clients), _CLIENTS, clients, n_clients),
        Line("clients per round", "5", _CLIENTS, per_round, 5),
        Line("rounds", "100", _ROUNDS, rounds, 100),
        Line("local epochs", "5", _EPOCHS, local_epochs, 5),
        *_optimiser(n_shared, ns_source),
        Line("data split", paper_split, f"{_SETUP}: pathological, 10 classes per client, or Dir(β) with β = 0.3; "
             "clients' data disjoint", split, expect_split, agree=lambda e, o: o.startswith(e)),
        Line("data split: images drawn (train, test)", "the whole dataset, no sample on two clients",
             f"{_SETUP}: the split is disjoint; §5 Datasets gives the datasets' full sizes", _drawn, ("all", "all")),
    )


_INAT = ("§5 Setup: the federated iNaturalist of Hsu et al. (2020), at least 16 training images a client, about "
         "100k training images over 1018 clients and 1203 classes")


def _late_worst(r) -> tuple:
    """(the last rounds, of all rounds) over which our iNaturalist Worst Acc is the minimum mean accuracy."""
    return round(LATE_FRACTION * r.cfg.train.rounds), r.cfg.train.rounds


def _inat(n_clients: int, held: int | None) -> tuple[Line, ...]:
    return (
        Line("clients", f"{n_clients} (at least 16 training images each)", _INAT, clients, n_clients),
        Line("data split", "one client per user of at least 16 training images", _INAT, split,
             "by_user (min_train=16)", agree=lambda e, o: o.startswith(e)),
        Line("clients per round", "not stated (\"a very low participation rate\")", "App. A.3.2's footnote to Table "
             "2's Worst Acc", per_round),
    )


_PATH = "pathological (classes_per_client=10)"
_DIR = "dirichlet (alpha=0.3"

SETTINGS = (
    Setting("Table 1, CIFAR-100, pathological (PEP-FedPT)", "label_pathological",
            _label(100, "pathological, 10 classes per client", _PATH, 1, _NS1),
            row={M: "pep_fedpt"}),
    Setting("Table 1, CIFAR-100, Dir(0.3) (PEP-FedPT)", "label_dirichlet",
            _label(100, "Dir(β), β = 0.3", _DIR, 1, _NS1), row={M: "pep_fedpt"}),
    Setting("Table 1, Tiny-ImageNet, pathological (PEP-FedPT)", "label_tiny_imagenet",
            _label(200, "pathological, 10 classes per client", _PATH, 1, _NS1),
            row={M: "pep_fedpt"}),
    Setting("Table 1, Tiny-ImageNet, Dir(0.3) (PEP-FedPT)", "label_tiny_imagenet_dirichlet",
            _label(200, "Dir(β), β = 0.3", _DIR, 5, _NS5), row={M: "pep_fedpt"}),
    Setting("Table 2, DomainNet (PEP-FedPT)", "feature_shift", (
        Line("clients", "60, 10 per domain", f"{_SETUP}: each of the 6 domains split among 10 of 60 clients", clients,
             60),
        Line("clients per domain", "10", f"{_SETUP}: each domain allocated to 10 clients",
             partition_arg("clients_per_domain"), 10),
        Line("clients per round", "6", f"{_SETUP}: 6 clients sampled at random each round", per_round, 6),
        Line("data split within a domain", "not stated", f"{_SETUP} and App. A.3.1 say only that each domain goes to "
             "its 10 clients", split),
        Line("rounds", "50", _ROUNDS, rounds, 50),
        Line("local epochs", "5", _EPOCHS, local_epochs, 5),
        Line("classes", "the 10 most frequent", "§5 Datasets: the top ten classes, after Yang et al. (2023)",
             class_options, 10, agree=keeps_classes, show=show_classes),
        Line("input size", "224", _SIZE, input_size, 224),
        Line("prompts: CCMP layers (counted from 1)", "5, 6, 7", _CCMP, _ccmp_layers, (5, 6, 7)),
    ), row={M: "pep_fedpt"}),
    Setting("Table 2, iNaturalist (PEP-FedPT)", "inaturalist", (
        *_inat(1018, None),
        Line("rounds", "500", _ROUNDS, rounds, 500),
        Line("local epochs", "2", _EPOCHS, local_epochs, 2),
        Line("input size", "224", _SIZE, input_size, 224),
        Line("Worst Acc: its last rounds (of all)", "the minimum accuracy over the final 250 of 500 rounds",
             "App. A.3.2's footnote to Table 2: on iNaturalist the worst client scores 0 under every method",
             _late_worst, (250, 500)),
    ), row={M: "pep_fedpt"}),
    Setting("Table 3, CIFAR-100, held-out clients (PEP-FedPT)", "heldout", (
        Line("clients", "100", _CLIENTS, clients, 100),
        Line("held-out clients", "10 (10%)", "§5 Evaluation Methodology: 90% of clients train, 10% are kept for "
             "testing", held_out, 10),
        Line("clients per round", "5", _CLIENTS, per_round, 5),
        Line("data split", "pathological, 10 classes per client", "§5.1.3 and Table 3's caption: the held-out "
             "evaluation on the pathological split", split, _PATH, agree=lambda e, o: o.startswith(e)),
    ), row={M: "pep_fedpt"}),
    Setting("Table 13, iNaturalist, held-out clients (PEP-FedPT)", "heldout_inaturalist", (
        *_inat(1018, 102),
        Line("held-out clients", "102 (916 train)", "App. A.4.7: about 916 clients trained and 102 were held out",
             held_out, 102),
    ), row={M: "pep_fedpt"}),
    Setting("Table 3, Tiny-ImageNet, held-out clients (PEP-FedPT)", "heldout_tiny_imagenet", (
        Line("clients", "200", _CLIENTS, clients, 200),
        Line("held-out clients", "20 (10%)", "§5 Evaluation Methodology: 90% of clients train, 10% are kept for "
             "testing", held_out, 20),
        Line("clients per round", "5", _CLIENTS, per_round, 5),
    ), row={M: "pep_fedpt"}),
)
