"""The quoted paper tables parse, and every quoted cell appears in the paper's text as printed (± spacing aside)."""
import re
from pathlib import Path

import pytest

from fedrepro.errors import ConfigError
from fedrepro.papers.reference import paper_table, paper_tables

PAPERS = Path(__file__).resolve().parents[3] / "shared" / "papers"
# The text files of each paper whose tables are quoted; FedPFT's cells come from either version.
PAPER_TEXTS = {"fedpft": ("fedpft-iclr-version.txt", "fedpft-arxiv-version.txt"), "pep_fedpt": ("pep-fedpt.txt",),
               "fedotp": ("fedotp.txt",), "pfedcspc": ("pfedcspc.txt",)}


QUOTED = [(paper, name) for paper in ("fedpft", "pep_fedpt") for name in paper_tables(paper)]


@pytest.mark.parametrize("paper, name", QUOTED)
def test_tables_parse_with_one_cell_per_column(paper, name):
    t = paper_tables(paper)[name]
    for row, cells in t["rows"].items():
        assert len(cells.split("|")) == len(t["columns"]), (name, row)
    df = paper_table(paper, name, with_std=True)
    assert df.shape[0] == len(t["rows"]) and df.attrs["source"]
    assert list(df.columns[::2]) == t["columns"] and df[t["columns"]].notna().all().all()


def plus_minus(text: str) -> str:
    """``text`` with every ± written ``±`` without spaces around: the ICLR text writes ``\\pm``, the
    arXiv text ``±plus-or-minus\\pm±``, and some texts and quoted cells have spaces around it."""
    return re.sub(r"\s*(?:±plus-or-minus\\pm±|\\pm|±)\s*", "±", text)


@pytest.mark.skipif(not PAPERS.is_dir(), reason="paper texts not beside the checkout")
@pytest.mark.parametrize("paper", sorted(PAPER_TEXTS))
def test_quoted_cells_appear_in_the_paper(paper):
    texts = [plus_minus((PAPERS / name).read_text()) for name in PAPER_TEXTS[paper]]
    for name, t in paper_tables(paper).items():
        for row, cells in t["rows"].items():
            for cell in cells.split("|"):
                assert any(plus_minus(cell) in text for text in texts), \
                    f"{paper} {name}/{row}: {cell} not found in {', '.join(PAPER_TEXTS[paper])}"


def test_unknown_names():
    with pytest.raises(ConfigError, match="fedpft"):
        paper_tables("nope")
    with pytest.raises(ConfigError, match="T-C10"):
        paper_table("fedpft", "T99")
