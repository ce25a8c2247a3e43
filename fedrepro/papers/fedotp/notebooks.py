"""What each FedOTP notebook reads (``fedrepro.papers.plan``)."""
from __future__ import annotations

from ..plan import Need

_PAPER = ("paper",)
NOTEBOOKS: dict[str, list[Need]] = {
    # Notebook 01 shows the learning-rate search (TuningPending plans its runs first).
    "01_label_shift": [Need(runs=lambda p: _label_configs(p))],
    "02_dirichlet": [Need("dirichlet"), Need("dirichlet_cifar10", profiles=_PAPER)],
    "03_feature_shift": [Need("feature_shift"), Need("feature_label_shift"),
                         Need("feature_shift_domainnet", profiles=_PAPER),
                         Need("feature_label_shift_domainnet", profiles=_PAPER)],
    "04_ot_variants": [Need("ot_variants"), Need("prompt_sets")],
    "05_gamma_and_shots": [Need("gamma"), Need("shots"), Need("vs_coop")],
    # Notebook 06 reads the stand-in's noisy style, which exists at the small profiles only.
    "06_transport_maps": [Need("label_shift", kwargs={"variant": "pathological:noisy"}, profiles=("smoke", "laptop"))],
    "07_local_prompts": [Need("clusters"), Need("feature_label_shift"), Need("curves")],
    "08_official_code": [Need("official_code")],
}


def _label_configs(profile: str) -> list:
    from .tables import label_configs

    return label_configs(profile)
