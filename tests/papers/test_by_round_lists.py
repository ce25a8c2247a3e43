"""The convergence notebooks' claims by round (FedPFT 17, pFedCSPC 09): every claim of the paper is
either cut by round or named with why not, and the notebook plans every table it cuts."""
from __future__ import annotations

import pytest

from fedrepro.papers.verdicts import claims_for
from fedrepro.papers import fedpft, pfedcspc
from fedrepro.papers.plan import Need

CASES = [(fedpft, "fedpft", "17_convergence"), (pfedcspc, "pfedcspc", "09_convergence")]


@pytest.mark.parametrize("package, name, notebook", CASES)
def test_every_claim_is_judged_by_round_or_named_with_a_reason(package, name, notebook):
    by_round = [c for ids in package.BY_ROUND.values() for c in ids]
    assert len(by_round) == len(set(by_round))
    assert not set(by_round) & set(package.NOT_BY_ROUND)
    assert set(by_round) | set(package.NOT_BY_ROUND) == {c.id for c in claims_for(name)}
    assert all(reason.strip() for reason in package.NOT_BY_ROUND.values())


@pytest.mark.parametrize("package, name, notebook", CASES)
def test_the_notebook_plans_every_table_it_cuts(package, name, notebook):
    tables = {t for group in package.BY_ROUND for t in group}
    assert tables <= set(package.TABLES)
    needs = package.NOTEBOOKS[notebook]
    assert all(isinstance(n, Need) for n in needs)
    assert {n.table for n in needs} == tables
