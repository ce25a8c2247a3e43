"""Stage the executed notebooks and the site's pages into a Sphinx source folder, build the HTML
with MyST-NB (which shows the notebooks' stored outputs, executing nothing), and check that no
page reaches the network."""
from __future__ import annotations

import re
import shutil
import sys
import tempfile
from pathlib import Path

import nbformat

from ...claims.core import claims_dir as default_claims_dir
from ...errors import ConfigError, FedreproError
from . import pages
from ..results_page import write_pages
from .provenance import machine, provenance, read_pass
from ...env.settings import output_root as root
from ...env.host import repo_root
from ...papers import PAPERS, paper as paper_module

# The MIME bundle of an ipywidgets view (tqdm.auto's bars): MyST-NB would load the widget manager
# from a CDN for it, and a progress bar says nothing on a static page.
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
TRY_IT_HEADING = "## Try it"

SPHINX_CONFIG = {
    "project": "fedrepro",
    # The footer's "Copyright ©" line names whom (CITATION.cff's authors).
    "copyright": "the fedrepro contributors",
    "extensions": ["myst_nb", "sphinx.ext.autodoc", "sphinx.ext.autosummary"],
    "html_theme": "furo",
    "html_title": "fedrepro",
    # Stored outputs only: the site shows what `make reproduce` ran, and building it trains nothing.
    "nb_execution_mode": "off",
    # Progress bars and warnings go to stderr; the page shows the results.
    "nb_output_stderr": "remove",
    "nb_merge_streams": True,
    # LaTeX outputs would pull in MathJax from a CDN; every output that has one also has plain text.
    "nb_mime_priority_overrides": [("html", "text/latex", None)],
    "myst_enable_extensions": ["colon_fence"],
    "autosummary_generate": True,
    "autodoc_default_options": {"members": True, "undoc-members": False},
    "autodoc_member_order": "bysource",
    "exclude_patterns": ["_build", "**.ipynb_checkpoints"],
    "suppress_warnings": ["myst.xref_missing", "myst.header", "mystnb.unknown_mime_type", "misc.highlighting_failure",
                          "toc.not_included", "autosummary", "ref.doc", "ref.python"],
    # The site's own stylesheet (SITE_CSS), served from the site itself.
    "html_static_path": ["_static"],
    "html_css_files": ["fedrepro.css"],
    "html_show_sourcelink": False,
    "html_copy_source": False,
    "html_last_updated_fmt": None,
}


