"""The quoted paper tables parse, and every quoted cell appears verbatim in the spec it cites."""
from pathlib import Path

import pytest

from fedrepro.errors import ConfigError
from fedrepro.papers.reference import paper_table, paper_tables

SPECS = Path(__file__).resolve().parents[3] / "shared" / "specs"


QUOTED = [(paper, name) for paper in ("fedpft", "pep_fedpt") for name in paper_tables(paper)]


@pytest.mark.parametrize("paper, name", QUOTED)
def test_tables_parse_with_one_cell_per_column(paper, name):
    t = paper_tables(paper)[name]
    for row, cells in t["rows"].items():
        assert len(cells.split("|")) == len(t["columns"]), (name, row)
    df = paper_table(paper, name, with_std=True)
    assert df.shape[0] == len(t["rows"]) and df.attrs["source"]
    assert list(df.columns[::2]) == t["columns"] and df[t["columns"]].notna().all().all()


@pytest.mark.skipif(not (SPECS / "fedpft.md").is_file(), reason="shared specs not beside the checkout")
def test_quoted_cells_appear_in_the_spec():
    spec = (SPECS / "fedpft.md").read_text()
    for name, t in paper_tables("fedpft").items():
        for row, cells in t["rows"].items():
            for cell in cells.split("|"):
                assert cell in spec, f"{name}/{row}: {cell} not found in specs/fedpft.md"


def test_unknown_names():
    with pytest.raises(ConfigError, match="fedpft"):
        paper_tables("nope")
    with pytest.raises(ConfigError, match="T-C10"):
        paper_table("fedpft", "T99")
