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


@pytest.mark.parametrize("package, name, notebook", CASES)
def test_the_notebook_cuts_the_per_round_scores_its_package_declares(package, name, notebook):
    """One declaration (``ROUNDS_OF``, beside ``BY_ROUND``) of what a claim reads at each round, which the
    notebook and the bench scripts (bench/levers.py, bench/final_window.py) all pass on."""
    import json

    from fedrepro.env.host import repo_root

    assert callable(package.ROUNDS_OF)
    cells = json.loads((repo_root() / "notebooks" / name / f"{notebook}.ipynb").read_text())["cells"]
    calls = ["".join(c["source"]) for c in cells if "verdicts_by_group(" in "".join(c["source"])]
    assert calls and all(f"{name}.BY_ROUND, {name}.ROUNDS_OF)" in src for src in calls)


def test_a_claim_that_may_read_more_seeds_is_read_by_notebooks_whose_tables_can_grow():
    """The sequential stages grow tables and staged runs (fedrepro.papers.plan.seed_stage): a claim
    declaring more than the default seeds, evaluated in a notebook that reads neither, could never get
    them."""
    import json
    from pathlib import Path

    from fedrepro.claims.core import DEFAULT_MAX_SEEDS
    from fedrepro.papers import paper as paper_package
    from fedrepro.papers.verdicts import registered

    root = Path(__file__).resolve().parents[2] / "notebooks"
    reg = registered()
    sequential = [reg.get(n) for n in reg.names() if reg.get(n).max_seeds > DEFAULT_MAX_SEEDS]
    assert sequential
    stuck = []
    for path in sorted(root.glob("*/[0-9]*.ipynb")):
        paper = path.parent.name
        if paper == "backbones":
            continue
        code = "".join("".join(c["source"]) for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code")
        needs = paper_package(paper).NOTEBOOKS.get(path.stem, [])
        for c in sequential:
            if f'"{c.id}"' in code and not any(n.table is not None or n.stage is not None for n in needs):
                stuck.append(f"{c.id} (max_seeds {c.max_seeds}) in {paper}/{path.name}")
    assert not stuck, stuck
