"""PEP-FedPT's rows that issue 55 changed: P-PT at the paper's one rate beside our tuned P-PT, and
Table 12's CCMP arms, which must not share a block on the 6-block stand-in."""
import pytest
from support import setup as build

from fedrepro.errors import ConfigError
from fedrepro.methods.pep_fedpt import single_ccmp_block
from fedrepro.papers import setup
from fedrepro.papers.pep_fedpt.setup import PAPER_LR
from fedrepro.papers.pep_fedpt.tables import STAND_IN_DEPTH, TABLES, lr_search, model_depth, run_ccmp_blocks
from fedrepro.papers.pep_fedpt.variants import PPT_PAPER_RATE, PPT_TUNED, paper_arms, position_arms


def _rows(table: str, profile: str) -> dict[str, dict]:
    """Every named row of ``table`` at ``profile`` (row -> its overrides), over all its groups."""
    return {k: v for g in TABLES[table].row_groups(profile) for k, v in (g.variants or {}).items()}


def _config(table: str, profile: str, name: str):
    t = TABLES[table]
    return setup("pep_fedpt", profile, t.setup).replace(**_rows(table, profile)[name])


def test_the_papers_rate_is_app_a32s_one_rate():
    # App. A.3.2: SGD "with learning rate 0.1", for prompts and head alike.
    assert PAPER_LR == 0.1
    paper = setup("pep_fedpt", "paper", "pathological")
    assert (paper.train.lr, paper.train.prompt_lr) == (PAPER_LR, None)


@pytest.mark.parametrize("table", ["label_pathological", "heldout"])
def test_p_pt_runs_at_the_papers_rate_beside_the_tuned_one_where_the_claims_read_it(table):
    rows = _rows(table, "laptop")
    assert {PPT_PAPER_RATE, PPT_TUNED} <= set(rows) and "p_pt" not in rows
    paper = _config(table, "laptop", PPT_PAPER_RATE)
    assert (paper.method.name, paper.train.lr, paper.train.prompt_lr) == ("p_pt", PAPER_LR, None)
    tuned = _config(table, "laptop", PPT_TUNED)
    assert (tuned.method.name, tuned.train.lr, tuned.train.prompt_lr) == ("p_pt", 0.01, 1.0)  # where the search starts
    # Both over the claim seeds: the claims read them.
    claim_rows = {k for g in TABLES[table].row_groups("laptop") if g.seeds == "claim" for k in g.variants}
    assert {PPT_PAPER_RATE, PPT_TUNED} <= claim_rows
    # The paper profile searches no rate: its one P-PT is the paper's-rate row.
    assert {k for k in _rows(table, "paper") if k.startswith("p_pt")} == {PPT_PAPER_RATE}


def test_the_search_leaves_the_papers_rate_row_at_the_papers_rate():
    search = lr_search("laptop")
    paper = _config("label_pathological", "laptop", PPT_PAPER_RATE)
    assert not any(stage.searched(paper) for stage in search.stages)
    assert search.choose(paper) == paper  # no search run to wait for: it stays at 0.1
    assert all(stage.searched(_config("label_pathological", "laptop", PPT_TUNED)) for stage in search.stages)


def test_the_papers_p_pt_number_sits_beside_the_papers_rate_row():
    for name in ("label_pathological", "label_dirichlet", "heldout", "feature_shift"):
        ref = TABLES[name].paper_numbers()
        assert PPT_PAPER_RATE in ref.index and "p_pt" not in ref.index and PPT_TUNED not in ref.index, name
    assert TABLES["label_pathological"].paper_numbers().loc[PPT_PAPER_RATE, "C100 Path Mean"] == 75.37


def test_single_blocks_stand_for_table_12s_arms_at_the_same_relative_depth():
    # The last block of each paper arm (0-indexed 2, 6, 9 of 12) at the same relative depth, rounded down.
    assert [single_ccmp_block(p, 12) for p in ("first", "middle", "late")] == [2, 6, 9]
    assert [single_ccmp_block(p, 6) for p in ("first", "middle", "late")] == [1, 3, 4]
    with pytest.raises(ConfigError, match="position"):
        single_ccmp_block("centre", 6)


def test_the_stand_ins_three_block_arms_would_overlap_and_the_paper_models_do_not():
    assert paper_arms(6) == {"ccmp first": [0, 1, 2], "ccmp middle": [2, 3, 4], "ccmp late": [3, 4, 5]}
    assert position_arms(6) == {"ccmp first": [1], "ccmp middle": [3], "ccmp late": [4]}
    assert position_arms(12) == paper_arms(12) == {"ccmp first": [0, 1, 2], "ccmp middle": [4, 5, 6],
                                                   "ccmp late": [7, 8, 9]}


@pytest.mark.parametrize("profile, expected", [
    ("smoke", {"ccmp first": (1,), "ccmp middle": (3,), "ccmp late": (4,)}),
    ("laptop", {"ccmp first": (1,), "ccmp middle": (3,)}),
    ("paper", {"ccmp first": (0, 1, 2), "ccmp middle": (4, 5, 6), "ccmp late": (7, 8, 9)})])
def test_the_position_tables_arms_share_no_block(profile, expected):
    blocks = {name: run_ccmp_blocks(_config("position", profile, name)) for name in _rows("position", profile)}
    assert blocks == expected
    placed = [b for bs in blocks.values() for b in bs]
    assert len(placed) == len(set(placed))


def test_the_stand_in_has_the_depth_the_arms_assume(tiny):
    laptop = setup("pep_fedpt", "laptop", "pathological")
    assert model_depth(laptop) == STAND_IN_DEPTH == 6
    middle = _config("position", "laptop", "ccmp middle")
    method, _, _ = build(tiny(**{"model.name": laptop.model.name, "model.args": laptop.model.args,
                                 "method.name": "pep_fedpt", "method.args": middle.method.args}))
    assert method.net.backbone.depth == STAND_IN_DEPTH
    assert method.blocks == list(run_ccmp_blocks(middle)) == [3]
