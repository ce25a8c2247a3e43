"""The paper profile against each paper, line by line (fedrepro.papers.paper_lines): every paper has
the table, every row's "ours" is read off the config the paper profile builds, every mismatch is
listed as left open, and the results page shows the table."""
from __future__ import annotations

import json

import pandas as pd
import pytest

from fedrepro.app.results_page import write_pages
from fedrepro.claims import save_claims
from fedrepro.papers import differences, paper, paper_lines
from fedrepro.papers.paper_lines import MATCH, MISMATCH, NOT_RUN, NOT_STATED, Line, Setting, lines, mismatches
from fedrepro.papers.verdicts import registered

PAPERS = ("fedpft", "pfedcspc", "pep_fedpt", "fedotp")
STATUSES = {MATCH, MISMATCH, NOT_STATED, NOT_RUN}
# The items every paper's main setting covers (pFedCSPC learns no prompts).
ITEMS = ("clients", "clients per round", "rounds", "local epochs", "batch size", "optimiser: momentum",
         "optimiser: weight decay", "learning rate", "model", "input size", "data split")


def _row(rows, setting_start: str, item: str) -> dict:
    return next(r for r in rows if r["setting"].startswith(setting_start) and r["item"] == item)


@pytest.mark.parametrize("name", PAPERS)
def test_every_paper_has_a_table_with_a_source_for_every_row(name):
    assert paper_lines.has_lines(name)
    rows = lines(name)
    assert rows and all(r["status"] in STATUSES for r in rows)
    assert all(r["paper"].strip() and r["source"].strip() and str(r["ours"]).strip() for r in rows)
    first = rows[0]["setting"]
    main = [r["item"] for r in rows if r["setting"] == first]
    for item in ITEMS:
        assert any(i.startswith(item) for i in main), f"{name}: the main setting has no {item!r} row"
    if name != "pfedcspc":
        assert any(i.startswith("prompts") for i in main), f"{name}: no prompt rows"
    # A setting is "not run" only where the paper has no table of that name.
    tables = paper(name).TABLES
    for s in paper_lines.settings(name):
        run = paper_lines.row_config(name, s) is not None
        assert run or s.table not in tables, f"{name}: {s.name} names a table we have but no row of it"


def test_ours_is_read_off_the_paper_profile_config(monkeypatch):
    from fedrepro.papers.pep_fedpt import setup as pep_setup
    from fedrepro.papers.fedpft import setup as fedpft_setup

    setting = "Table 1, CIFAR-100, pathological"
    before = _row(lines("pep_fedpt"), setting, "rounds")
    assert before["status"] == MATCH and before["ours"] == "100"
    monkeypatch.setitem(pep_setup.BASE["paper"]["train"], "rounds", 77)
    after = _row(lines("pep_fedpt"), setting, "rounds")
    assert after["ours"] == "77" and after["status"] == MISMATCH
    # A silent item shows ours whatever it is, never as a mismatch.
    monkeypatch.setitem(pep_setup.BASE["paper"]["train"], "batch_size", 7)
    batch = _row(lines("pep_fedpt"), setting, "batch size")
    assert batch["ours"] == "7" and batch["status"] == NOT_STATED
    # The input size follows the loader's option.
    tiny = "Table 1, Tiny-ImageNet, pathological"
    assert _row(lines("pep_fedpt"), tiny, "input size")["status"] == MATCH
    monkeypatch.setitem(pep_setup.CHANGES["tiny_imagenet"]["paper"]["data"]["dataset_args"], "image_size", 64)
    size = _row(lines("pep_fedpt"), tiny, "input size")
    assert size["ours"] == "64" and size["status"] == MISMATCH
    # A method argument and a partition argument, read through the table's row.
    monkeypatch.setitem(fedpft_setup.BASE["paper"]["data"]["partition_args"], "train_per_client", 400)
    sizes = _row(lines("fedpft"), "Table 8, CIFAR-10", "data split: images per client (train, test)")
    assert sizes["ours"] == "400, 100" and sizes["status"] == MISMATCH


