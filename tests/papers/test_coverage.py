"""Every baseline row of every main table of every paper is compared by a claim or left out with a
reason (each paper's coverage.py), and the coverage names only registered claims and quoted tables."""
from __future__ import annotations

import pytest

from fedrepro.papers import PAPERS
from fedrepro.papers.coverage import baselines, coverage_rows, declared, has_coverage
from fedrepro.papers.reference import paper_tables
from fedrepro.papers.verdicts import registered

COVERED = [p for p in PAPERS if p != "tour"]


def test_every_paper_with_quoted_tables_declares_its_coverage():
    assert all(has_coverage(p) for p in COVERED)


@pytest.mark.parametrize("paper", COVERED)
def test_every_baseline_of_a_main_table_is_claimed_or_left_out_with_a_reason(paper):
    cov = declared(paper)
    quoted = paper_tables(paper)
    assert set(cov.MAIN) <= set(quoted) and set(cov.TABLES) <= set(quoted)
    for table in cov.MAIN:
        entry = cov.TABLES[table]
        rows = set(baselines(paper, table))
        assert not set(entry.compared) & set(entry.left_out), table
        missing = rows - set(entry.compared) - set(entry.left_out)
        assert not missing, f"{paper} {table}: no claim compares the method with {sorted(missing)}, nor is it left out"
        assert all(entry.left_out[r].strip() for r in entry.left_out), f"{paper} {table}: a left-out row needs a reason"
    for table, entry in cov.TABLES.items():  # rows of the table itself, not of another
        assert set(entry.compared) | set(entry.left_out) <= set(quoted[table]["rows"]), table


@pytest.mark.parametrize("paper", COVERED)
def test_coverage_names_registered_claims_of_the_paper(paper):
    names = set(registered().names())
    for row in coverage_rows(paper):
        assert set(row["claims"]) <= names, row["table"]
        assert all(c.startswith(f"{paper}.") for c in row["claims"])
