"""pFedCSPC: personalised initial models, clustered prototypes and server-side cross-silo
prototypical calibration (IEEE TNNLS)."""
from . import claims  # noqa: F401  (registers the claims)
from .notebooks import BY_ROUND, NOT_BY_ROUND, NOTEBOOKS, ROUNDS_OF
from .baselines import GLOBAL_BASELINES, PERSONAL_BASELINES, with_local_finetune
from .setup import VARIANTS, layers
from .left_open import LEFT_OPEN
from .tables import TABLES
from .variants import ABLATION_GLOBAL, ABLATION_PERSONAL, setting_overrides

TITLE = "pFedCSPC: cross-silo prototypical calibration for personalised and global FL"

__all__ = ["LEFT_OPEN", "BY_ROUND", "NOT_BY_ROUND", "NOTEBOOKS", "ROUNDS_OF", "TABLES", "ABLATION_GLOBAL",
           "ABLATION_PERSONAL", "GLOBAL_BASELINES", "PERSONAL_BASELINES", "TITLE", "VARIANTS",
           "layers", "setting_overrides", "with_local_finetune"]
