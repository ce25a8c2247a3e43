"""What each pFedCSPC notebook reads (``fedrepro.papers.plan``), and the runs of the figure notebooks that
read single runs rather than a table."""
from __future__ import annotations

from ...analysis.by_round import RoundsOf
from ...config import RunConfig
from ..plan import Need
from .. import claim_seeds, setup
from .metrics import rounds_with_scores


def tsne_runs(profile: str, seed: int = 0) -> dict[str, RunConfig]:
    """Figs. 7, 8, 11a: FedAvg, pFedCSPC without the alignment term, and pFedCSPC (notebook 06;
    notebook 08's Grad-CAM reads the last two)."""
    base = setup("pfedcspc", profile, seed=seed)
    return {"FedAvg": base.replace(**{"method.name": "fedavg"}),
            "pFedCSPC w/o Align": base.replace(**{"method.args.align": False}),
            "pFedCSPC": base}


ALIGN_MODELS = ("FedAvg", "pFedCSPC")
# The name under which the sequential stages of the ``features_align`` claim record its seeds.
ALIGN_STAGE = "pfedcspc/alignment"


def alignment_runs(profile: str, seeds=None) -> dict[tuple[str, int], RunConfig]:
    """The ``features_align`` claim's runs: FedAvg and pFedCSPC at each claim seed (None: the
    profile's, continued to the count its sequential stages recorded under :data:`ALIGN_STAGE`),
    keyed by ``(model, seed)``."""
    seeds = claim_seeds(profile, ALIGN_STAGE) if seeds is None else seeds
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


# Notebook 09: the claims whose verdict can be recomputed on runs cut after round r, grouped by the
# tables they read (every score they compare is logged each round).
BY_ROUND: dict[tuple[str, ...], tuple[str, ...]] = {
    ("main_default",): ("pfedcspc.both_objectives",),
    ("ablation_global",): ("pfedcspc.calibration_raises_global", "pfedcspc.clusters_beat_one_mean",
                           "pfedcspc.ablation_adds_up"),
    ("ablation_personal",): ("pfedcspc.cspc_chain_beats_fedavg_chain", "pfedcspc.personalisation_chain"),
    ("orthogonality",): ("pfedcspc.plug_and_play",),
    ("sensitivity",): ("pfedcspc.more_prototypes_help",),
}
# What those claims read of a run at each round: its stored rounds with pFedCSPC's own scores (I_local and
# the harmonic mean HM of TNNLS Table 2) joined on.
ROUNDS_OF: RoundsOf = rounds_with_scores
# The other claims, and why a cut after round r says nothing about them.
NOT_BY_ROUND: dict[str, str] = {
    "pfedcspc.fewer_rounds": "its measure is already a number of rounds (the first round at the target)",
    "pfedcspc.fewer_rounds_beta_0.1": "its measure is already a number of rounds (the first round at the target)",
    "pfedcspc.pmi_starts_better": "scored on the final round's stored state (both initial models before local "
                                  "training), not each round",
    "pfedcspc.pmi_lower_early_loss": "scored on the final round's stored state (one epoch of local training from "
                                     "each initial model), not each round",
    "pfedcspc.pmi_weights_follow_fit": "reads the final round's PMI weights and models, not a per-round score",
    "pfedcspc.features_align": "scored on the final models' features (an analysis of the stored checkpoints), "
                               "not each round",
}

_PAPER = ("paper",)
NOTEBOOKS: dict[str, list[Need]] = {
    "01_global_and_personalized": [Need("main_default"), Need("main_cifar100", profiles=_PAPER),
                                   Need("main_tiny_imagenet", profiles=_PAPER), Need("main_vireo172", profiles=_PAPER)],
    "02_ablations": [Need("ablation_global"), Need("ablation_personal")],
    "03_orthogonality": [Need("orthogonality")],
    "04_rounds_to_target": [Need("rounds_default"), Need("rounds_beta0.1")],
    "05_sensitivity": [Need("sensitivity")],
    "06_tsne": [Need(runs=lambda p: tsne_runs(p).values()),
                Need(runs=lambda p: alignment_runs(p).values(), stage=ALIGN_STAGE),
                Need(runs=lambda p: calibration_runs(p).values())],
    "07_pmi": [Need("pmi_tau_p_validation"), Need("pmi_tau_p")],
    "08_gradcam": [Need(runs=lambda p: gradcam_runs(p).values())],
    "09_convergence": [Need(t) for tables in BY_ROUND for t in tables],
}
