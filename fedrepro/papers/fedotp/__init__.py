"""FedOTP: "Global and Local Prompts Cooperation via Optimal Transport for Federated Learning"
(Li, Huang, Wang, Shi; CVPR 2024): a shared global and a private local CoOp prompt per client, matched
to the image's feature map by unbalanced optimal transport.

- :mod:`.setup`: the setups at each profile (pathological few-shot, Dirichlet, feature shift,
  feature + label shift);
- :mod:`.variants`: the table rows (the paper's methods, its OT variants, our ablations, the official
  code's departures) and each method's learning rate at the small profiles;
- :mod:`.tables`: the runs behind Tables 1-4, A2-A5 and Figs. 3, A3;
- :mod:`.reference`: the paper's numbers, as printed;
- :mod:`.claims`: its findings, checked on our results.

The method is :mod:`fedrepro.methods.fedotp`; the baselines are ``zeroshot_clip``, ``coop``,
``promptfl``, ``promptfl_ft``, ``promptfl_fedprox``, ``promptfl_fedper``, ``promptfl_fedamp`` and
``pfedprompt`` in :mod:`fedrepro.methods`. The transport plans are :mod:`fedrepro.ot.transport`; the
plan maps, the planted-patch measurement and the local-prompt clusters are in :mod:`fedrepro.analysis`.
"""
from . import claims  # noqa: F401  (registers the claims)
from .left_open import LEFT_OPEN
from .notebooks import MAPS_VARIANT, NOTEBOOKS
from .setup import VARIANTS, datasets, layers
from .tables import TABLES, label_configs, label_results, study_by_pair, study_findings, study_label, study_summary
from .variants import BASELINES, METHODS

TITLE = "FedOTP (Li et al., CVPR 2024): global and local prompts cooperation via optimal transport"

__all__ = ["LEFT_OPEN", "MAPS_VARIANT", "NOTEBOOKS", "BASELINES", "METHODS", "TABLES", "TITLE", "VARIANTS", "datasets",
           "label_configs", "label_results", "layers", "study_by_pair", "study_findings", "study_label",
           "study_summary"]
