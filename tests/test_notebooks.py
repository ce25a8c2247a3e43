"""Notebooks are committed clean and well-formed; nbval executes them separately (make test)."""
import json
from pathlib import Path

import pytest

from fedrepro.app.reproduce import numbered_notebooks

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").rglob("*.ipynb"))


def test_there_are_notebooks():
    assert NOTEBOOKS and numbered_notebooks(ROOT)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: str(p.relative_to(ROOT)))
def test_committed_without_outputs(path):
    nb = json.loads(path.read_text())
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            assert cell.get("outputs") == [], f"{path.name}: a code cell has outputs; clear them before committing"
            assert cell.get("execution_count") is None, f"{path.name}: a code cell has an execution count"


@pytest.mark.parametrize("path", numbered_notebooks(ROOT), ids=lambda p: str(p.relative_to(ROOT)))
def test_has_a_papermill_parameters_cell_with_profile(path):
    nb = json.loads(path.read_text())
    params = [c for c in nb["cells"] if "parameters" in c.get("metadata", {}).get("tags", [])]
    assert len(params) == 1, f"{path.name} needs exactly one cell tagged 'parameters'"
    # None lets FEDREPRO_PROFILE choose under nbval (which cannot inject parameters), while a
    # profile papermill injects (or the reader types) wins over the variable (resolve_profile).
    assert "PROFILE = None" in "".join(params[0]["source"]), f"{path.name}: the parameters cell must set PROFILE = None"
    assert "fedrepro.resolve_profile(PROFILE)" in "".join("".join(c["source"]) for c in nb["cells"]), \
        f"{path.name} must resolve PROFILE with fedrepro.resolve_profile (explicit > FEDREPRO_PROFILE > laptop)"


def test_every_numbered_notebook_is_listed_in_the_notebooks_page():
    listing = (ROOT / "docs" / "notebooks.md").read_text()  # the README links it
    for path in numbered_notebooks(ROOT):
        assert str(path.relative_to(ROOT)) in listing, f"{path} is not listed in docs/notebooks.md"


@pytest.mark.parametrize("path", numbered_notebooks(ROOT), ids=lambda p: str(p.relative_to(ROOT)))
def test_records_its_claims_under_the_name_the_pages_and_the_plan_look_for(path):
    import re

    from fedrepro.claims.core import record_name

    source = "".join("".join(c["source"]) for c in json.loads(path.read_text())["cells"])
    names = re.findall(r"save_claims\([^,]+,\s*\"([^\"]+)\"", source)
    want = record_name(path.relative_to(ROOT / "notebooks"))
    # A notebook saved under another name would keep its claims off its kept record, and the plan
    # could not grow its sequential claims' seeds.
    assert all(n == want for n in names), f"{path.name}: save_claims under {names}, expected {want!r}"


@pytest.mark.parametrize("path", numbered_notebooks(ROOT), ids=lambda p: str(p.relative_to(ROOT)))
def test_a_notebook_with_a_sequential_claim_lets_its_seed_stages_reach_it(path):
    import re

    from fedrepro.claims import CLAIMS
    from fedrepro.papers import load_all

    load_all()
    source = "".join("".join(c["source"]) for c in json.loads(path.read_text())["cells"])
    sequential = [i for i in set(re.findall(r"\"([a-z_]+\.[a-z0-9_.]+)\"", source))
                  if i in CLAIMS and CLAIMS.get(i).max_seeds > 3]
    # SEEDS = None reaches the tables, which continue the profile's seeds to the stage a sequential
    # claim reached (fedrepro.papers.claim_seeds); fixing it to the profile's default first would keep
    # the claim at 3 seeds however many the plan trains.
    assert not sequential or "default_seeds(PROFILE)" not in source, \
        f"{path.name}: resolves SEEDS to the profile's default, so the stages of {sorted(sequential)} never reach them"
