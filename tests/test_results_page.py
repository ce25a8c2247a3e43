"""The generated results pages: every registered claim with its stored verdict, the reason for each
claim that did not pass, the notebooks' timings, and the index across papers."""
from __future__ import annotations

import dataclasses
import json

import pandas as pd
import pytest

from fedrepro.papers.verdicts import registered
from fedrepro.claims import save_claims
from fedrepro.claims.core import breakable_id
from fedrepro.app.cli import main
from fedrepro.errors import ConfigError, CorruptCacheError
from fedrepro.app.results_page import NO_CAUSE, notebook_paper, write_pages

CLAIMS = registered()  # every paper's claims

TIMINGS = {"wall_s": 1800.0, "cpu_use": 0.97, "cores": 2, "runs_trained": 5, "runs_planned": 5,
           "peak_memory_mib": 1234, "cpu": "Some CPU", "allocator": "system", "commit": "f00ba12",
           "notebooks": [{"notebook": "00_tour.ipynb", "render_s": 7.0, "runs_read": 27, "train_s_of_its_runs": 247.0},
                         {"notebook": "fedotp/01_label_shift.ipynb", "render_s": 15.0, "runs_read": 63,
                          "train_s_of_its_runs": 94.0},
                         {"notebook": "fedotp/02_dirichlet.ipynb", "render_s": 7.0, "runs_read": 27,
                          "train_s_of_its_runs": 119.0},
                         {"notebook": "backbones/01_vit_standin.ipynb", "render_s": 19.3, "runs_read": 0,
                          "train_s_of_its_runs": 0}]}


def _row(claim_id: str, verdict: str, interval: str = "+1.00 pts [-2.00, +4.00], required > +5.00 pts", **kw):
    c = CLAIMS.get(claim_id)
    return {"claim_id": claim_id, "paper": c.paper, "source": c.source, "statement": c.statement,
            "verdict": verdict, "interval": interval, "evidence": f"evidence of {claim_id}", **kw}


@pytest.fixture
def stored(tmp_path, monkeypatch):
    """A small claims folder and a timings report in ``tmp_path`` (as a pass leaves them)."""
    monkeypatch.setenv("FEDREPRO_OUTPUT", str(tmp_path))
    save_claims(pd.DataFrame([_row("tour.local_beats_fedavg_skewed", "FAIL", "-1.00 pts [-2.00, -0.10], required > "
                                   "+5.00 pts", statement="Local | FedAvg"),
                              _row("tour.fedavg_beats_local_iid", "PASS",
                                   "+6.35 pts [+3.53, +9.17], required > +0.00 pts")]),
                "00_tour", "laptop")
    save_claims(pd.DataFrame([_row("fedotp.beats_promptfl_pathological", "PASS"),
                              _row("fedotp.gamma_inverted_u", "INCONCLUSIVE")]), "fedotp_01_label_shift", "laptop")
    timings = tmp_path / "output" / "laptop" / "notebooks" / "timings.json"
    timings.parent.mkdir(parents=True)
    timings.write_text(json.dumps(TIMINGS))
    return tmp_path


def test_each_paper_gets_a_page_with_its_claims_reasons_and_timings(stored):
    pages = write_pages("laptop", stored)
    assert set(pages) == {"index", "tour", "fedpft", "pfedcspc", "pep_fedpt", "fedotp"}
    assert all(p.parent == stored / "docs" / "results" / "laptop" for p in pages.values())
    tour = pages["tour"].read_text()
    assert "commit `f00ba12`" in tour and "30.0 min" in tour and "Some CPU" in tour
    assert "5 runs trained of 5 planned, 30.0 min" in tour  # a pass from an empty store
    assert "| training time of its runs (s) |" in tour
    assert (f"| [{breakable_id('tour.local_beats_fedavg_skewed')}](#tourlocal_beats_fedavg_skewed) | "
            "Local \\| FedAvg | "
            f"{CLAIMS.get('tour.local_beats_fedavg_skewed').source} | **FAIL** | not estimated | "
            "-1.00 pts [-2.00, -0.10], required > +5.00 pts |  | 00_tour |") in tour
    assert "| claim | statement | source | verdict |" in tour  # each claim's statement beside its verdict
    assert f"| {breakable_id('tour.local_beats_fedavg_skewed')} | FAIL | {NO_CAUSE} |" in tour
    assert f"{breakable_id('tour.fedavg_beats_local_iid')} | PASS" not in tour  # a passed claim needs no reason
    assert "- evidence: evidence of tour.local_beats_fedavg_skewed" in tour
    assert "| `00_tour.ipynb` | 7.0 | 27 | 247 |" in tour and "fedotp/01" not in tour.split("## Timings")[1]
    fedotp = pages["fedotp"].read_text()
    assert f"| {breakable_id('fedotp.gamma_inverted_u')} | INCONCLUSIVE | the interval straddles the bound" in fedotp
    assert "| fedotp/01_label_shift |" in fedotp  # the claims record's notebook name, as its path
    assert "| **all 2** | 22.0 | | 213 |" in fedotp
    # A claim no notebook checked is NOT RUN, and the reason says so.
    n_otp = sum(1 for n in CLAIMS.names() if CLAIMS.get(n).paper == "fedotp")
    assert f"2 NOT RUN of {n_otp} claims".replace("2 NOT RUN", f"{n_otp - 2} NOT RUN") in fedotp
    assert "no notebook has checked it yet" in fedotp
    for name in CLAIMS.names():
        assert breakable_id(name) in pages[CLAIMS.get(name).paper].read_text()


