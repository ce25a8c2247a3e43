"""The README and the docs pages stay true to the repository: the README's notebooks table lists
exactly the notebooks in notebooks/, grouped by paper, and every relative link (and its #anchor) in
README.md and docs/ points at something that exists."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
BEGIN, END = "<!-- notebooks:begin", "<!-- notebooks:end -->"
PENDING: set[str] = set()  # pages a link may name before they exist (none now)
# The README's group heading for each notebooks/ folder (None: notebooks at the top level).
GROUPS = {None: "Start here", "fedpft": "FedPFT", "pfedcspc": "pFedCSPC", "pep_fedpt": "PEP-FedPT",
          "fedotp": "FedOTP", "backbones": "The pretrained stand-ins"}


def notebook_rows() -> list[tuple[str, str]]:
    """``(group heading, notebook path)`` for every row of the README's notebooks table."""
    text = README.read_text(encoding="utf-8")
    block = text[text.index(BEGIN):text.index(END)]
    rows, group = [], None
    for line in block.splitlines():
        heading = re.fullmatch(r"\*\*(.+)\*\*", line.strip())
        if heading:
            group = heading.group(1)
        row = re.match(r"\| `(notebooks/[^`]+\.ipynb)` \| (.+) \|$", line)
        if row:
            assert row.group(2).strip(), f"{row.group(1)} has no description in the README"
            rows.append((group, row.group(1)))
    return rows


def test_the_notebooks_table_lists_every_notebook_once_under_its_paper():
    rows = notebook_rows()
    listed = [path for _, path in rows]
    on_disk = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "notebooks").rglob("*.ipynb")
                     if ".ipynb_checkpoints" not in p.parts)
    assert sorted(listed) == on_disk, (f"missing from the README: {sorted(set(on_disk) - set(listed))}; "
                                       f"listed but absent: {sorted(set(listed) - set(on_disk))}")
    assert len(listed) == len(set(listed)), "a notebook is listed twice"
    for group, path in rows:
        folder = Path(path).parent.name
        expected = GROUPS.get(None if folder == "notebooks" else folder)
        assert expected is not None, f"{path}: add its folder to GROUPS and a group to the README"
        assert group == expected, f"{path} is listed under {group!r}, not {expected!r}"


def _slug(heading: str) -> str:
    """GitHub's anchor for a Markdown heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"[`*_]{2,}|`", "", heading.strip()).lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for line in _prose(page.read_text(encoding="utf-8")).splitlines():
        m = re.match(r"#{1,6} (.+)", line)
        if m:
            slug = _slug(m.group(1))
            n = seen.get(slug, 0)
            seen[slug] = n + 1
            out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def _prose(text: str) -> str:
    """``text`` without fenced code blocks (their brackets and hashes are not Markdown)."""
    return re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)


def _pages() -> list[Path]:
    return [README, *sorted((ROOT / "docs").rglob("*.md"))]


def _links(page: Path) -> list[str]:
    text = re.sub(r"`[^`\n]*`", "", _prose(page.read_text(encoding="utf-8")))
    return [m.group(1) for m in re.finditer(r"\]\(([^)\s]+)\)", text)]


@pytest.mark.parametrize("page", _pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page):
    broken = []
    for link in _links(page):
        if re.match(r"[a-z]+:", link):  # http:, https:, mailto:
            continue
        target, _, anchor = link.partition("#")
        path = (page.parent / target).resolve() if target else page
        rel = str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)
        if not path.exists():
            if rel not in PENDING:
                broken.append(f"{link} (no {rel})")
            continue
        if anchor and path.suffix == ".md" and anchor not in _anchors(path):
            broken.append(f"{link} (no heading #{anchor} in {rel})")
    assert not broken, f"{page.relative_to(ROOT)}: broken links: {broken}"


def test_the_slug_rule_matches_githubs():
    assert _slug("Real datasets and weights on a GPU") == "real-datasets-and-weights-on-a-gpu"
    assert _slug("fedotp.beats_promptfl_pathological") == "fedotpbeats_promptfl_pathological"
    assert _slug("Speed: how `make reproduce` trains") == "speed-how-make-reproduce-trains"


def test_the_test_command_ci_runs_is_the_documented_one():
    ci = (ROOT / ".ci" / "run").read_text()
    assert "make test" in ci and "make test" in README.read_text(encoding="utf-8")


def test_license_and_citation_match_the_package():
    import tomllib

    import yaml

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    license_name = project["license"]["text"]
    assert (ROOT / "LICENSE").read_text().startswith(f"{license_name} License\n")
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert cff["version"] == project["version"] and cff["license"] == license_name
    assert cff["cff-version"] == "1.2.0" and cff["authors"]
