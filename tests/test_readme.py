"""The README and the docs pages stay true to the repository: every number in the README agrees with
its source and no number goes unchecked, the README stays short, the notebooks table of
docs/notebooks.md lists exactly the notebooks in notebooks/, grouped by paper, and every relative link
(and its #anchor) in README.md and docs/ points at something that exists."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
NOTEBOOKS_DOC = ROOT / "docs" / "notebooks.md"
BEGIN, END = "<!-- notebooks:begin", "<!-- notebooks:end -->"
PENDING: set[str] = set()  # pages a link may name before they exist (none now)
# The notebooks table's group heading for each notebooks/ folder (None: notebooks at the top level).
GROUPS = {None: "Start here", "fedpft": "FedPFT", "pfedcspc": "pFedCSPC", "pep_fedpt": "PEP-FedPT",
          "fedotp": "FedOTP", "backbones": "The pretrained stand-ins"}
MAX_WORDS = 1500  # issue 58: a README for people, not a lab notebook (`wc -w README.md`)


def notebook_rows() -> list[tuple[str, str]]:
    """``(group heading, notebook path)`` for every row of docs/notebooks.md's notebooks table."""
    text = NOTEBOOKS_DOC.read_text(encoding="utf-8")
    block = text[text.index(BEGIN):text.index(END)]
    rows, group = [], None
    for line in block.splitlines():
        heading = re.fullmatch(r"\*\*(.+)\*\*", line.strip())
        if heading:
            group = heading.group(1)
        row = re.match(r"\| `(notebooks/[^`]+\.ipynb)` \| (.+) \|$", line)
        if row:
            assert row.group(2).strip(), f"{row.group(1)} has no description in docs/notebooks.md"
            rows.append((group, row.group(1)))
    return rows


def _notebooks_on_disk() -> list[str]:
    return sorted(str(p.relative_to(ROOT)) for p in (ROOT / "notebooks").rglob("*.ipynb")
                  if ".ipynb_checkpoints" not in p.parts)


def test_the_notebooks_table_lists_every_notebook_once_under_its_paper():
    rows = notebook_rows()
    listed = [path for _, path in rows]
    on_disk = _notebooks_on_disk()
    assert sorted(listed) == on_disk, (f"missing from docs/notebooks.md: {sorted(set(on_disk) - set(listed))}; "
                                       f"listed but absent: {sorted(set(listed) - set(on_disk))}")
    assert len(listed) == len(set(listed)), "a notebook is listed twice"
    for group, path in rows:
        folder = Path(path).parent.name
        expected = GROUPS.get(None if folder == "notebooks" else folder)
        assert expected is not None, f"{path}: add its folder to GROUPS and a group to docs/notebooks.md"
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


def test_license_and_citation_match_the_package():
    import yaml

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    license_name = project["license"]["text"]
    assert (ROOT / "LICENSE").read_text().startswith(f"{license_name} License\n")
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert cff["version"] == project["version"] and cff["license"] == license_name
    assert cff["cff-version"] == "1.2.0" and cff["authors"]


# --- The README's numbers, each against its source ------------------------------------------------

NUMBER = r"[+\-−]?\d+(?:\.\d+)?"


def _readme_prose() -> str:
    """The README as a reader's text: no fenced code (tests/test_readme_method.py runs the method
    it holds), no inline code, no link targets, no HTML comments; everything else counts."""
    text = _prose(README.read_text(encoding="utf-8"))
    text = re.sub(r"<!--.*?-->", "", text, flags=re.S)
    text = re.sub(r"\]\([^)]*\)", "]", text)
    return re.sub(r"`[^`\n]*`", "", text)


def _section(text: str, heading: str) -> str:
    """The body of the Markdown section ``heading`` (up to the next heading of any level)."""
    start = text.index(f"\n{heading}\n") + len(heading) + 2
    m = re.search(r"^#{1,6} ", text[start:], flags=re.M)
    return text[start:start + m.start() if m else None]