def test_a_recorded_cause_is_used(stored, monkeypatch):
    claim = CLAIMS.get("tour.local_beats_fedavg_skewed")
    monkeypatch.setattr(CLAIMS, "get", lambda name, _get=CLAIMS.get: dataclasses.replace(
        claim, likely_cause="too few rounds") if name == claim.id else _get(name))
    tour = write_pages("laptop", stored)["tour"].read_text()
    assert f"| {breakable_id('tour.local_beats_fedavg_skewed')} | FAIL | likely cause: too few rounds |" in tour
    assert f"FAIL | {NO_CAUSE}" not in tour and f"reason: {NO_CAUSE}" not in tour


def test_the_index_counts_verdicts_per_paper_and_links_each_page(stored):
    index = write_pages("laptop", stored)["index"].read_text()
    assert index.startswith("# Results at the laptop profile")
    # PASS, INCONCLUSIVE, FAIL, UNTESTABLE (counted apart from FAIL), NOT RUN
    assert "| paper | claims | PASS | INCONCLUSIVE | FAIL | UNTESTABLE | NOT RUN |" in index
    assert "| [tour](tour.md) | 2 | 1 | 0 | 1 | 0 | 0 | 1 | 7.0 | 247 |" in index
    n_otp = sum(1 for n in CLAIMS.names() if CLAIMS.get(n).paper == "fedotp")
    assert f"| [fedotp](fedotp.md) | {n_otp} | 1 | 1 | 0 | 0 | {n_otp - 2} | 2 | 22.0 | 213 |" in index
    n = len(CLAIMS.names())
    assert f"| all | {n} | 2 | 1 | 1 | 0 | {n - 4} | | | |" in index
    assert "## Notebooks of no paper" in index and "`backbones/01_vit_standin.ipynb` | 19.3" in index
    assert "Student's t" in index
    # Every claim on one line under its paper: which findings hold, at a glance.
    skewed = breakable_id("tour.local_beats_fedavg_skewed")
    assert (f"| [{skewed}](tour.md#tourlocal_beats_fedavg_skewed) | Local \\| FedAvg | "
            "**FAIL** | not estimated | -1.00 pts [-2.00, -0.10], required > +5.00 pts |") in index
    assert sum(ln.startswith("| [<code>") and "| **NOT RUN** |" in ln for ln in index.splitlines()) == n - 4


def test_without_claims_nothing_is_written(tmp_path, monkeypatch):
    monkeypatch.setenv("FEDREPRO_OUTPUT", str(tmp_path))
    with pytest.raises(ConfigError, match="no notebook has recorded claims"):
        write_pages("laptop", tmp_path)
    with pytest.raises(ConfigError, match="unknown profile 'bogus'; valid profiles: smoke, laptop, paper"):
        write_pages("bogus", tmp_path)
    assert not (tmp_path / "docs").exists()


def test_without_a_timings_report_the_pages_say_so(stored):
    (stored / "output" / "laptop" / "notebooks" / "timings.json").unlink()
    pages = write_pages("laptop", stored, commit="abc1234")
    assert "No timings report was found" in pages["index"].read_text()
    assert "No timings for this paper's notebooks" in pages["fedpft"].read_text()
    with pytest.raises(ConfigError, match="timings="):
        write_pages("laptop", stored, timings=stored / "missing.json")


def test_notebooks_belong_to_their_paper():
    assert notebook_paper("fedpft/03_main_tables.ipynb") == "fedpft"
    assert notebook_paper("00_tour.ipynb") == "tour"
    assert notebook_paper("backbones/01_vit_standin.ipynb") is None
    assert notebook_paper("99_claims_summary.ipynb") is None


def test_cli_writes_the_pages(stored, monkeypatch, capsys):
    other = stored / "bench.json"
    other.write_text(json.dumps({**TIMINGS, "commit": "0ther00"}))
    assert main(["results", "--profile", "laptop", "--timings", str(other)]) == 0
    out = capsys.readouterr().out
    assert f"written: {stored / 'docs' / 'results' / 'laptop' / 'index.md'}" in out
    assert "commit `0ther00`" in (stored / "docs" / "results" / "laptop" / "fedotp.md").read_text()
    assert main(["results", "--profile", "laptop", "--timings", str(stored / "nope.json")]) == 2


def test_each_page_sets_the_profile_beside_the_paper_and_lists_what_it_leaves_open(stored):
    from fedrepro.papers import differences, paper, setup

    pages = write_pages("laptop", stored)
    fedpft = pages["fedpft"].read_text().split("## This profile against the paper")[1].split("## Timings")[0]
    laptop, theirs = setup("fedpft", "laptop"), setup("fedpft", "paper")
    # Read off the configs: a difference in bold, an equal setting plain.
    assert f"| rounds | {theirs.train.rounds} | **{laptop.train.rounds}** |" in fedpft
    assert f"| local epochs | {theirs.train.local_epochs} | {laptop.train.local_epochs} |" in fedpft
    for item in paper("fedpft").LEFT_OPEN:
        assert (f"- **{item.item}**: {item.reason}" in fedpft) == ("laptop" in item.profiles)
    # The tour has no setup of its own, so no such section.
    assert "This profile against the paper" not in pages["tour"].read_text()
    # The paper profile has no comparison table, and only the items that concern it.
    assert [o.item for o in differences.left_open("pfedcspc", "paper")] == \
        [o.item for o in paper("pfedcspc").LEFT_OPEN if "paper" in o.profiles] + \
        [o.item for o in differences.line_opens("pfedcspc")]
    assert all("laptop" in o.profiles for o in differences.left_open("fedpft", "laptop"))
    assert differences.setup_rows("pfedcspc", "laptop")[-1] == ("seeds", "3 (claim rows) / 3 (other rows)",
                                                               "3 (claim rows) / 1 (other rows)")


def test_a_paper_page_has_no_empty_against_the_paper_section():
    from fedrepro.papers import differences
    from fedrepro.app.results_page import _against_paper

    for name in ("fedpft", "pfedcspc", "pep_fedpt", "fedotp"):
        section = _against_paper(name, "paper")
        assert bool(section) == bool(differences.left_open(name, "paper"))


