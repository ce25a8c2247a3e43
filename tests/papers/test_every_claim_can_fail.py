"""Every registered claim can fail: on a witness table where it holds it PASSes, and on each null its
arms make of that table (the control's numbers in place of the method's, the two sides swapped, the
effect column at its no-effect value) it does not. A claim added without arms or a witness fails
here. A claim with a ceiling (fedrepro.claims.core.Ceiling) may read UNTESTABLE on its swapped null,
where the control holds the method's numbers; on its plain null it must FAIL (or not decide)."""
from __future__ import annotations

import re

import pytest

from fedrepro.papers.verdicts import registered

from .claim_witnesses import WITNESSES

NAMES = registered().names()


def test_every_witness_is_of_a_registered_claim():
    assert not set(WITNESSES) - set(NAMES)


@pytest.mark.parametrize("claim_id", NAMES)
def test_a_claim_passes_its_witness_and_not_its_nulls(claim_id):
    claim = registered().get(claim_id)
    assert claim.arms, f"{claim_id}: declare what it compares (Claim.arms, fedrepro.claims.arms)"
    assert claim_id in WITNESSES, f"{claim_id}: add a witness table (tests/papers/claim_witnesses.py)"
    witness = WITNESSES[claim_id]()
    held = claim.evaluate(witness)
    assert held.verdict == "PASS", held.evidence
    # Its effect is said in its words: which way the sign points (no bare "+1.2 rounds"), and what it requires.
    said, _, required = held.effect.partition(" (required: ")
    assert required and not re.search(r"(^|[\s(:])[+\-−]\d", said), held.effect
    for arm in claim.arms:
        nulls = {"null": arm.null(witness)}
        swapped = getattr(arm, "swapped", lambda _: None)(witness)
        if swapped is not None:
            nulls["swapped"] = swapped
        for kind, table in nulls.items():
            res = claim.evaluate(table)
            # A swapped table puts the method's numbers in the control's place: under a ceiling the
            # control then sits at or above it and leaves no room, which reads UNTESTABLE (never PASS).
            # The plain null keeps the control's numbers, which the witness leaves room above: a miss
            # there must be a FAIL or INCONCLUSIVE, or a claim whose ceiling is wrong could never fail.
            allowed = ("FAIL", "INCONCLUSIVE") + (("UNTESTABLE",) if kind == "swapped" else ())
            assert res.verdict in allowed, (kind, arm, res.verdict, res.evidence)