def _num(s: str) -> float:
    return float(s.replace("−", "-").replace(",", ""))


def _tour_claims() -> dict[str, dict]:
    record = json.loads((ROOT / "docs/results/laptop/claims/00_tour.json").read_text(encoding="utf-8"))
    return {c["claim_id"]: c for c in record["claims"]}


def _interval(claim: dict) -> tuple[float, float, float]:
    """(effect, low, high) of a recorded claim's interval, e.g. '+16.47 pts [+10.50, +22.44], …'."""
    m = re.match(rf"({NUMBER}) pts \[({NUMBER}), ({NUMBER})\]", claim["interval"])
    return tuple(_num(g) for g in m.groups())


def _sources() -> list[tuple[str, str, list[float]]]:
    """``(what, pattern, values)``: ``pattern`` must match the README's prose once, its groups in
    order giving ``values``, each read here from its source."""
    from fedrepro.claims import INTERVAL
    from fedrepro.methods import METHODS

    level = float(re.search(r"(\d+)% two-sided", INTERVAL).group(1))
    python = float(re.search(r">=\s*(\d+\.\d+)", tomllib.loads(
        (ROOT / "pyproject.toml").read_text())["project"]["requires-python"]).group(1))
    claims = _tour_claims()
    skewed, iid = claims["tour.local_beats_fedavg_skewed"], claims["tour.fedavg_beats_local_iid"]
    assert skewed["verdict"] == iid["verdict"] == "PASS" and skewed["seeds"] == iid["seeds"]
    alpha = [_num(re.search(rf"α = ({NUMBER})", c["statement"]).group(1)) for c in (skewed, iid)]

    tests_md = _section((ROOT / "docs/tests.md").read_text(encoding="utf-8"), "## How long it takes")
    real = re.search(r"`real (\d+)m(\d+)\.\d+s`", tests_md)
    bold = re.search(r"\*\*(\d+) min (\d+) s\*\*", tests_md)
    assert real.groups() == bold.groups(), "docs/tests.md's CI log line and its minutes disagree"
    ci_cores = re.search(r"CI's (\d+)-core machine", tests_md).group(1)

    speed = (ROOT / "docs/speed.md").read_text(encoding="utf-8")
    floor_heading = re.search(r"^### The floor: .* on (\d+) cores$", speed, flags=re.M)
    floor = _section(speed, floor_heading.group(0))
    order = re.search(r"of\s+the\s+order\s+of\s+(\d+)\s+CPU-hours,\s+about\s+(\d+)\s+hours\s+of\s+both\s+cores", floor)

    opened = json.loads((ROOT / "bench/open_from_archive.json").read_text(encoding="utf-8"))
    main = opened["notebooks"]["pfedcspc/01_global_and_personalized.ipynb"]
    assert main["runs_trained"] == 0 and main["read_from_archive"]

    archive_mb = round(sum(f.stat().st_size for f in (ROOT / "results").rglob("*") if f.is_file()) / 1e6, 1)

    return [
        ("the reference archive's size", r"archive takes (NUM) MB of the repository", [archive_mb]),
        ("opening pFedCSPC's main notebook from the archive (bench/open_from_archive.json)",
         r"notebook took (\d+) s on a (\d+)-core machine", [float(max(main["wall_s"])), float(opened["cores"])]),
        ("notebooks on disk", r"\((\d+) notebooks in all", [len(_notebooks_on_disk())]),
        ("the claims' interval level", r"with a (\d+)% interval\.", [level]),
        ("the tour's skewed claim", r"\(Dirichlet α = (NUM)\)\s+clients that train alone beat FedAvg by (NUM) "
         r"points, (\d+)% interval \[(NUM), (NUM)\]", [alpha[0], _interval(skewed)[0], level, *_interval(skewed)[1:]]),
        ("the tour's IID claim", r"\(α = (NUM)\) FedAvg beats them by (NUM) points \[(NUM), (NUM)\]",
         [alpha[1], *_interval(iid)]),
        ("the tour's seeds", r"Both claims PASS on (\d+) seeds", [len(skewed["seeds"])]),
        ("requires-python", r"With Python (\d+\.\d+) and", [python]),
        ("registered methods", r"names the (\d+) registered methods", [len(list(METHODS.names()))]),
        ("make test on CI (docs/tests.md)", r"took \*\*(\d+) min (\d+) s\*\* on CI's (\d+)-core machine",
         [*map(float, bold.groups()), float(ci_cores)]),
        ("make reproduce (docs/speed.md, the floor)",
         r"of the order of \*\*(\d+) CPU-hours, about (\d+) hours on (\d+)\s+cores\*\*",
         [*map(float, order.groups()), float(floor_heading.group(1))]),
    ]