def test_a_resumed_pass_says_its_time_is_not_a_whole_pass(stored):
    (stored / "output" / "laptop" / "notebooks" / "timings.json").write_text(
        json.dumps({**TIMINGS, "runs_trained": 2, "runs_planned": 5}))
    tour = write_pages("laptop", stored)["tour"].read_text()
    assert "2 runs trained of 5 planned (the other 3 were stored already and reused" in tour
    assert "| training time of its runs in this pass (s) |" in tour


def test_a_paper_page_lists_its_tables_with_the_claims_that_read_them_and_what_is_left_out(stored):
    fedotp = write_pages("laptop", stored)["fedotp"].read_text()
    coverage = fedotp.split("## Coverage of the paper's tables")[1].split("\n## ")[0]
    t1 = next(line for line in coverage.splitlines() if line.startswith("| T1 |"))
    assert "| T1 | yes |" in t1
    assert f"[{breakable_id('fedotp.beats_promptfl_pathological')}](#fedotpbeats_promptfl_pathological) (PASS)" in t1
    assert breakable_id("fedotp.beats_pfedprompt_pathological") in t1 and "(NOT RUN)" in t1
    ta2 = next(line for line in coverage.splitlines() if line.startswith("| TA2 |"))
    assert "| TA2 | no | — | zeroshot_clip: feature shift alone" in ta2 and "coop: feature shift" in ta2
    assert "## Coverage of the paper's tables" not in write_pages("laptop", stored)["tour"].read_text()


def test_a_page_from_older_code_says_so_with_the_commits_since(stored, monkeypatch):
    import fedrepro.app.results_page as rp

    monkeypatch.setattr(rp, "git_commit", lambda root: "abc1234")
    monkeypatch.setattr(rp, "commits_since", lambda root, commit: ["abc1234 change a method", "bcd2345 fix a loader"])
    index = write_pages("laptop", stored)["index"].read_text()
    assert index.startswith("# Results at the laptop profile\n\n## What holds\n")  # what holds comes first
    assert ("\n\n> **Older code.** These results come from commit `f00ba12`; since then 2 commits changed the "
            "package") in index
    assert ">   - `bcd2345 fix a loader`" in index
    monkeypatch.setattr(rp, "commits_since", lambda root, commit: None)
    assert "history does not hold" in write_pages("laptop", stored)["index"].read_text()
    monkeypatch.setattr(rp, "git_commit", lambda root: "f00ba12")  # the pass's own commit: no notice
    assert "Older code" not in write_pages("laptop", stored)["index"].read_text()


def test_a_claims_effect_is_said_once_in_its_words_with_its_interval_and_its_seeds(tmp_path, monkeypatch):
    """The effect in the claim's words (recorded with the claim: ClaimResult.effect) is said once, with
    its interval and the requirement, in the table and in the evidence, with the seeds the claim read
    and its maximum."""
    monkeypatch.setenv("FEDREPRO_OUTPUT", str(tmp_path))
    words = "pFedCSPC reaches the target 7.67 rounds before FedAvg (required: more than 0 rounds before FedAvg)"
    save_claims(pd.DataFrame([_row("pfedcspc.fewer_rounds", "PASS", "+7.67 rounds [+4.16, +11.2], required > +0 "
                                   "rounds", effect=words, seeds=[0, 1, 2, 3, 4], max_seeds=8)]),
                "pfedcspc_04_rounds_to_target", "laptop")
    page = write_pages("laptop", tmp_path)["pfedcspc"].read_text()
    once = ("pFedCSPC reaches the target 7.67 rounds before FedAvg [+4.16, +11.2]; required: more than 0 rounds "
            "before FedAvg")
    assert (f"| **PASS** | not estimated | {once} | 5: [0, 1, 2, 3, 4] (sequential: up to 8) | "
            "pfedcspc/04_rounds_to_target |" in page)
    assert f"- effect in the claim's words [90% interval]; required: {once}" in page
    assert page.count("7.67") == 2  # once in the table, once in the evidence list


def _second_pass(stored, notebooks, commit, claims):
    """A later pass on a fresh machine that rendered only ``notebooks``: the first pass's claims files
    are gone (only the pages and their kept records are, as in a checkout), its own are recorded."""
    for f in (stored / "output" / "laptop" / "claims").glob("*.json"):
        f.unlink()
    for name, rows in claims.items():
        save_claims(pd.DataFrame(rows), name, "laptop")
    report = {**TIMINGS, "commit": commit, "wall_s": 600.0, "runs_trained": 3, "runs_planned": 3,
              "notebooks": [{"notebook": nb, "render_s": 5.0, "runs_read": 3, "train_s_of_its_runs": 50.0}
                            for nb in notebooks]}
    (stored / "output" / "laptop" / "notebooks" / "timings.json").write_text(json.dumps(report))


