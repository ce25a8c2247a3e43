"""FedOTP's setup line by line against the paper profile (:mod:`fedrepro.papers.paper_lines`):
Table 1 (pathological label shift on the CLIP datasets; its Caltech101 column), Table 3 (Dirichlet
label shift on CIFAR-100), Table A2 (feature shift) and Tables 2 and A3 (feature and label shift).
Sources are FedOTP (CVPR 2024)'s sections; the paraphrases are ours.

Our copy of the paper has lost nearly every inline number (§5.1's clients, rounds, epochs and rate;
App. B.2's image size, prompt length and batch sizes; the α and γ it adopts), so most rows say
"lost in the text" and show ours beside it; the values ours takes for them come from the official
code (fedrepro.papers.fedotp.setup).
"""
from __future__ import annotations

from ...methods.clip_prompt import PAPER_N_CTX
from ...models.clip_model import ENV_CLIP_WEIGHTS
from ...methods.fedotp import PROMPT_SETS
from ..paper_lines import (Line, Setting, augment, batch_size, class_options, clients, input_size, keeps_classes,
                           local_epochs, lr, method_arg, momentum, partition_arg, per_round, rounds, show_classes,
                           split, weight_decay)

M = "method.name"
_IMPL = "§5.1 Implementation Details"
_B2 = "App. B.2"
_LOST = "lost in the text"


def _participation(r) -> tuple:
    return per_round(r), clients(r)


def _all(expect, ours: tuple) -> bool:
    return ours[0] == ours[1]


def _of(value: tuple) -> str:
    return f"{value[0]} of {value[1]}"


def _arch(r) -> str:
    return str(r.cfg.model.args.get("arch"))


def _prompts(r) -> tuple:
    """How many prompts a client learns, and how many of them the server averages."""
    n, shared = PROMPT_SETS[r.params.prompts]
    return n, len(shared)


def _n_ctx(r) -> str:
    n = r.params.n_ctx
    return str(n) if n is not None else f"none: as many as the text context leaves room for, at most {PAPER_N_CTX}"


def _weights(r) -> str:
    args = r.cfg.model.args
    return f"{args.get('source', 'openai')} release, from {args.get('weights') or '$' + ENV_CLIP_WEIGHTS}"


def _starts(expect, ours: str) -> bool:
    return ours.startswith(expect)


def _training(model: str, model_source: str) -> tuple[Line, ...]:
    """The lines every setting shares: schedule, optimiser, model, input and prompts."""
    return (
        Line("rounds", _LOST, f"{_IMPL}: the round counts for the CLIP datasets and for CIFAR are lost", rounds),
        Line("local epochs", _LOST, f"{_IMPL}: the local epochs are lost", local_epochs),
        Line("batch size", _LOST, f"{_B2}: training and test batch sizes are lost", batch_size),
        Line("optimiser: momentum", "SGD; momentum not stated", f"{_IMPL} names SGD only", momentum),
        Line("optimiser: weight decay", "not stated", f"{_IMPL} and {_B2} give none", weight_decay),
        Line("learning rate (prompts)", _LOST, f"{_IMPL}: the rate is lost", lr),
        Line("model (CLIP backbone)", model, model_source, _arch, model),
        Line("pretrained weights", "a pretrained CLIP; the release is not named",
             "§4.1: each client holds a pretrained CLIP", _weights),
        Line("input size (the loader's; CLIP resizes to its own)", _LOST,
             f"{_B2}: images are resized to a size that is lost", input_size),
        Line("training augmentation", "not stated", f"{_IMPL} and {_B2} name none", augment),
        Line("prompts: per client (total, averaged by the server)", "a global prompt and a local prompt; only the "
             "global one is averaged", "§4.1: each client learns a shared global prompt and keeps a local one",
             _prompts, (2, 1)),
        Line("prompts: length", _LOST, f"{_B2}: the prompt length is lost (the class token goes at the end, "
             "initialised at random)", _n_ctx),
        Line("γ (the share of the feature map the prompts take)", _LOST,
             "App. C.3: Table A4 varies γ and the value adopted is lost", method_arg("gamma")),
    )


