"""What each FedOTP notebook reads (``fedrepro.papers.plan``)."""
from __future__ import annotations

from ...config import PROFILES
from ..plan import Need
from .setup import datasets

_PAPER = ("paper",)
# Notebook 06's real images. The small profiles read the stand-in's noisy style, whose inked patches
# mark each garment (the mask the garment-mass claim scores; notebook 03's cluttered images carry their
# garment's mask instead); the paper profile draws the plans on Caltech-101, objects as in FedOTP Fig. 2,
# which has no masks, so the garment claims are not run there.
MAPS_VARIANT = {"smoke": "pathological:noisy", "laptop": "pathological:noisy", "paper": "pathological:caltech101"}
HAS_MASKS = {"smoke": True, "laptop": True, "paper": False}
# The first CLIP stand-in (model.args.arch) and the style notebook 01 reads its claims on.
FIRST_STANDIN = {"model__args__arch": "standin"}
FIRST_STANDIN_STYLE = "noisy"
NOTEBOOKS: dict[str, list[Need]] = {
    # Table 1 once per dataset, as a table each (not runs built another way), so that its claims'
    # sequential seeds extend it (fedrepro.papers.plan.seed_stage).
    "01_label_shift": [Need("label_shift", kwargs={"variant": f"pathological:{d}"}, profiles=(p,))
                       for p in PROFILES for d in datasets(p)]
    # Table 1's claims again on the first CLIP stand-in (its patch tokens carry little of the class,
    # docs/backbones.md), on the noisy style only to keep the laptop pass's cost: issue 55.
    + [Need("label_shift", kwargs={"variant": f"pathological:{FIRST_STANDIN_STYLE}", **FIRST_STANDIN},
            profiles=("smoke", "laptop"))],
    "02_dirichlet": [Need("dirichlet"), Need("dirichlet_cifar10", profiles=_PAPER)],
    # Over clutter (ours): at the paper profile the table holds Table A2's own Office-Caltech10 runs.
    "03_feature_shift": [Need("feature_shift"), Need("feature_label_shift"), Need("feature_shift_cluttered"),
                         Need("feature_shift_domainnet", profiles=_PAPER),
                         Need("feature_label_shift_domainnet", profiles=_PAPER)],
    "04_ot_variants": [Need("ot_variants"), Need("prompt_sets")],
    "05_gamma_and_shots": [Need("gamma"), Need("shots"), Need("vs_coop")],
    "06_transport_maps": [Need("label_shift", kwargs={"variant": MAPS_VARIANT[p]}, profiles=(p,))
                          for p in MAPS_VARIANT],
    "07_local_prompts": [Need("clusters"), Need("feature_label_shift"), Need("curves")],
    "08_official_code": [Need("official_code")],
}

