"""What each FedPFT notebook reads (``fedrepro.papers.plan``), and the runs of the figure notebooks that
read single runs rather than a table."""
from __future__ import annotations

from ...analysis.by_round import RoundsOf, stored_rounds
from ...config import RunConfig, default_seeds
from ..plan import Need
from .variants import FIGURE_VARIANTS, overrides
from .. import setup

A, M = "data.partition_args.alpha", "method.name"


# ICLR Fig. 4 (b)-(h) / arXiv Fig. 2, in the order §4.4 discusses them: label name -> method overrides.
TSNE_PANELS: dict[str, dict] = {
    "FedAvg": {M: "fedavg"},
    "FedCAC": {M: "fedcac"},
    "FedPer": {M: "fedper"},
    "FedPFT": {M: "fedpft"},
    "FedPFT w/o Alter.": overrides(FIGURE_VARIANTS["FedPFT w/o Alter."]),
    "FedPFT-PerClassifier": overrides(FIGURE_VARIANTS["FedPFT-PerClassifier"]),
    "FedPFT+Con": {M: "fedpft_con"},
}


def tsne_runs(profile: str, alpha: float = 0.5, seed: int = 0) -> dict[str, RunConfig]:
    """Figs. 4/5: the models whose features notebook 08 embeds, on the t-SNE setup (10 clients ×
    1000/500 images at the paper profile; the main setup at the others, so that the main, ablation
    and FedPFT+Con tables' runs are reused). Fig. 5 reads the FedPFT+Con run's two prompt paths."""
    base = setup("fedpft", profile, "tsne", data__partition_args__alpha=alpha, seed=seed)
    # A picture of the models the tables report (no claim reads it): their runs, as they stopped.
    return {name: base.replace(**{M: "fedpft", "method.args": {}, **o}) for name, o in TSNE_PANELS.items()}


def attention_runs(profile: str, alphas=(0.1, 0.5, 1.0), seed: int = 0, method: str = "fedpft_con") -> dict[float,
                                                                                                            RunConfig]:
    """App. H: one run per α whose FTM attention notebook 09 reads."""
    base = setup("fedpft", profile, method__name=method, seed=seed)
    # Its claim reads the final models' attention weights: the full budget (RunConfig.full_budget).
    return {a: base.replace(**{A: a}).full_budget() for a in alphas}


# The claims notebook 17 follows as the runs get longer, keyed by the tables they read (combined as
# their own notebooks combine them); NOT_BY_ROUND names every other FedPFT claim with the reason.
BY_ROUND: dict[tuple[str, ...], tuple[str, ...]] = {
    ("main_default",): ("fedpft.beats_fedavg_every_alpha", "fedpft.beats_local_every_alpha", "fedpft.local_vs_fedavg",
                        "fedpft.fedavg_flat_personalised_drop", "fedpft.beats_fedper_fedrep_fedbn",
                        "fedpft.beats_fedavg_every_alpha_phi_matched", "fedpft.beats_fedper_fedrep_fedbn_phi_matched"),
    ("con",): ("fedpft.con_beats_fedpft",),
    ("ablation", "linear"): ("fedpft.prompts_improve_fedavg", "fedpft.alternation_matters",
                             "fedpft.fedavg_linear_beats_fedavg"),
    ("100_clients",): ("fedpft.best_with_100_clients", "fedpft.best_with_100_clients_phi_matched"),
    ("resnet18",): ("fedpft.best_with_resnet18", "fedpft.best_with_resnet18_phi_matched"),
    ("partial_participation",): ("fedpft.partial_participation",),
    ("partial_participation_con",): ("fedpft.partial_participation_con",),
    ("r_f", "n_kappa", "n_rho"): ("fedpft.rf_sweep_rises", "fedpft.rf_sweep_peaks_inside",
                                  "fedpft.n_kappa_robust", "fedpft.n_rho_robust"),
}
# What those claims read of a run at each round: its stored accuracies alone.
ROUNDS_OF: RoundsOf = stored_rounds

_PROBE = "scored by the mismatch probe on the final round's stored models (a cached analysis), not each round"
_LINEAR = "scored by linear probes trained on the final round's features (a cached analysis), not each round"
NOT_BY_ROUND: dict[str, str] = {
    "fedpft.fedavg_match_beats_pfl_origin": _PROBE,
    "fedpft.fedavg_match_gt_origin": _PROBE,
    "fedpft.fedavg_probe_beats_pfl": _PROBE,
    "fedpft.fedpft_origin_approx_match": _PROBE,
    "fedpft.partial_personalisation_gap": _PROBE,
    "fedpft.probe_approx_match": _PROBE,
    "fedpft.probe_ge_fedavg": _LINEAR,
    "fedpft.probe_ge_fedavg_phi_matched": _LINEAR,
    "fedpft.prompts_keep_separability": _LINEAR,
    "fedpft.feature_shift_best": _PROBE + " (Table 10 reports Origin accuracy)",
    "fedpft.feature_shift_mismatch": _PROBE,
    "fedpft.attention_sample_level": "reads the final round's FTM attention weights, not a per-round score",
    "fedpft.joint_beats_two_stage": "the two-stage run's round r is not the joint run's: it spends its first "
                                    "half on L_Con alone, with no classifier to score",
    "fedpft.time_per_round": "its measure is wall time per round, which a cut does not change",
    "fedpft.communication_overhead": "its measure is bytes per round, which a cut does not change",
}

NOTEBOOKS: dict[str, list[Need]] = {
    "01_toy_mismatch": [],
    "02_mismatch_probe": [Need("probe", analyses=("mismatch_probe",)),
                          Need("probe", analyses=("mismatch_probe:lr0.01x1000",),
                               where=lambda c: c.method.name in ("fedavg", "fedpft"))],
    "03_main_tables": [Need("main_default"), Need("pathological"),
                       Need("main_cifar100", profiles=("paper",)), Need("main_tiny_imagenet", profiles=("paper",))],
    "04_fedpft_con": [Need("con"), Need("two_stage")],
    "05_ablation": [Need("ablation"), Need("linear")],
    "06_linear_probe": [Need("linear_probe", analyses=("mismatch_probe",))],
    "07_prompt_effect": [Need("prompt_effect", analyses=("linear_probe:phi", "linear_probe:features")),
                         Need("prompt_effect", analyses=("linear_probe:features_rho",),
                              where=lambda c: c.method.name == "fedpft_con")],
    "08_tsne": [Need(runs=lambda p: tsne_runs(p).values())],
    "09_attention": [Need(runs=lambda p: [c for s in default_seeds(p) for c in attention_runs(p, seed=s).values()])],
    "10_feature_shift": [Need("feature_shift", analyses=("mismatch_probe",))],
    "11_100_clients": [Need("100_clients")],
    "12_resnet18": [Need("resnet18")],
    "13_partial_participation": [Need("partial_participation"), Need("partial_participation_con")],
    "14_hyperparameters": [Need("r_f"), Need("n_kappa"), Need("n_rho")],
    "15_time": [Need("time")],
    "16_communication": [],
    "17_convergence": [Need(t) for tables in BY_ROUND for t in tables],
}