def test_every_number_in_the_readme_matches_its_source_and_none_is_unchecked():
    prose = _readme_prose()
    covered: set[int] = set()
    for what, pattern, values in _sources():
        matches = list(re.finditer(pattern.replace("NUM", NUMBER), prose))
        assert len(matches) == 1, f"{what}: the README should say it once ({pattern!r}), found {len(matches)}"
        m = matches[0]
        found = [_num(g) for g in m.groups()]
        assert found == pytest.approx(values), f"{what}: the README says {found}, its source {values}"
        covered.update(range(m.start(), m.end()))
    unchecked = [(n.group(0), prose[max(0, n.start() - 40):n.end() + 20].replace("\n", " "))
                 for n in re.finditer(rf"(?<![\w.]){NUMBER}", prose) if n.start() not in covered]
    assert not unchecked, ("numbers in the README that no test checks against a source (add a source "
                           f"to _sources() or take the number out): {unchecked}")


def test_the_readme_is_short():
    words = len(README.read_text(encoding="utf-8").split())  # what `wc -w` counts
    assert words <= MAX_WORDS, f"README.md has {words} words; at most {MAX_WORDS}"


def test_the_readme_figure_is_the_tours_committed_figure():
    text = README.read_text(encoding="utf-8")
    images = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text)
    assert images == ["figures/tour_accuracy.png"], images
    assert (ROOT / images[0]).is_file()
    assert 'savefig(fig, \\"tour_accuracy\\"' in (ROOT / "notebooks/00_tour.ipynb").read_text(encoding="utf-8")


def test_the_test_command_ci_runs_is_the_documented_one():
    """.ci/run runs `time make test`; the README's long commands show `make test` as a command line."""
    ci = (ROOT / ".ci" / "run").read_text()
    assert re.search(r"^time make test$", ci, flags=re.M)
    section = _section(README.read_text(encoding="utf-8"), "## The two long commands")
    block = re.search(r"```bash\n(.*?)```", section, re.S).group(1)
    commands = [line.split("#")[0].strip() for line in block.splitlines()]
    assert "make test" in commands and "make reproduce" in commands


def test_the_profiles_and_the_notebook_default_are_the_configs():
    from fedrepro.config import DEFAULT_PROFILE, PROFILES

    prose = README.read_text(encoding="utf-8")
    named = re.search(r"runs at three profiles: (.*?)\n\n", prose, re.S).group(1)
    assert re.findall(r"`(\w+)` \(", named) == list(PROFILES)
    assert f"`{DEFAULT_PROFILE}` (the default" in named
    assert f"Notebooks\ndefault to the {DEFAULT_PROFILE} profile" in prose


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_lab_profile_smoke_opens_the_notebooks_at_the_smoke_profile():
    assert "make lab PROFILE=smoke" in README.read_text(encoding="utf-8")
    out = subprocess.run(["make", "-n", "lab", "PROFILE=smoke"], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout
    lab = [line for line in out.splitlines() if "jupyter lab" in line]
    assert lab and "FEDREPRO_PROFILE=smoke" in lab[-1] and lab[-1].rstrip().endswith("notebooks/")
