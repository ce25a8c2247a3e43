"""Notebook 17's claims by round: every FedPFT claim is either cut by round or named with why not."""
from __future__ import annotations

from fedrepro.claims import claims_for
from fedrepro.papers import fedpft


def test_every_claim_is_judged_by_round_or_named_with_a_reason():
    by_round = [c for ids in fedpft.BY_ROUND.values() for c in ids]
    assert len(by_round) == len(set(by_round))
    assert not set(by_round) & set(fedpft.NOT_BY_ROUND)
    assert set(by_round) | set(fedpft.NOT_BY_ROUND) == {c.id for c in claims_for("fedpft")}
    assert all(reason.strip() for reason in fedpft.NOT_BY_ROUND.values())


def test_the_notebook_plans_every_table_it_cuts():
    tables = {t for group in fedpft.BY_ROUND for t in group}
    assert tables <= set(fedpft.TABLES)
    assert tables <= {n.table for n in fedpft.NOTEBOOKS["17_convergence"]}
