"""The teaching site (``make book``): built from smoke-profile executed notebooks and opened in
headless Chromium as a reader would, plus the pieces it is made of."""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from fedrepro.app.book import pages
from fedrepro.app.book.browser import CHROMEDRIVER, CHROMIUM, find
from fedrepro.app.book.provenance import provenance

ROOT = Path(__file__).resolve().parent.parent
# The tour: small at smoke, with figures, tables and a claims table.
# The tour and one paper notebook (short at smoke): the index, a paper's landing page and notebook
# pages with claims tables, built the way `make book` builds them.
EXECUTE = ["00_tour.ipynb", "fedpft/13_partial_participation.ipynb"]
TRY_IT = ["00_tour", "fedpft/03_main_tables", "pfedcspc/01_global_and_personalized", "pep_fedpt/01_label_heterogeneity",
          "fedotp/01_label_shift"]


def _missing_site_tools() -> str | None:
    """Why the site cannot be built and opened here, or None. Where $FEDREPRO_REQUIRE_BROWSER is set
    (CI sets it), a missing tool fails the test instead of skipping it."""
    reason = _why_missing()
    if reason and os.environ.get("FEDREPRO_REQUIRE_BROWSER"):
        pytest.fail(f"FEDREPRO_REQUIRE_BROWSER is set but {reason}")
    return reason


def _why_missing() -> str | None:
    missing = [m for m in ("sphinx", "myst_nb", "furo", "selenium", "papermill") if importlib.util.find_spec(m) is None]
    if missing:
        return f"the site's packages are not installed ({', '.join(missing)}; pip install -r requirements.txt)"
    if not find(CHROMIUM) or not find(CHROMEDRIVER):
        return "headless Chromium is missing (apt-get install chromium chromium-driver; make setup does it as root)"
    return None


# --- the parts, without a browser ------------------------------------------------------------------


def test_provenance_note_names_profile_commit_and_machine():
    report = {"profile": "laptop", "commit": "abc1234", "cores": 2, "cpu": "AMD EPYC", "allocator": "libtcmalloc",
              "notebooks": [{"notebook": "fedpft/03_main_tables.ipynb", "render_s": 42.0}]}
    meta = {"papermill": {"parameters": {"PROFILE": "laptop"}, "start_time": "2026-11-25T17:00:01.5"}}
    note = provenance(meta, "fedpft/03_main_tables.ipynb", report).note()
    for text in ("**laptop**", "`abc1234`", "2 cores of AMD EPYC", "rendered in 42 s", "2026-11-25 17:00"):
        assert text in note
    bare = provenance({}, "x.ipynb", None).note()
    assert "commit not recorded" in bare and "machine not recorded" in bare


def test_claim_records_map_to_notebook_pages():
    docs = {"notebooks/00_tour", "notebooks/fedpft/03_main_tables", "notebooks/pep_fedpt/01_label_heterogeneity"}
    assert pages.notebook_doc("00_tour", docs) == "notebooks/00_tour"
    assert pages.notebook_doc("fedpft_03_main_tables", docs) == "notebooks/fedpft/03_main_tables"
    assert pages.notebook_doc("pep_fedpt_01_label_heterogeneity", docs) == "notebooks/pep_fedpt/01_label_heterogeneity"
    assert pages.notebook_doc("fedotp_01_label_shift", docs) is None


@pytest.mark.parametrize("nb", TRY_IT)
def test_main_notebooks_end_with_try_it_and_are_output_free(nb):
    book = nbformat.read(ROOT / "notebooks" / f"{nb}.ipynb", as_version=4)
    last = book.cells[-1]
    assert last.cell_type == "markdown" and last.source.startswith("## Try it")
    assert all(not c.get("outputs") and c.get("execution_count") is None for c in book.cells if c.cell_type == "code")


def test_remote_resources_are_found(tmp_path):
    from fedrepro.app.book import remote_resources

    (tmp_path / "a.html").write_text('<script src="https://cdn.example/x.js"></script><img src="_images/a.png">'
                                     '<link rel="stylesheet" href="//fonts.example/f.css">')
    assert [u for _, u in remote_resources(tmp_path)] == ["https://cdn.example/x.js", "//fonts.example/f.css"]


def test_build_rejects_a_missing_notebooks_folder(tmp_path):
    from fedrepro.app.book import build
    from fedrepro.errors import ConfigError

    with pytest.raises(ConfigError, match="notebooks_dir"):
        build("smoke", root=tmp_path)
    with pytest.raises(ConfigError, match="profile"):
        build("../x", root=tmp_path)