# A wide output (a results table with many columns) scrolls inside its cell rather than pushing the
# whole page sideways. A claims table never needs to: it would hide its evidence or notebook column
# off to the right of a column a little over 700 px wide. The notebooks' claims tables (the class
# that fedrepro.claims.claims_table_style sets) become one card per claim: id, statement and verdict
# on the first line, source and interval on the second, the evidence across the whole card. The
# landing and results pages' markdown tables wrap long tokens (a config key, a path) instead,
# except in the third column, where those tables put the verdict. A claim id wraps only after a dot
# or an underscore (fedrepro.claims.core.breakable_id marks those points), since an id broken
# mid-word reads as two words; code keeps its words whole unless one alone is wider than the column.
# On a wide window the content column grows (furo's is 46em, about half of a 1400 px window). A
# figure scales down to the column, legend and all in view (saved 1,071-1,343 px wide, it would
# otherwise hide its right third in a scrolling box at 1400 px, issue 58), and opens at its saved
# size, where its text is checked to be at least 8 pt, on a click (link_figures wraps it in a link
# to its file); code wraps rather than running past the right edge. fedrepro.app.book.browser
# reports any claims table that is still cut, the column's width, code wider than its box, figures
# whose right edge is out of view, and figures drawn smaller than saved that link to no full size.
SITE_CSS = """div.cell_output { overflow-x: auto; min-width: 0; max-width: 100%; }
div.cell, div.cell_output > div, .main { min-width: 0; max-width: 100%; }
@media (min-width: 82em) { .content { width: auto; flex: 1 1 46em; min-width: 0; max-width: 64em; padding: 0 2em; } }
div.cell_output img, a.figure-link img { max-width: 100%; height: auto; }
a.figure-link { cursor: zoom-in; }
.announcement-content { white-space: normal; }
div.highlight pre, div.cell_output pre { white-space: pre-wrap; overflow-wrap: anywhere; }
div.cell_output table td { vertical-align: top; }
table.claims-table, table.claims-table tbody { display: block; width: 100%; }
table.claims-table thead { display: none; }
table.claims-table tr { display: grid; grid-template-columns: minmax(min-content, 2fr) minmax(0, 3fr) auto;
  gap: 0.25em 1em; padding: 0.6em 0.2em; border-bottom: 1px solid #ccc; }
table.claims-table td { display: block; overflow-wrap: anywhere; text-align: left; padding: 0.1em 0.3em; }
table.claims-table td::before { display: block; font-size: 0.75em; color: #666; }
table.claims-table td:nth-child(1) { grid-column: 1; grid-row: 1; font-family: monospace; overflow-wrap: break-word; }
table.claims-table td:nth-child(3) { grid-column: 2; grid-row: 1; }
table.claims-table td:nth-child(4) { grid-column: 3; grid-row: 1; font-weight: bold; }
table.claims-table td:nth-child(2) { grid-column: 1; grid-row: 2; font-size: 0.9em; }
table.claims-table td:nth-child(5) { grid-column: 2 / 4; grid-row: 2; }
table.claims-table td:nth-child(6) { grid-column: 1 / 4; grid-row: 3; font-size: 0.85em; }
table.claims-table td:nth-child(1)::before { content: "claim"; font-family: sans-serif; }
table.claims-table td:nth-child(2)::before { content: "source"; }
table.claims-table td:nth-child(3)::before { content: "statement"; }
table.claims-table td:nth-child(4)::before { content: "verdict"; font-weight: normal; }
table.claims-table td:nth-child(5)::before { content: "effect [90% interval], required"; }
table.claims-table td:nth-child(6)::before { content: "evidence"; }
article table.docutils td { overflow-wrap: anywhere; }
article table.docutils td:nth-child(3) { overflow-wrap: normal; }
article table.docutils code { white-space: normal; overflow-wrap: break-word; }
"""


# A site built from a smoke pass: its runs train for seconds on tiny data.
SMOKE_BANNER = ("Built from a <b>smoke</b> pass: its runs train for seconds on tiny data, so every number and "
                "verdict on these pages checks only that the code runs; none says whether a finding holds.")


def site_config(profile: str) -> dict:
    """Sphinx's configuration for a site of ``profile``: a smoke site says on every page that its
    verdicts mean nothing."""
    config = dict(SPHINX_CONFIG)
    if profile == "smoke":
        config["html_theme_options"] = {"announcement": SMOKE_BANNER}
    return config


def output_root() -> Path:
    """The folder that holds ``output/<profile>/``: the output root of :mod:`fedrepro.env.settings`."""
    return root()


def _stage_notebook(src: Path, dst: Path, rel: str, report: dict | None) -> None:
    nb = nbformat.read(src, as_version=4)
    note = provenance(nb.metadata, rel, report).note()
    first = nb.cells[0] if nb.cells else None
    if first is not None and first.cell_type == "markdown" and first.source.lstrip().startswith("# "):
        heading, _, rest = first.source.lstrip().partition("\n")
        first.source = f"{heading}\n\n{note}\n{rest}"
    else:
        nb.cells.insert(0, nbformat.v4.new_markdown_cell(note))
    for c in nb.cells:
        if c.cell_type == "code":
            c.outputs = [o for o in c.outputs if WIDGET_MIME not in o.get("data", {})]
    nb.metadata.pop("widgets", None)
    dst.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, dst)


