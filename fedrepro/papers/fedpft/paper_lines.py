"""FedPFT's setup line by line against the paper profile (:mod:`fedrepro.papers.paper_lines`): the
main tables (Dir(α) label skew: ICLR Table 8 on CIFAR-10, Table 2 on CIFAR-100 and Tiny-ImageNet),
the pathological split (Table 7), feature shift (Table 10), 100 clients (Table 11) and ResNet-18
(Table 12). Sources are the ICLR version's sections; the paraphrases are ours."""
from __future__ import annotations

from types import SimpleNamespace

from ...methods import METHODS
from ..paper_lines import (Line, Setting, across, augment, batch_size, clients, input_size, local_epochs, lr, lr_grid,
                           method_arg, model, model_args, momentum, partition, partition_arg, per_round, rounds, split,
                           weight_decay, with_args)

M, A = "method.name", "data.partition_args.alpha"
_SETUP = "§4.1: N = 40 clients, batch B = 100, R = 5 local update rounds, T = 1000 rounds"
_D3 = "App. D.3: FedPFT's defaults are n_κ = 10, (R_f, R_a) = (4, 1), SGD at 0.05 for the FTM and 0.1 elsewhere"
_SIZES = "§4.1: 500 training images per client; 100 test images on CIFAR-10/100, 200 on Tiny-ImageNet"


def _model(r) -> str:
    return with_args(model(r), model_args(r))


def _weights(r) -> str:
    return str(model_args(r).get("weights") or "none (trained from scratch)")


def _per_client(r) -> tuple:
    return partition_arg("train_per_client")(r), partition_arg("test_per_client")(r)


def _prompt_lr(r) -> float:
    return r.params.lr_prompts or r.cfg.train.lr


def _schedule(r) -> tuple:
    """(R_f, R_a) as the method splits a round's epochs for this row (its own rule, which may read α)."""
    method = SimpleNamespace(p=r.params, ctx=SimpleNamespace(cfg=r.cfg))
    return tuple(METHODS.get(r.cfg.method.name).epoch_split(method))


def _dirichlet(expect, ours) -> bool:
    return "dirichlet" in ours


def _common(arch: str, arch_source: str, test: int) -> tuple[Line, ...]:
    """The lines every Dir(α) label-skew setting of ICLR Tables 2 and 8 shares (FedPFT's row)."""
    return (
        Line("clients", "N = 40", _SETUP, clients, 40),
        Line("clients per round", "all 40 (our reading: §4.1 names no rate, and App. K measures partial "
             "participation against 100%)", "App. K: Table 13 reports each rate's change from every client taking "
             "part", per_round, 40),
        Line("rounds", "T = 1000", _SETUP, rounds, 1000),
        Line("local epochs", "R = 5", _SETUP, local_epochs, 5),
        Line("local epochs: (R_f, R_a)", "(4, 1)", _D3, _schedule, (4, 1)),
        Line("batch size", "B = 100", _SETUP, batch_size, 100),
        Line("optimiser: momentum", "SGD; momentum not stated", "App. D.3 names SGD and no momentum", momentum),
        Line("optimiser: weight decay", "not stated", "App. D.3 (and §4.1) give none", weight_decay),
        Line("learning rate (feature extractor, head)", "0.1", _D3, lr, 0.1),
        Line("learning rate (prompts)", "0.1 (one of the 'other components')", _D3, _prompt_lr, 0.1),
        Line("learning rate (FTM)", "0.05", _D3, method_arg("lr_ftm"), 0.05),
        Line("learning-rate search (FedPFT's row)", "none: FedPFT runs its defaults; only the baselines' rates are "
             "tuned", "App. D.3: baselines tuned within {0.1, 0.01, 0.001}; FedPFT's defaults 'for all scenarios'",
             lr_grid, None),
        Line("model", arch, arch_source, _model, arch.lower().replace("-", ""),
             agree=lambda e, o: o.split(" ")[0] == e),
        Line("pretrained weights", "not stated (trained from scratch, as we read §4.1)",
             "§4.1 names the architecture only", _weights),
        Line("input size", "not stated", "§4.1 and App. D name no resizing", input_size),
        Line("training augmentation", "not stated (FedPFT+Con's MoCo views aside)", "§4.1 and App. D.3 name none; "
             "App. D.4 mentions augmentation for MoCo only", augment),
        Line("prompts: n_κ", "10", _D3, method_arg("n_prompts"), 10),
        Line("prompts: where", "beside the extracted feature, as extra tokens into the FTM",
             "§3.3: prompts and the image feature are stacked as the FTM's input sequence",
             lambda r: f"FTM tokens: feature + {r.params.n_prompts} prompts, {r.params.ftm_layers} layer(s), "
                       f"{r.params.ftm_heads} heads"),
        Line("data split", "Dir(α) label skew; each client's test data has its training label distribution",
             "App. D.1: Dir(α) label skew; §4.1: training and test data share the label distribution", split,
             "dirichlet", agree=_dirichlet),
        Line("data split: α", "0.1, 0.5, 1.0", "Tables 2 and 8: one column per α", across(A), (0.1, 0.5, 1.0)),
        Line("data split: images per client (train, test)", f"(500, {test})", _SIZES, _per_client, (500, test)),
    )