def test_a_pass_of_some_notebooks_keeps_the_others_records_and_names_each_part(stored):
    write_pages("laptop", stored)
    kept = stored / "docs" / "results" / "laptop" / "claims"
    assert {f.name for f in kept.glob("*.json")} == {"00_tour.json", "fedotp_01_label_shift.json",
                                                     "fedotp_02_dirichlet.json", "backbones_01_vit_standin.json"}
    _second_pass(stored, ["fedotp/02_dirichlet.ipynb"], "bead123",
                 {"fedotp_02_dirichlet": [_row("fedotp.beats_promptfl_low_alpha", "PASS")]})
    pages = write_pages("laptop", stored)
    index, tour, fedotp = (pages[p].read_text() for p in ("index", "tour", "fedotp"))
    # The tour's FAIL and fedotp/01's verdicts come from the first pass's records, fedotp/02's from this one.
    assert "| [tour](tour.md) | 2 | 1 | 0 | 1 |" in index
    assert "**PASS**" in fedotp.split(breakable_id("fedotp.beats_promptfl_low_alpha"))[1].split("\n")[0]
    assert "**INCONCLUSIVE**" in fedotp.split(f"[{breakable_id('fedotp.gamma_inverted_u')}]")[1].split("\n")[0]
    assert "These pages combine 2 passes" in index
    assert "**Part at commit `f00ba12`**" in index and "**Part at commit `bead123`**" in index
    assert "**Part at commit `bead123`**: `fedotp/02_dirichlet`." in fedotp
    assert "combine" not in tour and "commit `f00ba12`" in tour  # the tour's page rests on one pass
    # Every notebook's times, from the pass that rendered it.
    assert "| `fedotp/01_label_shift.ipynb` | 15.0 | 63 | 94 |" in fedotp
    assert "| `fedotp/02_dirichlet.ipynb` | 5.0 | 3 | 50 |" in fedotp
    # A third pass that renders the tour again replaces its record, and only its record.
    _second_pass(stored, ["00_tour.ipynb"], "cafe456",
                 {"00_tour": [_row("tour.local_beats_fedavg_skewed", "PASS"),
                              _row("tour.fedavg_beats_local_iid", "PASS")]})
    pages = write_pages("laptop", stored)
    assert "| [tour](tour.md) | 2 | 2 | 0 | 0 |" in pages["index"].read_text()
    assert "These pages combine 3 passes" in pages["index"].read_text()
    low_alpha = breakable_id("fedotp.beats_promptfl_low_alpha")
    assert "**PASS**" in pages["fedotp"].read_text().split(low_alpha)[1].split("\n")[0]


def test_a_kept_record_of_a_notebook_that_no_longer_exists_is_dropped(stored):
    write_pages("laptop", stored)
    kept = stored / "docs" / "results" / "laptop" / "claims"
    gone = json.loads((kept / "00_tour.json").read_text())
    (kept / "fedotp_77_removed.json").write_text(json.dumps({**gone, "path": "fedotp/77_removed",
                                                             "notebook": "fedotp_77_removed"}))
    _second_pass(stored, ["fedotp/02_dirichlet.ipynb"], "bead123",
                 {"fedotp_02_dirichlet": [_row("fedotp.beats_promptfl_low_alpha", "PASS")]})
    write_pages("laptop", stored)
    assert not (kept / "fedotp_77_removed.json").exists() and (kept / "00_tour.json").exists()


def test_a_damaged_kept_record_is_a_one_line_error_naming_it(stored):
    write_pages("laptop", stored)
    (stored / "docs" / "results" / "laptop" / "claims" / "00_tour.json").write_text("{not json")
    with pytest.raises(CorruptCacheError, match="00_tour.json is not valid JSON"):
        write_pages("laptop", stored)


def test_two_passes_on_one_output_root_keep_each_notebooks_pass_and_a_newer_render_wins(stored):
    import os

    write_pages("laptop", stored)
    claims = stored / "output" / "laptop" / "claims"
    # A second pass on the same output root: the first pass's claims files are still there.
    save_claims(pd.DataFrame([_row("fedotp.beats_promptfl_low_alpha", "PASS")]), "fedotp_02_dirichlet", "laptop")
    report = {**TIMINGS, "commit": "bead123", "wall_s": 600.0, "runs_trained": 3, "runs_planned": 3,
              "notebooks": [{"notebook": "fedotp/02_dirichlet.ipynb", "render_s": 5.0, "runs_read": 3,
                             "train_s_of_its_runs": 50.0}]}
    (stored / "output" / "laptop" / "notebooks" / "timings.json").write_text(json.dumps(report))
    for f in claims.glob("*.json"):  # the first pass's files as it left them, before its pages
        if f.stem != "fedotp_02_dirichlet":
            os.utime(f, (1_000_000_000, 1_000_000_000))
    fedotp = write_pages("laptop", stored)["fedotp"].read_text()
    assert "| `fedotp/01_label_shift.ipynb` | 15.0 | 63 | 94 |" in fedotp  # its pass's times, kept
    assert "**Part at commit `f00ba12`**" in fedotp and "**Part at commit `bead123`**" in fedotp
    # fedotp/01 rendered again (in JupyterLab, say) after the pages: its newer record wins, without times.
    save_claims(pd.DataFrame([_row("fedotp.beats_promptfl_pathological", "FAIL")]), "fedotp_01_label_shift", "laptop")
    fedotp = write_pages("laptop", stored)["fedotp"].read_text()
    assert "**FAIL**" in fedotp.split(f"[{breakable_id('fedotp.beats_promptfl_pathological')}]")[1].split("\n")[0]
    assert "fedotp/01_label_shift.ipynb` | 15.0" not in fedotp


def test_a_claim_id_wraps_only_after_a_dot_or_an_underscore():
    """The pages and the notebooks' claims tables mark where an id may wrap, so a narrow column never
    breaks one mid-word; the marks add no character, so the id reads and copies whole."""
    import re

    html = breakable_id("pfedcspc.ablation_adds_up")
    assert html == "<code>pfedcspc.<wbr>ablation_<wbr>adds_<wbr>up</code>"
    assert re.sub(r"<[^>]+>", "", html) == "pfedcspc.ablation_adds_up"
    from fedrepro.claims.core import claims_table_style

    row = {"claim_id": "tour.fedavg_beats_local", "source": "s", "statement": "t", "verdict": "PASS",
           "interval": "[1, 2]", "evidence": "e"}
    assert "tour.<wbr>fedavg_<wbr>beats_<wbr>local" in claims_table_style(pd.DataFrame([row])).to_html()