# --- the site, built and opened ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def smoke_site(tmp_path_factory):
    """The site of the tour executed at smoke (papermill into a temporary folder), without the API
    reference (the API page has its own test)."""
    reason = _missing_site_tools()
    if reason:
        pytest.skip(reason)
    from fedrepro.app.book import build
    from fedrepro.claims.core import claims_dir

    tmp = tmp_path_factory.mktemp("site")
    executed = tmp / "output" / "smoke" / "notebooks"
    executed.mkdir(parents=True)
    env = {**os.environ, "FEDREPRO_PROFILE": "smoke", "PYTHONPATH": str(ROOT),
           "FEDREPRO_RUNS": os.environ.get("FEDREPRO_RUNS") or str(ROOT / "output" / "smoke" / "runs")}
    env.pop("MPLBACKEND", None)  # the kernel's inline backend puts the figures into the notebook
    for nb in EXECUTE:
        (executed / nb).parent.mkdir(parents=True, exist_ok=True)
        done = subprocess.run([sys.executable, "-m", "papermill", str(ROOT / "notebooks" / nb), str(executed / nb),
                               "-p", "PROFILE", "smoke", "--cwd", str((ROOT / "notebooks" / nb).parent),
                               "--no-progress-bar"],
                              env=env, capture_output=True, text=True)
        if done.returncode:
            pytest.fail(f"papermill failed on {nb}:\n" + "\n".join((done.stdout + done.stderr).splitlines()[-30:]))
    # The notebooks record their claims where fedrepro.claims puts them for this process's settings.
    site = build("smoke", root=tmp, claims_dir=claims_dir("smoke"), api=False)
    return site


def test_site_has_no_network_resources(smoke_site):
    from fedrepro.app.book import remote_resources

    assert remote_resources(smoke_site) == []
    assert (smoke_site / "notebooks" / "00_tour.html").is_file()
    assert (smoke_site / "papers" / "tour.html").is_file()


def test_site_in_chromium(smoke_site):
    """The index and a notebook page load in headless Chromium without console errors, every image
    loads, nothing comes from the network, and the claims table is there; screenshots are saved."""
    from fedrepro.app.book.browser import open_pages

    shots = ROOT / "output" / "smoke" / "screenshots"
    reports = open_pages([smoke_site / "index.html", smoke_site / "notebooks" / "00_tour.html",
                          smoke_site / "papers" / "tour.html", smoke_site / "papers" / "fedpft.html",
                          smoke_site / "notebooks" / "fedpft" / "13_partial_participation.html"], shots,
                         width=1400)
    for r in reports:
        assert r.console_errors == [], r.url
        assert r.broken_images == [], r.url
        assert r.remote == [], r.url
        assert r.has_claims_table(), r.url
        assert r.screenshot.is_file() and r.screenshot.stat().st_size > 10_000
        assert r.overflow_px <= 0, f"{r.url} runs {r.overflow_px} px past the window's width"
        assert r.cut_tables_px == [], f"{r.url}: claims tables cut by their box by {r.cut_tables_px} px"
        assert r.content_px >= 760, f"{r.url}: the text column is {r.content_px} px wide in a 1400 px window"
        assert r.clipped_code == 0, f"{r.url}: {r.clipped_code} code blocks run past their box"
        assert r.unlinked_images == [], f"{r.url}: figures shrunk with no link to their full size: {r.unlinked_images}"
        assert r.cut_images == [], f"{r.url}: figures whose right edge is out of view: {r.cut_images}"
        assert "smoke" in r.banner and "verdict" in r.banner, f"{r.url}: no smoke banner"
        assert r.broken_ids == [], f"{r.url}: claim ids wrapped mid-word: {r.broken_ids}"
    index, tour, *_, paper_nb = reports
    assert tour.images >= 3  # the partitions, the accuracy bars, the curves, the per-client spread
    page = (smoke_site / "notebooks" / "00_tour.html").read_text()
    assert "How this page was made" in page and "smoke" in page
    assert "Try it" in page
    assert 'class="claims-table"' in page and "fedrepro.css" in page  # one card per claim, nothing cut
    assert paper_nb.images >= 1 and "fedpft.partial_participation_con" in (
        smoke_site / "notebooks" / "fedpft" / "13_partial_participation.html").read_text()
    assert "table.claims-table" in (smoke_site / "_static" / "fedrepro.css").read_text()
    assert "Copyright" in page and "the fedrepro contributors" in page


def test_a_narrow_window_wraps_claim_ids_only_between_words(smoke_site):
    """In an 800 px window the claims cards and the results tables wrap claim ids after a dot or
    an underscore, never mid-word, and nothing runs past the window."""
    from fedrepro.app.book.browser import open_pages

    reports = open_pages([smoke_site / "papers" / "fedpft.html",
                          smoke_site / "notebooks" / "fedpft" / "13_partial_participation.html"],
                         ROOT / "output" / "smoke" / "screenshots_narrow", width=800)
    for r in reports:
        assert r.console_errors == [], r.url
        assert r.broken_ids == [], f"{r.url}: claim ids wrapped mid-word: {r.broken_ids}"
        assert r.cut_tables_px == [], f"{r.url}: claims tables cut by their box by {r.cut_tables_px} px"


