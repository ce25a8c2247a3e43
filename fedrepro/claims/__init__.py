"""Claims: statements from the papers, checked on our results (see :mod:`fedrepro.claims.core`).

Each paper's claims live in its package (``fedrepro.papers.<paper>.claims``) and are registered
when that package is imported; :mod:`fedrepro.papers.verdicts` reads every paper's.
"""
from .arms import Columns, Replaced, Rows
from .core import (CLAIMS, INTERVAL, PAPER_COLUMN, UNTESTABLE, VERDICTS, Ceiling, Claim, ClaimResult, MissingResults,
                   Test, below, claims_dir, claims_table_style, combined, compare, compare_each, exact, exceeds,
                   near_zero, note_runs, recorded_claims, register_claim, save_claims, select, t_interval, within)

__all__ = ["CLAIMS", "INTERVAL", "PAPER_COLUMN", "UNTESTABLE", "VERDICTS", "Ceiling", "Claim", "ClaimResult", "Columns",
           "MissingResults", "Replaced", "Rows", "Test", "below", "claims_dir", "claims_table_style", "combined",
           "compare", "compare_each", "exact", "exceeds", "near_zero", "note_runs", "recorded_claims",
           "register_claim", "save_claims", "select", "t_interval", "within"]