def test_a_kept_claim_whose_runs_are_stored_gets_todays_cause_and_one_whose_runs_are_not_keeps_its_own(stored):
    import fedrepro
    from fedrepro.env.settings import output_path
    from fedrepro.papers.diagnose import FLAT_WINDOW
    from tests.support import tiny_config

    cfg = tiny_config(stored, **{"train.rounds": 2 * FLAT_WINDOW, "runs_dir": str(output_path("runs", "laptop",
                                                                                              stored))})
    fedrepro.run(cfg)
    write_pages("laptop", stored)
    path = stored / "docs" / "results" / "laptop" / "claims" / "fedotp_01_label_shift.json"
    record = json.loads(path.read_text())
    for row in record["claims"]:  # as an older rule left them
        row.update(cause="an older rule's cause", runs=[cfg.hash()] if row["verdict"] == "INCONCLUSIVE" else ["0" * 16])
    path.write_text(json.dumps(record))
    tour = stored / "docs" / "results" / "laptop" / "claims" / "00_tour.json"
    record = json.loads(tour.read_text())
    for row in record["claims"]:
        row.update(cause="an older rule's cause", runs=["0" * 16])
        row.pop("cause_rules", None)
    tour.write_text(json.dumps(record))
    _second_pass(stored, ["fedotp/02_dirichlet.ipynb"], "bead123",
                 {"fedotp_02_dirichlet": [_row("fedotp.beats_promptfl_low_alpha", "PASS")]})
    pages = write_pages("laptop", stored)
    rows = {r["claim_id"]: r for r in json.loads(path.read_text())["claims"]}
    # The INCONCLUSIVE claim's run is stored: today's rule reads it; the other's is not: its cause stays.
    assert rows["fedotp.gamma_inverted_u"]["cause"].split(":")[0] in ("budget", "seeds")
    assert rows["fedotp.beats_promptfl_pathological"]["cause"] == "an older rule's cause"
    # A cause kept from an earlier version of the rules says so, with the commit that read it.
    assert ("likely cause (read at `f00ba12` by an earlier version of these rules): an older rule's cause"
            in pages["tour"].read_text())
    gamma = pages["fedotp"].read_text().split("- reason: ")
    assert any(r.startswith("the interval straddles the bound; likely cause: ") for r in gamma[1:])


def test_an_untestable_claim_is_counted_apart_from_fail_with_its_numbers(tmp_path, monkeypatch):
    monkeypatch.setenv("FEDREPRO_OUTPUT", str(tmp_path))
    room = "required +3.00 pts against a room of +1.37 pts (ceiling 100.00 − R_f=0 98.63)"
    save_claims(pd.DataFrame([_row("fedpft.rf_sweep_rises", "UNTESTABLE", room=room),
                              _row("fedpft.rf_sweep_peaks_inside", "FAIL")]), "fedpft_14_hyperparameters", "laptop")
    pages = write_pages("laptop", tmp_path)
    n_pft = sum(1 for n in CLAIMS.names() if CLAIMS.get(n).paper == "fedpft")
    # PASS, INCONCLUSIVE, FAIL, UNTESTABLE, NOT RUN: the untestable claim is not a FAIL.
    assert f"| [fedpft](fedpft.md) | {n_pft} | 0 | 0 | 1 | 1 | {n_pft - 2} |" in pages["index"].read_text()
    page = pages["fedpft"].read_text()
    assert f"1 FAIL, 1 UNTESTABLE, {n_pft - 2} NOT RUN of {n_pft} claims" in page
    assert f"| {breakable_id('fedpft.rf_sweep_rises')} | UNTESTABLE | the stand-in leaves no room: {room} |" in page
    assert "**UNTESTABLE**: the claim requires a gain larger than the room" in page


def test_a_kept_cause_that_cleared_a_budget_on_flat_curves_is_not_repeated():
    from fedrepro.app.results_page import _reason
    from fedrepro.papers.diagnose import RULES_VERSION

    old = {"claim_id": "fedpft.beats_fedavg_every_alpha", "verdict": "FAIL", "evidence": "e", "commit": "abc1234",
           "cause": "not a budget artefact: the 6 runs it compares are flat; the effect is absent at this profile's "
                    "scale (data, model and rounds differ from the paper's)", "cause_rules": RULES_VERSION - 1}
    reason = _reason(pd.Series(old))
    assert "not a budget artefact" not in reason and "scale" not in reason
    assert reason.startswith("likely cause: budget not ruled out: no longer run measured (read at `abc1234`")
    # Another kept cause of an earlier version is shown as read then; one of today's rules as it is.
    assert _reason(pd.Series({**old, "cause": "seeds: x"})).startswith("likely cause (read at `abc1234` by an")
    measured = "not a budget artefact up to 100 rounds: y"
    assert _reason(pd.Series({**old, "cause": measured, "cause_rules": RULES_VERSION})) == f"likely cause: {measured}"


# --- issue 58: what holds first, a statement column, the effect said once in one direction, bounded
# intervals kept in their range, one page per paper and profile, each claim's figures, "reused".

def _first_paragraph_after_title(page: str) -> str:
    return page.split("\n\n")[2]  # "# title", the paper's title, then what holds


def test_each_page_opens_with_what_holds_generated_from_the_verdicts(stored):
    pages = write_pages("laptop", stored)
    tour = pages["tour"].read_text()
    fail, passed = "Local | FedAvg", CLAIMS.get("tour.fedavg_beats_local_iid").statement  # as recorded
    assert _first_paragraph_after_title(tour) == (
        f"**What holds.** Of the tour's 2 claims, 1 holds (PASS): “{passed}”. 1 does not (FAIL): “{fail}”.")
    fedotp = _first_paragraph_after_title(pages["fedotp"].read_text())
    n_otp = sum(1 for n in CLAIMS.names() if CLAIMS.get(n).paper == "fedotp")
    assert fedotp.startswith(f"**What holds.** Of FedOTP's {n_otp} claims, 1 holds (PASS): "
                             f"“{CLAIMS.get('fedotp.beats_promptfl_pathological').statement.rstrip('.')}”.")
    assert "1 is undecided (INCONCLUSIVE" in fedotp and f"{n_otp - 2} have not been checked" in fedotp
    assert "FAIL" not in fedotp  # no claim failed: nothing is said to fail
    index = pages["index"].read_text()
    holds = index.split("## What holds\n\n")[1].split("\n\n")
    assert holds[0].startswith("**[the tour](tour.md).** Of the tour's 2 claims, 1 holds (PASS)")
    assert holds[1].startswith("**[FedPFT](fedpft.md).** Of FedPFT's ")
    # Generated, not typed: the tour's FAIL turned PASS changes the sentence.
    save_claims(pd.DataFrame([_row("tour.local_beats_fedavg_skewed", "PASS"),
                              _row("tour.fedavg_beats_local_iid", "PASS")]), "00_tour", "laptop")
    tour = write_pages("laptop", stored)["tour"].read_text()
    assert _first_paragraph_after_title(tour).startswith("**What holds.** Of the tour's 2 claims, 2 hold (PASS): ")