@pytest.mark.parametrize("name", PAPERS)
def test_every_mismatch_is_left_open(name):
    rows = lines(name)
    listed = {o.item: o for o in differences.left_open(name, "paper", rows)}
    for r in mismatches(name, rows):
        entry = listed[f"{r['setting']}: {r['item']}"]
        assert r["paper"] in entry.reason and str(r["ours"]) in entry.reason
        assert "laptop" in entry.profiles
    typed = [o.item for o in getattr(paper(name), "LEFT_OPEN", ()) if "paper" in o.profiles]
    assert [o.item for o in differences.left_open(name, "paper", rows)][:len(typed)] == typed


def test_a_new_mismatch_joins_left_open(monkeypatch):
    from fedrepro.papers.pep_fedpt import setup as pep_setup

    item = "Table 1, CIFAR-100, pathological (PEP-FedPT): local epochs"
    assert item not in [o.item for o in differences.left_open("pep_fedpt", "laptop")]
    monkeypatch.setitem(pep_setup.BASE["paper"]["train"], "local_epochs", 3)
    assert item in [o.item for o in differences.left_open("pep_fedpt", "laptop")]


def test_a_setting_no_table_runs_is_not_run_and_left_open(monkeypatch):
    import fedrepro.papers.fedotp.paper_lines as fedotp_lines

    ghost = Setting("Table 99, nowhere", "no_such_table",
                    (Line("clients", "7", "§0", paper_lines.clients, 7), Line("rounds", "9", "§1", paper_lines.rounds)))
    monkeypatch.setattr(fedotp_lines, "SETTINGS", (ghost,))
    [row] = lines("fedotp")
    assert row["status"] == NOT_RUN and "no_such_table" in row["ours"] and "clients: 7" in row["paper"]
    assert "Table 99, nowhere: the setting itself" in [o.item for o in differences.left_open("fedotp", "paper")]


def test_comparisons():
    assert paper_lines.same(0.1, 0.1000000000001) and not paper_lines.same(0.1, 0.01)
    assert paper_lines.same((5, 6, 7), [5, 6, 7]) and not paper_lines.same((5, 6), (5, 6, 7))
    assert not paper_lines.same(None, (0.1, 0.01)) and paper_lines.same(None, None)
    assert paper_lines.shown((0.1, 0.5)) == "0.1, 0.5" and paper_lines.shown(None) == "none"
    assert paper_lines.keeps_classes(10, {"classes": 10})
    assert paper_lines.keeps_classes(10, {"class_names": list("abcdefghij")})
    assert not paper_lines.keeps_classes(10, {}) and not paper_lines.keeps_classes(10, {"top_classes": 20})


def test_the_results_page_shows_the_table(tmp_path, monkeypatch):
    monkeypatch.setenv("FEDREPRO_OUTPUT", str(tmp_path))
    name = "fedotp.beats_promptfl_pathological"
    claim = registered().get(name)
    save_claims(pd.DataFrame([{"claim_id": name, "paper": claim.paper, "source": claim.source,
                               "statement": claim.statement, "verdict": "PASS", "interval": "+1 pts",
                               "evidence": "e"}]), "fedotp_01_label_shift", "laptop")
    timings = tmp_path / "output" / "laptop" / "notebooks" / "timings.json"
    timings.parent.mkdir(parents=True)
    timings.write_text(json.dumps({"wall_s": 1.0, "cpu_use": 1.0, "cores": 1, "runs_trained": 0, "runs_planned": 0,
                                   "peak_memory_mib": 1, "notebooks": []}))
    page = write_pages("laptop", tmp_path)["fedotp"].read_text()
    section = page.split("## The paper profile against the paper, line by line")[1].split("\n## ")[0]
    for line in paper_lines.markdown("fedotp"):
        assert line in section
    left = page.split("## This profile against the paper")[1]
    for r in mismatches("fedotp"):
        assert f"**{r['setting']}: {r['item']}**" in left
