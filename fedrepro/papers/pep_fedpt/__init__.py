"""PEP-FedPT: "Prompt Estimation from Prototypes for Federated Prompt Tuning of Vision Transformers"
(Yashwanth, Ghosh, Tripathi, Chakraborty; arXiv), with the Class-Contextualized Mixed Prompt (CCMP)
on a frozen ViT.

- :mod:`.setup`: the setups at each profile and their variants (pathological, Dir(0.3), feature
  shift, held-out clients, Tiny-ImageNet pathological and Dir(0.3), iNaturalist and its held-out clients);
- :mod:`.variants`: the table rows (the paper's methods, its ablation settings, our control);
- :mod:`.tables`: the runs behind Tables 1-3, 7, 10-13 (Tables 4, 5, 6, 8 and 9 read the same runs);
- :mod:`.reference`: the paper's numbers, as printed;
- :mod:`.claims`: its findings, checked on our results;
- :mod:`.internals`: the soft weights of trained runs (Fig. 8).

The method is :mod:`fedrepro.methods.pep_fedpt`; the baselines are ``head_tuning``, ``fedvpt``,
``fedvpt_d``, ``fedpr``, ``sgpt``, ``pfedpg`` and ``p_pt`` in :mod:`fedrepro.methods`.
"""
from . import claims  # noqa: F401  (registers the claims)
from .left_open import LEFT_OPEN
from .notebooks import NOTEBOOKS
from .setup import VARIANTS, layers
from .tables import TABLES, label_results
from .variants import BASELINES, CONTROL, METHODS

TITLE = "PEP-FedPT (Yashwanth et al.): prompt estimation from prototypes for federated prompt tuning of ViTs"

__all__ = ["LEFT_OPEN", "NOTEBOOKS", "BASELINES", "CONTROL", "METHODS", "TABLES", "TITLE", "VARIANTS",
           "label_results", "layers"]
