"""Claims: statements from the papers, checked on our results (see :mod:`fedrepro.claims.core`).

Each paper's claims live in its package (``fedrepro.papers.<paper>.claims``) and are registered
when that package is imported; the functions here import them on first use.
"""
from .core import (CLAIMS, Claim, ClaimResult, MissingResults, claims_dir, claims_for, claims_table_style,
                   collect_claims, compare, compare_each, evaluate_claims, register_claim, registered, save_claims, select,
                   within)

__all__ = ["CLAIMS", "Claim", "ClaimResult", "MissingResults", "claims_dir", "claims_for", "claims_table_style",
           "collect_claims", "compare", "compare_each", "evaluate_claims", "register_claim", "registered", "save_claims", "select",
           "within"]