def _main(name: str, table: str, arch: str, arch_source: str, test: int) -> Setting:
    return Setting(name, table, _common(arch, arch_source, test), row={M: "fedpft", A: 0.5})


_RN10 = "§4.1: ResNet-10 for CIFAR-100 and Tiny-ImageNet"

SETTINGS = (
    _main("Table 8, CIFAR-10, Dir(α) (FedPFT, α = 0.5)", "main_default", "ResNet-8",
          "§4.1: ResNet-8 for CIFAR-10", 100),
    Setting("Table 8, CIFAR-10, the baselines (FedAvg's row)", "main_default", (
        Line("learning-rate search", "0.1, 0.01, 0.001",
             "App. D.3: each baseline's rate tuned within {0.1, 0.01, 0.001}", lr_grid, (0.1, 0.01, 0.001)),
    ), row={M: "fedavg", A: 0.5}),
    _main("Table 2, CIFAR-100, Dir(α) (FedPFT, α = 0.5)", "main_cifar100", "ResNet-10", _RN10, 100),
    _main("Table 2, Tiny-ImageNet, Dir(α) (FedPFT, α = 0.5)", "main_tiny_imagenet", "ResNet-10", _RN10, 200),
    Setting("Table 3, CIFAR-100, Dir(0.1) (FedPFT+Con)", "main_cifar100", (
        Line("local epochs: (R_f, R_a)", "(3, 2) at α = 0.1, (4, 1) elsewhere", "App. D.3: FedPFT+Con's split under "
             "Dir(0.1)", _schedule, (3, 2)),
        Line("learning rate (FTM)", "0.01", "App. D.3: FedPFT+Con's FTM rate stays 0.01, the rest as FedPFT's",
             method_arg("lr_ftm"), 0.01),
        Line("learning rate (feature extractor, head)", "0.1", "App. D.3: as FedPFT's", lr, 0.1),
        Line("prompts: n_κ", "10", "App. D.3: as FedPFT's", method_arg("n_prompts"), 10),
        Line("prompts: n_ρ", "not stated (the arXiv version gives 20)", "ICLR App. D.3 gives none; arXiv App. B.3: "
             "(n_κ, n_ρ) = (10, 20)", method_arg("n_rho")),
    ), row={M: "fedpft_con", A: 0.1}),
    Setting("Table 7, pathological, CIFAR-10 (FedPFT)", "pathological", (
        Line("data split", "each client holds 2 classes, equal volume per class",
             "App. D.1: 2, 20 and 40 classes per client on CIFAR-10, CIFAR-100 and Tiny-ImageNet", split, 2,
             agree=lambda e, o: f"classes_per_client={e}" in o),
        Line("data split: training images per client", "500", _SIZES,
             lambda r: (r.cfg.data.max_train or 0) // r.cfg.data.num_clients, 500),
        Line("clients", "N = 40", _SETUP, clients, 40),
    ), row={M: "fedpft"}, column="CIFAR-10"),
    Setting("Table 10, feature shift, DomainNet (FedPFT)", "feature_shift", (
        Line("clients", "6, one per domain", "App. I: one client per domain, PACS 4 and DomainNet 6", clients, 6),
        Line("data split", "one domain per client", "App. I: each domain is assigned to one client", partition,
             "domain", agree=lambda e, o: o.startswith(e)),
        Line("data split: images per client (train, test)", "(1000, 500)",
             "App. I: 1000 training and 500 test images per client", _per_client, (1000, 500)),
        Line("model", "not stated", "App. I names no architecture", _model),
    ), row={M: "fedpft"}, column="DomainNet"),
    Setting("Table 11, 100 clients (FedPFT, α = 0.5)", "100_clients", (
        Line("clients", "100", "App. J: the experiments with 100 clients", clients, 100),
        Line("data split: images per client (train, test)", "(500, 100), as §4.1", _SIZES, _per_client, (500, 100)),
    ), row={M: "fedpft", A: 0.5}),
    Setting("Table 12, ResNet-18 (FedPFT, α = 0.5)", "resnet18", (
        Line("model", "ResNet-18", "App. J: the experiments with ResNet-18", _model, "resnet18",
             agree=lambda e, o: o.split(" ")[0] == e),
    ), row={M: "fedpft", A: 0.5}),
)