def test_what_holds_quotes_the_main_tables_claims_first_then_the_clearest():
    from fedrepro.app.results_page import SHOWN, what_holds

    rows = [{"claim_id": f"tour.c{i}", "statement": f"claim {i}", "verdict": "PASS",
             "interval": f"+{i}.00 pts [+{i - 0.5:.2f}, +{i + 0.5:.2f}], required > +0.00 pts"} for i in range(1, 6)]
    said = what_holds("tour", rows)
    # The tour has no coverage of main tables: the widest clearance (in interval widths) first.
    assert said == ("Of the tour's 5 claims, 5 hold (PASS), among them (by margin): “claim 5”; “claim 4”; "
                    f"“claim 3” (and {5 - SHOWN} more).")
    main = next(c for row in __import__("fedrepro.papers.coverage", fromlist=["x"]).coverage_rows("fedotp")
                if row["main"] for c in row["claims"])
    rows[0]["claim_id"] = main
    assert "(main tables first, then by margin): “claim 1”; “claim 5”" in what_holds("fedotp", rows)


def test_an_effect_is_said_once_and_its_interval_reads_the_way_its_words_do():
    """pep_fedpt.dp_costs_little read "raises PEP-FedPT by 1.37 pts; interval: -1.37 [-3.65, +0.92]": the
    words gave the size in the direction of the sign, the interval the signed cost. Every test of every
    sign: the number the words say lies in the interval beside them, and the requirement is said once."""
    import itertools
    import re

    from fedrepro.claims.core import below, effect_once, exceeds, near_zero

    reads = ("DP noise costs PEP-FedPT {}", "DP noise raises PEP-FedPT by {}")
    values = [(-0.027, 0.0, -0.014), (0.02, 0.03, 0.01), (-0.05, 0.04, 0.01), (0.001, -0.002, 0.0)]
    for make, v, how in itertools.product((exceeds, below, near_zero), values, ({"reads": reads}, {}, {"unit": "%"})):
        name = "PEP-FedPT − with DP noise" if how != {"unit": "%"} else "a level"
        test = make(name, v, (0, 1, 2), 0.03, **how)
        once = effect_once(test.words, test.interval_text)
        said = float(re.search(r"(-?\d+\.\d+)", once.split(" [")[0].split(": ")[-1]).group(1))
        low, high = (float(x) for x in re.search(r"\[([^,]+), ([^\]]+)\]", once).groups())
        assert low <= said <= high, once
        assert once.count("required") == 1 and "interval:" not in once, once
    dp = below("PEP-FedPT − with DP noise", (-0.027, 0.0, -0.014), (0, 1, 2), 0.03, reads=reads)
    assert effect_once(dp.words, dp.interval_text) == (
        "DP noise raises PEP-FedPT by 1.37 pts [-0.91, +3.64]; required: DP noise costs PEP-FedPT less than 3.00 pts")


def test_every_committed_claim_record_says_its_effect_once_with_its_sign_kept():
    """The committed laptop records, as the pages show them: the mean said in words lies in the
    interval beside it (no sign flips between sentence and interval)."""
    import re
    from pathlib import Path

    from fedrepro.claims.core import effect_once, read_mean

    records = sorted((Path(__file__).parents[1] / "docs" / "results" / "laptop" / "claims").glob("*.json"))
    seen = 0
    for path in records:
        for c in json.loads(path.read_text())["claims"]:
            if not c.get("effect") or read_mean(c.get("interval") or "") is None:
                continue
            once = effect_once(c["effect"], c["interval"])
            said_part = once.split(" [")[0]
            size = abs(read_mean(c["interval"])[0])
            low, high = (float(x) for x in re.search(r"\[([^,\]]+), ([^\]]+)\]; required", once).groups())
            said = -size if f"-{size:.2f}" in said_part or f"-{size:.3g}" in said_part else size
            assert low - 1e-9 <= said <= high + 1e-9, (c["claim_id"], once)
            seen += 1
    assert seen > 50


def test_a_share_interval_stays_in_its_range_on_the_page_and_says_it_was_cut(tmp_path, monkeypatch):
    """The registered Fig. 8 claim, checked on per-seed shares 100%, 100%, 90% (the laptop pass's):
    its page interval stays within [0, 100]% and says it was cut."""
    from fedrepro.claims.core import read_interval
    from fedrepro.papers.verdicts import evaluate_claims

    monkeypatch.setenv("FEDREPRO_OUTPUT", str(tmp_path))
    hits = {0: [1] * 10, 1: [1] * 10, 2: [1] * 9 + [0]}
    table = pd.DataFrame([{"seed": s, "block": 11, "true_class": k, "peak_class_similarity": k if h else (k + 1) % 10}
                          for s, hit in hits.items() for k, h in enumerate(hit)])
    claims = evaluate_claims(table, ids=["pep_fedpt.soft_weights_peak_on_true_class"])
    save_claims(claims, "pep_fedpt_07_inside_ccmp", "laptop")
    pages = write_pages("laptop", tmp_path)
    for page in (pages["pep_fedpt"].read_text(), pages["index"].read_text()):
        row = next(ln for ln in page.splitlines() if ln.startswith("| [") and "soft_<wbr>weights" in ln)
        assert "96.67% [+86.93, +100.00]; required: more than 80.00% (interval cut to the quantity's range " \
               "[+0.00, +100.00])" in row
    low, high, *_ = read_interval(claims["interval"].iloc[0])
    assert 0.0 <= low <= high <= 100.0
    assert "cut to its range" in pages["pep_fedpt"].read_text()  # the page says how


