"""FedPFT: "Unlocking the Potential of Prompt-Tuning in Bridging Generalized and Personalized
Federated Learning" (Wu et al.; ICLR 2024 version and arXiv version), with FedPFT+Con."""
from . import claims  # noqa: F401  (registers the claims)
from .notebooks import BY_ROUND, NOT_BY_ROUND, NOTEBOOKS, ROUNDS_OF
from .setup import VARIANTS, layers
from .left_open import LEFT_OPEN
from .tables import TABLES
from .variants import ABLATION_DESCRIPTIONS, ABLATION_SETTINGS, FIGURE_VARIANTS, overrides

TITLE = "FedPFT (Wu et al.): prompt-tuned feature transformation for generalised and personalised FL"

__all__ = ["LEFT_OPEN", "BY_ROUND", "NOT_BY_ROUND", "NOTEBOOKS", "ROUNDS_OF", "TABLES", "ABLATION_DESCRIPTIONS",
           "ABLATION_SETTINGS", "FIGURE_VARIANTS", "TITLE", "VARIANTS", "layers", "overrides"]