def _generated_results_pages(profile: str, notebooks_dir: Path, claims_dir: Path, papers: list[str]) -> dict[str, str]:
    """The results pages ``fedrepro.app.results_page.write_pages`` makes from the recorded claims, written
    into a temporary folder so that building the site changes nothing in the repository; empty when
    the site's claims are not the ones it reads."""
    if claims_dir.resolve() != default_claims_dir(profile).resolve():
        return {}
    with tempfile.TemporaryDirectory() as tmp:
        timings = notebooks_dir / "timings.json"
        try:
            written = write_pages(profile, out=Path(tmp), timings=timings if timings.is_file() else None)
        except ConfigError:  # nothing recorded yet: the site's own page says so
            return {}
        return {p: Path(f).read_text() for p, f in written.items() if p in papers and Path(f).is_file()}


def _results_pages(profile: str, notebooks_dir: Path, claims_dir: Path, root: Path, papers: list[str],
                   rows: list) -> dict[str, str]:
    """Each paper's results page, as Markdown: the one ``fedrepro.app.results_page`` generates from the
    claims, else the committed ``docs/results/<profile>/<paper>.md``, else one made here from the claims."""
    found = _generated_results_pages(profile, notebooks_dir, claims_dir, papers)
    for base in dict.fromkeys([root, repo_root()]):
        for paper in papers:
            f = base / "docs" / "results" / profile / f"{paper}.md"
            if paper not in found and f.is_file():
                found[paper] = f.read_text()
    return {p: found[p] if p in found else pages.results_page(p, profile, rows) for p in papers}


def stage(profile: str, notebooks_dir: Path, claims_dir: Path, src: Path, root: Path, api: bool = True) -> list[str]:
    """Write the Sphinx source folder ``src``: the executed notebooks (each with its provenance note),
    the index, a page per paper with its results page, the API page (unless ``api`` is False).
    Returns the notebook pages."""
    executed = sorted(p for p in notebooks_dir.rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)
    if not executed:
        raise FedreproError(f"no executed notebooks under {notebooks_dir}; run `make reproduce PROFILE={profile}` "
                            "(or `make smoke`) first")
    report = read_pass(notebooks_dir)
    (src / "_static").mkdir(parents=True, exist_ok=True)
    (src / "_static" / "fedrepro.css").write_text(SITE_CSS)
    docs = []
    for nb in executed:
        rel = nb.relative_to(notebooks_dir).as_posix()
        _stage_notebook(nb, src / "notebooks" / rel, rel, report)
        docs.append(f"notebooks/{rel[:-len('.ipynb')]}")
    doc_set = set(docs)
    rows = pages.collect(claims_dir)
    by_folder: dict[str, list[str]] = {}
    for d in docs:
        parts = d.split("/")
        by_folder.setdefault(parts[1] if len(parts) > 2 else "", []).append(d)
    tour = [d for d in by_folder.get("", []) if d.endswith("_tour")]
    papers = [p for p in ("tour", *pages.PAPER_ORDER) if p in PAPERS and (tour if p == "tour" else p in by_folder)]
    results = _results_pages(profile, notebooks_dir, claims_dir, root, papers, rows)
    (src / "results").mkdir(parents=True, exist_ok=True)
    (src / "papers").mkdir(parents=True, exist_ok=True)
    for p in papers:
        (src / "results" / f"{p}.md").write_text(results[p])
        nbs = tour if p == "tour" else by_folder[p]
        title = getattr(paper_module(p), "TITLE", p)
        (src / "papers" / f"{p}.md").write_text(pages.paper_page(p, title, rows, nbs, f"results/{p}", doc_set))
    top = [d for d in by_folder.get("", []) if d not in tour]
    for folder in (f for f in by_folder if f and f not in papers):
        title, text = pages.SECTIONS.get(folder, (folder, ""))
        (src / "papers" / f"{folder}.md").write_text(pages.section_page(title, text, by_folder[folder]))
        top.append(f"papers/{folder}")
    (src / "index.md").write_text(pages.index_page(profile, rows, papers, top, report, machine(report), api))
    if api:
        (src / "api.md").write_text(pages.api_page())
    return docs


