"""Every paper's table definitions resolve at every profile: their runs, and the quoted numbers
they sit beside."""
from __future__ import annotations

import pytest

from fedrepro.papers import PAPERS, paper

TABLES = [(p, name) for p in PAPERS for name in getattr(paper(p), "TABLES", {})]


@pytest.mark.parametrize("profile", ["smoke", "laptop", "paper"])
@pytest.mark.parametrize("paper_name, table_name", TABLES)
def test_a_table_lists_distinct_valid_runs_at_every_profile(paper_name, table_name, profile):
    table = paper(paper_name).TABLES[table_name]
    configs = table.configs(profile, tuned=False)  # a tuned table's rows before its search
    assert configs, "a table with no runs"
    hashes = [c.hash() for c in configs]
    assert len(set(hashes)) == len(hashes), "the same run listed twice"
    searches = [c.hash() for c in table.search_configs(profile)]
    assert len(set(searches)) == len(searches) and not set(searches) & set(hashes)


@pytest.mark.parametrize("paper_name, table_name", TABLES)
def test_a_table_finds_the_paper_numbers_it_quotes(paper_name, table_name):
    table = paper(paper_name).TABLES[table_name]
    numbers = table.paper_numbers()
    assert (numbers is None) == (table.reference is None)
    if numbers is not None:
        assert len(numbers.columns) and len(numbers.index)


def test_claim_rows_run_over_the_claim_seeds_and_the_rest_over_the_table_seeds():
    from fedrepro.papers import fedpft

    table = fedpft.TABLES["linear"]
    seeds = {(c.method.name, c.seed) for c in table.configs("laptop", seeds=[0, 1, 2], table_seeds=[7])}
    others = ("local", "fedpft_con")  # rows no claim reads
    assert {s for m, s in seeds if m not in others} == {0, 1, 2}  # the claims' rows
    assert {s for m, s in seeds if m in others} == {7}
