"""No claim reads a run at the seed and split its learning rate was chosen on: every table with a
search, at every profile."""
from __future__ import annotations

import pytest

from fedrepro.claims.core import STAGES
from fedrepro.papers import PAPERS, paper

TUNED = [(p, name) for p in PAPERS for name, t in getattr(paper(p), "TABLES", {}).items() if t.tune is not None]


def test_every_searching_paper_has_tuned_tables():
    assert {p for p, _ in TUNED} >= {"pfedcspc", "fedotp", "pep_fedpt"}


@pytest.mark.parametrize("profile", ["smoke", "laptop", "paper"])
@pytest.mark.parametrize("paper_name,table", TUNED)
def test_search_runs_share_no_seed_and_split_with_the_table(paper_name, table, profile):
    t = paper(paper_name).TABLES[table]
    searches = t.search_configs(profile)
    if not searches:
        pytest.skip(f"{paper_name}/{table} searches nothing at {profile}")
    rows = t.configs(profile, tuned=False)
    read = {(c.seed, c.data.validation) for c in rows}
    tuning = {(c.seed, c.data.validation) for c in searches}
    assert not read & tuning
    # Nor at any seed a sequential claim could add (up to the last stage), nor on test data.
    assert all(c.seed >= max(STAGES) and c.data.validation > 0 for c in searches)
    assert all(c.data.validation == 0 for c in rows)
