"""FedPFT's tables: the runs that fill them and the quoted numbers they sit beside.

Rows a claim reads run over the claim seeds (3 at laptop and paper); the other rows over the table
seeds (1 at laptop, 3 at paper). At the laptop profile the costlier rows no claim reads are thinned
(fewer α) to fit the time budget; the paper profile runs every row at every α.
"""
from __future__ import annotations

from ..tables import Rows, TableDef
from .variants import ABLATION_SETTINGS, FIGURE_VARIANTS, overrides

A, M = "data.partition_args.alpha", "method.name"
ALPHAS = (0.1, 0.5, 1.0)
# The rows of the robust claims (FedPFT > FedAvg, the Local/FedAvg observations).
CLAIM_METHODS = ("fedavg", "fedpft")
BASELINES = ("local", "fedper", "fedbn", "fedcac")
MORE_BASELINES = ("fedrep", "fedamp", "fedrod", "pfedsd", "pfedgate", "pfedpt", "fedpft_con")


def _main_rows(profile: str) -> list[Rows]:
    more_alphas = [a for a in ALPHAS if a != 1.0] if profile == "laptop" else list(ALPHAS)
    return [Rows({M: CLAIM_METHODS, A: ALPHAS}),
            Rows({M: BASELINES, A: ALPHAS}, seeds="table"),
            Rows({M: MORE_BASELINES, A: more_alphas}, seeds="table")]


def _main(setup: str, reference: str, prefix: str) -> TableDef:
    return TableDef("fedpft", f"main_{setup}", f"Dirichlet label skew ({setup})", _main_rows, columns=A,
                    setup=setup, reference=reference, label=lambda a: f"{prefix}α={a}",
                    reference_columns=(lambda c: c.startswith(prefix)) if prefix else None)


def _path_rows(profile: str) -> list[Rows]:
    methods = ["local", "fedavg", "fedper", "fedbn", "fedpft"] + ([] if profile == "laptop" else ["fedrod", "fedcac"])
    return [Rows({M: methods}, seeds="table")]


def _ablation_rows(profile: str) -> list[Rows]:
    table_alphas = [0.1] if profile == "laptop" else [0.1, 0.5]  # IV and VI train the MoCo branch: 3× the cost
    extra = {k: overrides(ABLATION_SETTINGS[k]) for k in ("IV", "V", "VI")}
    extra["PerClassifier"] = overrides(FIGURE_VARIANTS["FedPFT-PerClassifier"])
    return [Rows({A: [0.1, 0.5]}, variants={k: overrides(ABLATION_SETTINGS[k]) for k in ("I", "II", "III")}),
            Rows({A: table_alphas}, variants=extra, seeds="table")]


TABLES = {
    # ICLR Table 2 / arXiv Table 2 (CIFAR-10 part quoted as T-C10; CIFAR-100 and Tiny-ImageNet in T2).
    "main_default": _main("default", "T-C10", ""),
    "main_cifar100": _main("cifar100", "T2", "C100 "),
    "main_tiny_imagenet": _main("tiny_imagenet", "T2", "Tiny "),
    # Pathological label skew (2 classes per client).
    "pathological": TableDef("fedpft", "pathological", "Pathological label skew", _path_rows,
                             setup="pathological", reference="T-Path"),
    # ICLR Table 4 (settings I-VI) and the personal-classifier variant.
    "ablation": TableDef("fedpft", "ablation", "Ablation (Table 4 settings)", _ablation_rows, index="setting",
                         columns=A, reference="T-Ablation", label=lambda a: f"α={a}"),
    # ICLR Table 9: FedAvg with a personalised linear layer before the head.
    "linear": TableDef("fedpft", "linear", "FedAvg+Linear (Table 9)",
                       [Rows({M: CLAIM_METHODS, A: ALPHAS}),
                        Rows({M: ("local", "fedavg_linear", "fedpft_con"), A: ALPHAS}, seeds="table")],
                       columns=A, reference="T9", label=lambda a: f"C10 α={a}",
                       reference_columns=lambda c: c.startswith("C10")),
}