# A figure Sphinx copied into the site (``_images/``), with a link around it (group 1) or not.
FIGURE = re.compile(r'(<a\b[^>]*>\s*)?(<img\b[^>]*?\bsrc="((?:\.\./)*_images/[^"]+)"[^>]*>)')


def link_figures(html_dir: Path) -> int:
    """Wrap every figure of the built pages that is not in a link already in a link to its own file,
    so that a figure scaled down to the column opens at its saved size on a click; returns how many."""
    count = 0

    def wrap(m: re.Match) -> str:
        nonlocal count
        if m.group(1):
            return m.group(0)
        count += 1
        return (f'<a class="figure-link" href="{m.group(3)}" title="open the figure at its full size">'
                f'{m.group(2)}</a>')

    for page in sorted(html_dir.rglob("*.html")):
        text = page.read_text()
        linked = FIGURE.sub(wrap, text)
        if linked != text:
            page.write_text(linked)
    return count


# A script or stylesheet that loads from another host: the site must work from a USB stick.
REMOTE = re.compile(r"<(script|link|img|iframe)\b[^>]*\b(src|href)\s*=\s*[\"']((?:https?:)?//[^\"']+)", re.I)


def remote_resources(html_dir: Path) -> list[tuple[str, str]]:
    """``(page, url)`` of every script, stylesheet, image or frame that a built page loads from the network."""
    found = []
    for page in sorted(html_dir.rglob("*.html")):
        for m in REMOTE.finditer(page.read_text(errors="replace")):
            found.append((page.relative_to(html_dir).as_posix(), m.group(3)))
    return found


def build(profile: str = "laptop", root: Path | None = None, notebooks_dir: Path | None = None,
          claims_dir: Path | None = None, out: Path | None = None, api: bool = True, quiet: bool = True) -> Path:
    """Build the static site of ``profile``'s executed notebooks; returns the folder of ``index.html``.

    ``root`` holds ``output/<profile>/`` (default :func:`output_root`); the notebooks default to
    ``<root>/output/<profile>/notebooks``, the claims to ``<root>/output/<profile>/claims`` and the
    site to ``<root>/output/<profile>/book``. ``api=False`` leaves out the API reference (the
    slowest part: it imports every module). The site is built in a temporary folder and moved
    into place when complete, so a failed build leaves the last good site."""
    if not profile or not re.fullmatch(r"[A-Za-z0-9_-]+", profile):
        raise ConfigError(f"profile must be a name such as smoke, laptop or paper, not {profile!r}")
    root = Path(root) if root else output_root()
    notebooks_dir = Path(notebooks_dir) if notebooks_dir else root / "output" / profile / "notebooks"
    claims_dir = Path(claims_dir) if claims_dir else root / "output" / profile / "claims"
    out = Path(out) if out else root / "output" / profile / "book"
    if not notebooks_dir.is_dir():
        raise ConfigError(f"notebooks_dir {notebooks_dir} does not exist; run `make reproduce PROFILE={profile}` first")
    from sphinx.application import Sphinx

    out.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".book-", dir=out.parent))
    try:
        src, html = work / "src", work / "html"
        stage(profile, notebooks_dir, claims_dir, src, root, api)
        app = Sphinx(str(src), None, str(html), str(work / "doctrees"), "html", confoverrides=site_config(profile),
                     status=None if quiet else sys.stdout, warning=sys.stderr, freshenv=True)
        app.build()
        if app.statuscode:
            raise FedreproError(f"sphinx-build failed (status {app.statuscode}); see the messages above")
        link_figures(html)
        remote = remote_resources(html)
        if remote:
            listed = "\n".join(f"  {page}: {url}" for page, url in remote[:20])
            raise FedreproError(f"{len(remote)} resources of the site load from the network, so it would not work "
                                f"offline:\n{listed}")
        if out.exists():
            shutil.rmtree(out)
        html.rename(out)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return out