@pytest.mark.parametrize("width", [1400, 800])
def test_figures_fit_the_column_and_open_at_full_size(smoke_site, width):
    """Every figure of a notebook page shows its right edge (its legend) in a 1400 px and an 800 px
    window, without scrolling sideways, and one drawn smaller than saved links to its own file, which
    the site holds (issue 58: figures 1,071-1,343 px wide hid their right third in an 805 px box)."""
    from fedrepro.app.book.browser import open_pages

    names = ["00_tour.html", "fedpft/13_partial_participation.html"]
    reports = open_pages([smoke_site / "notebooks" / n for n in names],
                         ROOT / "output" / "smoke" / f"screenshots_figures_{width}", width=width)
    for r in reports:
        assert r.images >= 1 and r.broken_images == [], r.url
        assert r.cut_images == [], f"{r.url} at {width} px: figures cut at the right: {r.cut_images}"
        assert r.overflow_px <= 0, f"{r.url} at {width} px runs {r.overflow_px} px past the window"
        assert r.unlinked_images == [], f"{r.url} at {width} px: shrunk figures with no full size: {r.unlinked_images}"
    # The tour's figures are saved wider than either window's column: they are scaled, not cut.
    assert reports[0].shrunk_images, "no tour figure was drawn smaller than saved; the check above tested nothing"
    page = (smoke_site / "notebooks" / "00_tour.html").read_text()
    from fedrepro.app.book.builder import FIGURE

    targets = [m.group(3) for m in FIGURE.finditer(page)]
    assert targets and all(m.group(1) and 'class="figure-link"' in m.group(1) for m in FIGURE.finditer(page))
    assert all((smoke_site / "notebooks" / t).resolve().is_file() for t in targets)


def test_link_figures_wraps_only_figures_without_a_link(tmp_path):
    from fedrepro.app.book.builder import link_figures

    page = tmp_path / "nb" / "a.html"
    page.parent.mkdir()
    page.write_text('<div class="cell_output"><img alt="x" src="../_images/a.png" /></div>'
                    '<a class="reference" href="../_images/b.png"><img src="../_images/b.png" /></a>'
                    '<img src="../_static/logo.png" />')
    assert link_figures(tmp_path) == 1
    text = page.read_text()
    assert '<a class="figure-link" href="../_images/a.png"' in text and text.count("<a ") == 2
    assert '<img src="../_static/logo.png" />' in text  # the theme's images are not figures
    assert link_figures(tmp_path) == 0  # idempotent


def test_only_a_smoke_site_carries_the_smoke_banner():
    from fedrepro.app.book.builder import SMOKE_BANNER, site_config

    assert site_config("smoke")["html_theme_options"]["announcement"] == SMOKE_BANNER
    assert "html_theme_options" not in site_config("laptop")


def test_api_reference_from_docstrings(tmp_path, monkeypatch):
    """The API page documents a module from its docstrings (one small module, to stay quick)."""
    reason = _missing_site_tools()
    if reason:
        pytest.skip(reason)
    from fedrepro.app.book import build

    executed = tmp_path / "output" / "smoke" / "notebooks"
    executed.mkdir(parents=True)
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# 00 · A tour\n\nText.")])
    nbformat.write(nb, executed / "00_tour.ipynb")
    monkeypatch.setattr(pages, "API_MODULES", ("fedrepro.app.book.provenance",))
    site = build("smoke", root=tmp_path, claims_dir=tmp_path / "no-claims", out=tmp_path / "book")
    api = (site / "api" / "fedrepro.app.book.provenance.html").read_text()
    assert "The Markdown of the note" in api  # Provenance.note's docstring
    assert "NOT RUN" in (site / "index.html").read_text()  # no claims recorded: every claim is NOT RUN


def test_index_says_when_its_pass_reused_stored_runs():
    report = {"commit": "abc1234", "wall_s": 600.0, "notebooks": [{}, {}], "runs_planned": 10, "runs_trained": 4}
    text = pages.index_page("laptop", [], [], [], report, "2 cores of AMD EPYC", api=False)
    assert "10.0 min of wall time (6 of its 10 runs were stored already and reused)." in text
    whole = pages.index_page("laptop", [], [], [], {**report, "runs_trained": 10}, "2 cores of AMD EPYC", api=False)
    assert "10.0 min of wall time." in whole and "reused" not in whole
