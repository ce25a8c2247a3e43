"""Notebook 09's claims by round: every pFedCSPC claim is either cut by round or named with why not."""
from __future__ import annotations

from fedrepro.claims import claims_for
from fedrepro.papers import pfedcspc
from fedrepro.plan import Need


def test_every_claim_is_judged_by_round_or_named_with_a_reason():
    by_round = [c for ids in pfedcspc.BY_ROUND.values() for c in ids]
    assert len(by_round) == len(set(by_round))
    assert not set(by_round) & set(pfedcspc.NOT_BY_ROUND)
    assert set(by_round) | set(pfedcspc.NOT_BY_ROUND) == {c.id for c in claims_for("pfedcspc")}
    assert all(reason.strip() for reason in pfedcspc.NOT_BY_ROUND.values())


def test_the_notebook_plans_every_table_it_cuts():
    tables = {t for group in pfedcspc.BY_ROUND for t in group}
    assert tables <= set(pfedcspc.TABLES)
    needs = pfedcspc.NOTEBOOKS["09_convergence"]
    assert all(isinstance(n, Need) for n in needs)
    assert {n.table for n in needs} == tables
