"""Which claims read each of a paper's quoted tables, and the comparisons of its main tables that no
claim makes, with the reason: declared in each paper's ``coverage.py`` (``MAIN``, ``METHOD_ROWS``,
``TABLES``), shown on its results page (:mod:`fedrepro.app.results_page`) and checked by
``tests/papers/test_coverage.py``: every baseline row of every main table is either compared by a
claim or left out with a reason.
"""
from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass, field
from typing import Mapping

from . import PAPERS
from .reference import paper_tables


@dataclass(frozen=True)
class TableCoverage:
    """One quoted table: ``claims`` read its setting; ``compared`` maps a baseline row to the claims
    that compare the paper's method with it; ``left_out`` maps a baseline row to why no claim does;
    ``own`` names the rows that are the method's own settings (an ablation's), None for the paper's
    ``METHOD_ROWS``."""

    claims: tuple[str, ...] = ()
    compared: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    left_out: Mapping[str, str] = field(default_factory=dict)
    own: tuple[str, ...] | None = None


def has_coverage(paper: str) -> bool:
    return paper in PAPERS and importlib.util.find_spec(f"fedrepro.papers.{paper}.coverage") is not None


def declared(paper: str):
    """The paper's ``coverage`` module (``MAIN``, ``METHOD_ROWS``, ``TABLES``)."""
    return importlib.import_module(f"fedrepro.papers.{paper}.coverage")


def baselines(paper: str, table: str) -> list[str]:
    """The rows of quoted ``table`` that are not the paper's method (nor its own settings)."""
    cov = declared(paper)
    entry = cov.TABLES.get(table, TableCoverage())
    own = set(cov.METHOD_ROWS if entry.own is None else entry.own)
    return [r for r in paper_tables(paper)[table]["rows"] if r not in own]


def coverage_rows(paper: str) -> list[dict]:
    """One row per quoted table of ``paper``: its name, whether the main text prints it, the claims
    that read it (every claim of ``compared`` too) and the comparisons left out, each with its reason."""
    cov = declared(paper)
    out = []
    for name in paper_tables(paper):
        entry = cov.TABLES.get(name, TableCoverage())
        claims = list(dict.fromkeys([*entry.claims, *(c for cs in entry.compared.values() for c in cs)]))
        out.append({"table": name, "main": name in cov.MAIN, "claims": claims,
                    "compared": {row: list(cs) for row, cs in entry.compared.items()},
                    "left_out": dict(entry.left_out)})
    return out