def test_each_claim_links_the_figures_its_notebook_wrote(stored):
    import os
    from pathlib import Path

    report = json.loads((stored / "output" / "laptop" / "notebooks" / "timings.json").read_text())
    report["notebooks"][1]["figures"] = ["figures/fedotp_partition.png", "figures/fedotp_label_shift.png"]
    (stored / "output" / "laptop" / "notebooks" / "timings.json").write_text(json.dumps(report))
    pages = write_pages("laptop", stored)
    fedotp = pages["fedotp"].read_text()
    row = next(ln for ln in fedotp.splitlines() if ln.startswith(f"| [{breakable_id('fedotp.gamma_inverted_u')}]"))
    link = "../../../figures/fedotp_label_shift.png"
    assert row.endswith(f"| fedotp/01_label_shift: [fedotp_partition](../../../figures/fedotp_partition.png), "
                        f"[fedotp_label_shift]({link}) |")
    assert Path(os.path.normpath(pages["fedotp"].parent / link)) == stored / "figures" / "fedotp_label_shift.png"
    assert "- figures of its notebook (fedotp/01_label_shift): [fedotp_partition]" in fedotp
    assert f"[fedotp_label_shift]({link})" in pages["index"].read_text()
    # A notebook whose pass named no figure links none.
    assert "| 00_tour |" in pages["tour"].read_text()


def test_a_pass_that_reused_every_run_says_reused_not_zero(stored):
    report = {**TIMINGS, "runs_trained": 0, "runs_planned": 5,
              "notebooks": [{**nb, "train_s_of_its_runs": 0} for nb in TIMINGS["notebooks"]]}
    (stored / "output" / "laptop" / "notebooks" / "timings.json").write_text(json.dumps(report))
    pages = write_pages("laptop", stored)
    index, fedotp = pages["index"].read_text(), pages["fedotp"].read_text()
    assert "| [tour](tour.md) | 2 | 1 | 0 | 1 | 0 | 0 | 1 | 7.0 | reused |" in index
    assert "| `fedotp/01_label_shift.ipynb` | 15.0 | 63 | reused |" in fedotp
    assert "| **all 2** | 22.0 | | reused |" in fedotp
    assert "\"reused\": every run" in fedotp
    # A notebook that reads no run has no training time to speak of.
    assert "| `backbones/01_vit_standin.ipynb` | 19.3 | 0 | — |" in index


def test_one_results_page_per_paper_and_profile():
    """docs/results/ holds the profiles' generated pages; no page of a paper beside them repeats their
    verdicts (docs/results/fedotp.md once quoted an older pass's counts)."""
    import re
    from pathlib import Path

    from fedrepro.claims.core import VERDICTS
    from fedrepro.papers import PAPERS

    results = Path(__file__).parents[1] / "docs" / "results"
    for paper in PAPERS:
        loose = results / f"{paper}.md"
        if loose.is_file():
            text = loose.read_text()
            counts = re.findall(rf"\d+ (?:{'|'.join(VERDICTS)})\b", text)
            assert not counts, f"{loose} quotes verdict counts {counts}; the generated page has them"
            rows = [ln for ln in text.splitlines() if ln.startswith("|") and " ± " in ln]
            assert not rows, f"{loose} has a results table of its own: {rows[0]}"


def test_the_sites_paper_page_opens_with_what_holds_and_says_each_effect_once():
    from fedrepro.app.book import pages

    row = pages.ClaimRow(paper="pep_fedpt", claim_id="pep_fedpt.dp_costs_little", source="Table 7",
                         statement="DP costs little", verdict="PASS",
                         interval="-1.37 pts [-3.65, +0.92], required < +3.00 pts", evidence="e",
                         notebook="pep_fedpt_06_privacy",
                         effect="DP noise raises PEP-FedPT by 1.37 pts (required: DP noise costs PEP-FedPT less "
                                "than 3.00 pts)")
    page = pages.paper_page("pep_fedpt", "PEP-FedPT", [row], [], "results/pep_fedpt",
                            {"notebooks/pep_fedpt/06_privacy"})
    assert "**What holds.** Of PEP-FedPT's 1 claim, 1 holds (PASS): “DP costs little”." in page
    assert page.index("**What holds.**") < page.index("## What the paper claims")
    assert ("| <code>pep_<wbr>fedpt.<wbr>dp_<wbr>costs_<wbr>little</code> | DP costs little | Table 7 | **PASS** | "
            "DP noise raises PEP-FedPT by 1.37 pts [-0.92, +3.65]; required: DP noise costs PEP-FedPT less than "
            "3.00 pts |") in page
    fallback = pages.results_page("pep_fedpt", "laptop", [row])
    assert "**What holds.**" in fallback and "| DP costs little | PASS |" in fallback


def _line(page: str, claim_id: str) -> str:
    """The claims table's row of ``claim_id`` on ``page``."""
    return next(ln for ln in page.splitlines() if ln.startswith(f"| [{breakable_id(claim_id)}]"))


