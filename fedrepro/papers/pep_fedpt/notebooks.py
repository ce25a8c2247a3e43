"""What each PEP-FedPT notebook reads (``fedrepro.papers.plan``)."""
from __future__ import annotations

from ..plan import Need

_PAPER = ("paper",)
NOTEBOOKS: dict[str, list[Need]] = {
    "01_label_heterogeneity": [Need("label_pathological"), Need("label_dirichlet"),
                               Need("label_tiny_imagenet", profiles=_PAPER),
                               Need("label_tiny_imagenet_dirichlet", profiles=_PAPER)],
    "02_feature_shift": [Need("feature_shift")],
    "03_heldout": [Need("heldout"), Need("heldout_feature_shift", profiles=_PAPER)],
    "04_ablations": [Need("n_shared"), Need("fedvpt_prompts"), Need("position")],
    "05_cost": [Need("label_pathological")],
    "06_privacy": [Need("dp")],
    "07_inside_ccmp": [Need("label_pathological")],
    # The paper profile's iNaturalist tables; at the small profiles they are notebooks 01's and 03's
    # runs again (pep_fedpt.setup.CHANGES), so the notebook trains nothing of its own there.
    "08_inaturalist": [Need("inaturalist"), Need("heldout_inaturalist")],
}
