"""Table VII's target: the paper's own accuracy for its columns, a share of FedAvg's elsewhere."""
from __future__ import annotations

import pytest

from fedrepro.papers import pfedcspc
from fedrepro.papers.pfedcspc.reference import TABLE_VII_TARGETS
from fedrepro.papers.pfedcspc.tables import TARGET_FRACTION, rounds_target
from fedrepro.papers.reference import paper_table


def test_the_paper_profile_columns_take_the_papers_targets():
    assert rounds_target("C10 β=0.5", 0.9) == 0.66 and rounds_target("Tiny β=0.1", 0.2) == 0.42
    # Every column the paper profile runs for Table VII has its target, and they are the quote's columns.
    columns = [c for v in ("default", "beta0.1") for c in pfedcspc.TABLES[f"rounds_{v}"].paper_columns("paper")]
    assert sorted(columns) == sorted(TABLE_VII_TARGETS) == sorted(paper_table("pfedcspc", "T7").columns)


def test_below_the_paper_profile_the_target_is_a_share_of_fedavg():
    assert pfedcspc.TABLES["rounds_default"].paper_columns("laptop") is None  # rows name no column
    assert rounds_target(None, 0.8) == pytest.approx(TARGET_FRACTION * 0.8)
    assert rounds_target(None, 0.8, fraction=0.5) == pytest.approx(0.4)
