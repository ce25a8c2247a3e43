"""PEP-FedPT: "Prompt Estimation from Prototypes for Federated Prompt Tuning of Vision Transformers"
(Yashwanth, Ghosh, Tripathi, Chakraborty; arXiv), with the Class-Contextualized Mixed Prompt (CCMP)
on a frozen ViT.

The package so far holds the setups (:mod:`.setup`) and the paper's numbers (:mod:`.reference`).
Table definitions and claims come once the method and its baselines are registered.
"""
from .setup import VARIANTS, layers

TITLE = "PEP-FedPT (Yashwanth et al.): prompt estimation from prototypes for federated prompt tuning of ViTs"

# Table definitions (fedrepro.papers.tables.TableDef) need the method and its baselines; none yet.
TABLES: dict = {}

__all__ = ["TABLES", "TITLE", "VARIANTS", "layers"]
