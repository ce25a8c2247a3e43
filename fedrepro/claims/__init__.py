"""Claims: statements from the papers, checked on our results (see :mod:`fedrepro.claims.core`).

Each paper's claims live in its package (``fedrepro.papers.<paper>.claims``) and are registered
when that package is imported; the functions here import them on first use.
"""
from .core import (CLAIMS, INTERVAL, VERDICTS, Claim, ClaimResult, MissingResults, Test, below, claims_dir, claims_for,
                   claims_table_style, collect_claims, combined, compare, compare_each, evaluate_claims, exact, exceeds,
                   near_zero, note_runs, register_claim, registered, save_claims, select, t_interval, within)

__all__ = ["CLAIMS", "INTERVAL", "VERDICTS", "Claim", "ClaimResult", "MissingResults", "Test", "below", "claims_dir",
           "claims_for", "claims_table_style", "collect_claims", "combined", "compare", "compare_each", "evaluate_claims",
           "exact", "exceeds", "near_zero", "note_runs", "register_claim", "registered", "save_claims", "select", "t_interval", "within"]
