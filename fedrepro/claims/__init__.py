"""Claims: statements from the papers, checked on our results (see :mod:`fedrepro.claims.core`).

One module per paper registers its claims: ``tour`` (the tour notebook), and the paper modules
as they are added. Importing this package registers them all.
"""
from .core import (CLAIMS, Claim, ClaimResult, MissingResults, claims_dir, claims_for, claims_table_style,
                   collect_claims, compare, compare_each, evaluate_claims, register_claim, save_claims, select,
                   within)
from . import fedpft, pfedcspc, tour  # noqa: F401,E402  (registration)

__all__ = ["CLAIMS", "Claim", "ClaimResult", "MissingResults", "claims_dir", "claims_for", "claims_table_style",
           "collect_claims", "compare", "compare_each", "evaluate_claims", "register_claim", "save_claims", "select",
           "within"]
