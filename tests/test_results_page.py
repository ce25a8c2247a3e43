"""The generated claims page: every registered claim, the verdicts as stored, the pass's numbers."""
from __future__ import annotations

import json

import pandas as pd

import fedrepro.claims  # noqa: F401  (registers every paper's claims)
from fedrepro.claims import save_claims
from fedrepro.claims.core import CLAIMS
from fedrepro.cli import main
from fedrepro.results_page import claims_page


def _one_checked(tmp_path, monkeypatch, **row):
    """The tour's skewed-split claim recorded by its notebook in ``tmp_path`` (the output root) with
    ``row``'s fields; ``tmp_path`` is also the checkout (whose README ``fedrepro results`` updates)."""
    monkeypatch.setenv("FEDREPRO_OUTPUT", str(tmp_path))
    monkeypatch.setattr("fedrepro.results_page.repo_root", lambda: tmp_path)
    save_claims(pd.DataFrame([{"claim_id": "tour.local_beats_fedavg_skewed", "paper": "tour", "source": "s", **row}]),
                "00_tour", "laptop")


def test_page_lists_every_claim_with_its_stored_verdict(tmp_path, monkeypatch):
    _one_checked(tmp_path, monkeypatch, statement="Local | FedAvg", verdict="FAIL", evidence="gap -1.00 pts",
                 interval="-1.00 pts [-2.00, -0.10], required > +0.00 pts")
    timings = tmp_path / "output" / "laptop" / "notebooks" / "timings.json"
    timings.parent.mkdir(parents=True)
    timings.write_text(json.dumps({"wall_s": 1800.0, "cpu_use": 0.97, "cores": 2, "runs_trained": 5,
                                   "runs_planned": 5, "peak_memory_mib": 1234, "notebooks": [{}, {}],
                                   "cpu": "Some CPU", "allocator": "system"}))
    data = json.loads(timings.read_text())
    timings.write_text(json.dumps({**data, "commit": "f00ba12"}))
    assert "at commit `f00ba12`" in claims_page("laptop", tmp_path)  # the pass's own commit
    timings.write_text(json.dumps(data))
    page = claims_page("laptop", tmp_path, commit="abc1234")
    assert "commit `abc1234`" in page and "30.0 min" in page and "Some CPU" in page
    assert "| 00_tour | `tour.local_beats_fedavg_skewed`: Local \\| FedAvg |" in page
    assert "**FAIL** | -1.00 pts [-2.00, -0.10], required > +0.00 pts | gap -1.00 pts |" in page
    assert "INCONCLUSIVE" in page and "Student's t" in page
    for name in CLAIMS.names():
        assert f"`{name}`" in page
    n = len(CLAIMS.names())
    assert "| paper | claims | PASS | INCONCLUSIVE | FAIL | NOT RUN |" in page
    assert f"| all | {n} | 0 | 0 | 1 | {n - 1} |" in page  # one checked (FAIL), the rest NOT RUN


def test_cli_writes_the_page(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("FEDREPRO_OUTPUT", str(tmp_path))
    out = tmp_path / "page.md"
    assert main(["results", "--profile", "laptop", "--out", str(out)]) == 0
    assert out.read_text().startswith("# Claims at the laptop profile")


def test_the_readme_block_is_replaced_in_place(tmp_path, monkeypatch):
    from fedrepro.results_page import BEGIN, END, update_readme

    _one_checked(tmp_path, monkeypatch, statement="x", verdict="INCONCLUSIVE", evidence="e",
                 interval="+1.00 pts [-2.00, +4.00], required > +5.00 pts")
    readme = tmp_path / "README.md"
    readme.write_text("intro\n")
    assert update_readme("laptop", tmp_path) is None  # no block: left alone
    readme.write_text(f"intro\n{BEGIN}\nold\n{END}\nafter\n")
    update_readme("laptop", tmp_path)
    text = readme.read_text()
    assert text.startswith("intro\n" + BEGIN) and text.endswith(END + "\nafter\n") and "old" not in text
    assert "| tour | 0 | 1 | 0 | 1 |" in text
    assert "| `tour.local_beats_fedavg_skewed` | INCONCLUSIVE | +1.00 pts [-2.00, +4.00], required > +5.00 pts |" in text