_RN50 = "§5.2: Table 1 uses ResNet50, as pFedPrompt does"
_VIT = "§5.1: ViT-B/16 unless another backbone is named"

SETTINGS = (
    Setting("Table 1, Caltech101, pathological (FedOTP)", "label_shift", (
        Line("clients", _LOST, f"{_IMPL}: the CLIP datasets' client count is lost", clients),
        Line("clients per round", "all ('a full partition')", f"{_IMPL}: the CLIP datasets run with every client",
             _participation, "all", agree=_all, show=_of),
        *_training("RN50", _RN50),
        Line("data split", "pathological: disjoint classes per client; test data distributed as training data",
             "§5.1: a distinct set of non-overlapping classes per client; §5.2 Evaluation Protocol: test follows "
             "training", split, "pathological", agree=_starts),
        Line("data split: shots", "not stated for Table 1 (Fig. 3 varies 1-16)", "§5.3: Impact of Number of Shots",
             partition_arg("shots")),
    ), row={M: "fedotp"}),
    Setting("Table 3, CIFAR-100, Dirichlet (FedOTP)", "dirichlet", (
        Line("clients", _LOST, f"{_IMPL}: the CIFAR client count is lost", clients),
        Line("clients per round", "a fraction of the clients (the rate is lost)",
             f"{_IMPL} and §5.2: the CIFAR runs use the partial-participation setting, whose rate is lost",
             _participation, show=_of),
        *_training("ViT-B-16", _VIT),
        Line("data split", "symmetric Dirichlet; its α is lost", "§5.1: datasets split among clients by a "
             "symmetric Dirichlet distribution", split, "fixed_dirichlet", agree=_starts),
        Line("data split: images per client (train, test)", "not stated", "§5.1 and App. B.1 give the datasets' "
             "sizes only", lambda r: (partition_arg("train_per_client")(r), partition_arg("test_per_client")(r))),
    ), row={M: "fedotp", "data.partition_args.alpha": 0.3}),
    Setting("Table A2, Office-Caltech10, feature shift (FedOTP)", "feature_shift", (
        Line("clients", "one per domain: 4", "§5.1 and App. C.1: each client holds a distinct domain with the same "
             "label distribution; Office-Caltech10 has 4 domains", clients, 4),
        Line("model (CLIP backbone)", "ViT-B-16", _VIT, _arch, "ViT-B-16"),
        Line("data split", "one domain per client", "App. C.1", split, "domain_dirichlet (alpha=None, "
             "clients_per_domain=1)", agree=_starts),
    ), row={M: "fedotp"}),
    Setting("Table A2, DomainNet, feature shift (FedOTP)", "feature_shift_domainnet", (
        Line("clients", "one per domain: 6", "§5.1 and App. C.1: each client holds a distinct domain; DomainNet "
             "has 6", clients, 6),
        Line("classes", "10 selected classes", "App. B.1: 10 classes are selected from DomainNet and "
             "Office-Caltech10", class_options, 10, agree=keeps_classes, show=show_classes),
    ), row={M: "fedotp"}),
    Setting("Table A3, Office-Caltech10, feature and label shift (FedOTP)", "feature_label_shift", (
        Line("clients per domain", "3", "App. C.2: each domain's data split into three clients by Dirichlet",
             partition_arg("clients_per_domain"), 3),
        Line("data split: α", _LOST, "App. C.2: the Dirichlet α is lost", partition_arg("alpha")),
    ), row={M: "fedotp"}),
    Setting("Table 2, DomainNet, feature and label shift (FedOTP)", "feature_label_shift_domainnet", (
        Line("clients per domain", "5", "§5.2: each domain's data split into five clients by Dirichlet",
             partition_arg("clients_per_domain"), 5),
        Line("clients", "30 (6 domains × 5)", "§5.1 and §5.2", clients, 30),
        Line("classes", "10 selected classes", "App. B.1: 10 classes are selected from DomainNet and "
             "Office-Caltech10", class_options, 10, agree=keeps_classes, show=show_classes),
        Line("data split: α", _LOST, "§5.2: the Dirichlet α is lost", partition_arg("alpha")),
    ), row={M: "fedotp"}),
)
