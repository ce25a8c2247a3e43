"""What each pFedCSPC notebook reads (``fedrepro.plan``), and the runs of the figure notebooks that
read single runs rather than a table."""
from __future__ import annotations

from ...config import RunConfig, default_seeds
from ...plan import Need


def tsne_runs(profile: str, seed: int = 0) -> dict[str, RunConfig]:
    """Figs. 7, 8, 11a: FedAvg, pFedCSPC without the alignment term, and pFedCSPC (notebook 06;
    notebook 08's Grad-CAM reads the last two)."""
    from .. import setup

    base = setup("pfedcspc", profile, seed=seed)
    return {"FedAvg": base.replace(**{"method.name": "fedavg"}),
            "pFedCSPC w/o Align": base.replace(**{"method.args.align": False}),
            "pFedCSPC": base}


ALIGN_MODELS = ("FedAvg", "pFedCSPC")


def alignment_runs(profile: str, seeds=None) -> dict[tuple[str, int], RunConfig]:
    """The ``features_align`` claim's runs: FedAvg and pFedCSPC at each claim seed, keyed by
    ``(model, seed)`` (the same configs as notebook 01's claim rows, so trained once)."""
    seeds = default_seeds(profile) if seeds is None else seeds
    return {(name, int(s)): tsne_runs(profile, int(s))[name] for s in seeds for name in ALIGN_MODELS}


def calibration_runs(profile: str, seed: int = 0) -> dict[str, RunConfig]:
    """Fig. 8 and §V-E1's "first round" vs "25th round": pFedCSPC stopped after round 1, and after
    round 25 (the last round where a run is shorter)."""
    run = tsne_runs(profile, seed)["pFedCSPC"]
    late = min(25, run.train.rounds)
    return {"round 1": run.replace(**{"train.rounds": 1}),
            f"round {late}": run if late == run.train.rounds else run.replace(**{"train.rounds": late})}


def gradcam_runs(profile: str, seed: int = 0) -> dict[str, RunConfig]:
    """Figs. 9 and 11 (right): the personalised models with and without alignment."""
    runs = tsne_runs(profile, seed)
    return {"w/o Align": runs["pFedCSPC w/o Align"], "pFedCSPC": runs["pFedCSPC"]}


_PAPER = ("paper",)
NOTEBOOKS: dict[str, list[Need]] = {
    "01_global_and_personalized": [Need("main_default"), Need("main_cifar100", profiles=_PAPER),
                                   Need("main_tiny_imagenet", profiles=_PAPER), Need("main_vireo172", profiles=_PAPER)],
    "02_ablations": [Need("ablation_global"), Need("ablation_personal")],
    "03_orthogonality": [Need("orthogonality")],
    "04_rounds_to_target": [Need("rounds_default"), Need("rounds_beta0.1")],
    "05_sensitivity": [Need("sensitivity")],
    "06_tsne": [Need(runs=lambda p: tsne_runs(p).values()), Need(runs=lambda p: alignment_runs(p).values()),
                Need(runs=lambda p: calibration_runs(p).values())],
    "07_pmi": [Need("pmi_tau_p_validation"), Need("pmi_tau_p")],
    "08_gradcam": [Need(runs=lambda p: gradcam_runs(p).values())],
    "09_convergence": [Need("main_default")],
}
