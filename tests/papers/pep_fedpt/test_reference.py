"""PEP-FedPT's quoted tables: all 13, one cell per column, every cell verbatim in the paper text."""
from pathlib import Path

import pytest

from fedrepro.papers.pep_fedpt.reference import TABLES
from fedrepro.papers.reference import paper_table

PAPER = Path(__file__).resolve().parents[4] / "shared" / "papers" / "pep-fedpt.txt"
METHODS = {"head_tuning", "fedvpt", "fedvpt_d", "fedpr", "sgpt", "pfedpg", "p_pt", "pep_fedpt", "pep_fedpt_no_cp",
           "pep_fedpt_dp"}


def test_every_table_of_the_paper_is_quoted():
    assert list(TABLES) == [f"T{i}" for i in range(1, 14)]


@pytest.mark.parametrize("name", list(TABLES))
def test_a_table_parses_and_its_method_rows_use_our_method_names(name):
    t = TABLES[name]
    df = paper_table("pep_fedpt", name, with_std=True)
    assert list(df.index) == list(t["rows"]) and df.attrs["source"].startswith("PEP-FedPT (arXiv) Table ")
    for row, cells in t["rows"].items():
        assert len(cells.split("|")) == len(t["columns"]), (name, row)
    if "index" not in t:  # rows are methods
        assert set(t["rows"]) <= METHODS, set(t["rows"]) - METHODS
    assert set(t.get("lower_bounds", ())) <= set(t["rows"])


def test_the_headline_numbers():
    t1 = paper_table("pep_fedpt", "T1", with_std=True)
    assert t1.loc["pep_fedpt", "C100 Path Mean"] == 95.46 and t1.loc["pep_fedpt", "C100 Path Mean_std"] == 0.16
    assert t1.loc["fedvpt", "C100 Path Mean"] == paper_table("pep_fedpt", "T4").loc["fedvpt", "Pathological"]
    assert paper_table("pep_fedpt", "T3", with_std=True).loc["pfedpg", "Tiny Testing_std"] == 0.48  # ".48"
    assert paper_table("pep_fedpt", "T6").loc["pep_fedpt", "Rounds required"] == 12


@pytest.mark.skipif(not PAPER.is_file(), reason="shared papers not beside the checkout")
def test_quoted_cells_appear_in_the_paper_text():
    text = PAPER.read_text()
    for name, t in TABLES.items():
        for row, cells in t["rows"].items():
            for cell in cells.split("|"):
                assert cell in text, f"{name}/{row}: {cell} not found in papers/pep-fedpt.txt"