def test_each_claim_says_how_likely_its_verdict_is_to_hold_on_a_rerun(tmp_path, monkeypatch):
    """Every checked claim carries the chance that a re-run at as many seeds returns its verdict (its
    strength and the number, fedrepro.claims.replication), on the paper's page and the index; a record
    that keeps no tests is read off the tests its evidence prints; each page explains it once."""
    from fedrepro.claims import exceeds
    from fedrepro.claims.replication import strength

    monkeypatch.setenv("FEDREPRO_OUTPUT", str(tmp_path))
    firm = exceeds("Local − FedAvg", [0.30, 0.31, 0.29], range(3), 0.05)       # far past its bound
    edge = exceeds("Local − FedAvg", [0.075, 0.045, 0.015], range(3), 0.0)     # its low end just short of 0
    assert (firm.verdict, edge.verdict) == ("PASS", "INCONCLUSIVE")
    assert strength(edge.rerun()[edge.verdict]) == "fragile"
    save_claims(pd.DataFrame([_row("tour.fedavg_beats_local_iid", "PASS", firm.interval_text, evidence=firm.text()),
                              _row("tour.local_beats_fedavg_skewed", "INCONCLUSIVE", edge.interval_text,
                                   evidence=f"Local 80.00 vs FedAvg 75.50; {edge.text()}; Local wins 3/3 seeds")]),
                "00_tour", "laptop")
    pages = write_pages("laptop", tmp_path)
    tour, index = pages["tour"].read_text(), pages["index"].read_text()
    assert "| claim | statement | source | verdict | holds on a re-run |" in tour
    assert "| **PASS** | firm, 0.99 |" in _line(tour, "tour.fedavg_beats_local_iid")
    cell = _line(tour, "tour.local_beats_fedavg_skewed").split(" | ")[4]
    said, number = cell.split(", ")
    assert said == "fragile" and float(number) == pytest.approx(edge.rerun()[edge.verdict], abs=0.02)
    assert f"- holds on a re-run: {cell}" in tour
    assert "| verdict | holds on a re-run |" in index and f"| **INCONCLUSIVE** | {cell} |" in index
    for page in (tour, index):
        assert page.count("**Holds on a re-run**") == 1 and "fragile below" in page
    fedotp = pages["fedotp"].read_text()   # a claim no notebook checked has no chance to give
    assert "| NOT RUN |  |" in _line(fedotp, "fedotp.gamma_inverted_u").replace("**NOT RUN**", "NOT RUN")


def test_a_record_that_keeps_its_tests_gives_the_chance_of_its_verdict():
    """The record's own tests, judged again, where it keeps them (the evidence need print none)."""
    from fedrepro.app.results_page import paper_page
    from fedrepro.claims import exceeds
    from fedrepro.claims.core import replication_record

    firm = exceeds("Local − FedAvg", [0.30, 0.31, 0.29], range(3), 0.05)
    rows = [{**_row("tour.fedavg_beats_local_iid", "PASS", firm.interval_text), "notebook": "00_tour",
             "seeds": [0, 1, 2], "max_seeds": 3, "replication": replication_record([firm], "PASS")},
            {**_row("tour.local_beats_fedavg_skewed", "PASS", firm.interval_text), "notebook": "00_tour",
             "seeds": [0, 1, 2], "max_seeds": 3, "replication": None}]
    page = paper_page("tour", "laptop", pd.DataFrame(rows), None, "unknown")
    assert "| **PASS** | firm, 0.99 |" in _line(page, "tour.fedavg_beats_local_iid")
    assert "| **PASS** | not estimated |" in _line(page, "tour.local_beats_fedavg_skewed")


def test_a_second_cpu_measurement_is_said_once_with_its_numbers(tmp_path, monkeypatch):
    """Issue 58: where results are shown, what another CPU did to the same runs, from the committed
    measurement (bench/second_cpu_*.json), never typed by hand; a damaged one is a one-line error."""
    import json

    import pytest

    from fedrepro.app import results_page
    from fedrepro.errors import FedreproError

    (tmp_path / "bench").mkdir()
    m = {"table": "pfedcspc:ablation_global", "archive": {"cpu": "Intel"}, "here": {"cpu": "AMD"},
         "runs": [{"identical": True, "max_abs_diff_pts": 0.0}, {"identical": False, "max_abs_diff_pts": 1.234}],
         "claims": {"pfedcspc.x": {"archive": {"verdict": "PASS"}, "here": {"verdict": "INCONCLUSIVE"},
                                   "archived_record_holds_on_rerun": [0.71, "record"]}}}
    (tmp_path / "bench" / "second_cpu_t.json").write_text(json.dumps(m))
    monkeypatch.setattr(results_page, "repo_root", lambda: tmp_path)
    line = results_page._second_cpu_lines()[0]
    assert "1 of 2 runs identical" in line and "1.23 points" in line and "on AMD" in line
    assert "`pfedcspc.x` PASS → INCONCLUSIVE (estimated to hold: 0.71)" in line
    (tmp_path / "bench" / "second_cpu_t.json").write_text("{")
    with pytest.raises(FedreproError):
        results_page._second_cpu_lines()


def test_a_paper_page_says_what_another_reading_did_to_its_verdicts():
    # Issue 54: the verdicts under the other reading of an ambiguous passage, from the committed
    # measurement (bench/pfedcspc_edge_reading.json), counted claim by claim.
    import json

    from fedrepro.app.results_page import _reading_lines
    from fedrepro.env.host import repo_root

    m = json.loads((repo_root() / "bench/pfedcspc_edge_reading.json").read_text())
    by_claim = [by for s in m["notebooks"].values() for by in s["claims"].values()]
    same = sum(len({v["verdict"] for v in by.values()}) == 1 for by in by_claim)
    text = " ".join(_reading_lines("pfedcspc"))
    assert f"{same} of {len(by_claim)} claims keep their verdict" in text
    assert "bench/pfedcspc_edge_reading.json" in text
    for by in by_claim:
        if len({v["verdict"] for v in by.values()}) > 1:
            assert all(v["verdict"] in text for v in by.values())
    assert _reading_lines("fedotp") == []  # no such measurement
