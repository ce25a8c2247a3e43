"""``fedrepro results``: the results pages of a profile, generated from what ``make reproduce`` stored.

The pages (``docs/results/<profile>/index.md`` and one ``docs/results/<profile>/<paper>.md`` per
paper, under the output root of :mod:`fedrepro.env.settings`: the repository when ``make reproduce``
runs) are written from the claims the notebooks recorded (:func:`fedrepro.claims.save_claims`,
read back by :func:`fedrepro.papers.verdicts.collect_claims`) and the pass's report (``timings.json``, see
:func:`timings_path`), so they cannot drift from them. A paper's page lists each claim with its
verdict, effect and interval, its evidence, and for a claim that did not pass the cause the claim
records (``Claim.likely_cause``) or "no cause recorded", and how likely its verdict is to hold on a
re-run (:mod:`fedrepro.claims.replication`, explained once per page: :func:`_rerun_rule`); then its
notebooks' timings. Each page
opens with what holds and what does not (:func:`what_holds`, from the verdicts and the claims'
statements); each claim links the figures of the notebook that checked it (the figures that
notebook wrote in its pass, from the pass's trace). The index counts the verdicts per paper. Nothing
on a page is typed by hand.
"""
from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path
from typing import Iterable, Mapping

import pandas as pd

from ..config import check_profile
from ..errors import ConfigError
from ..env.host import commits_since, git_commit, repo_root
from ..env.jsonfiles import NUMBER, MayLack, read_json_file
from .reproduce import reused_runs
from .rehearsal import committed_cost, cost_lines, load_cost
from ..env.settings import output_path, output_root
from ..papers import PAPERS
from ..claims.core import (KEPT, REHEARSAL, UNTESTABLE, breakable_id, effect_once, kept_records, read_interval,
                           record_name, record_rerun, shown_verdicts)
from ..claims.replication import NOT_ESTIMATED, STRENGTHS, said
from ..papers import paper as paper_module
from ..claims import CLAIMS
from ..claims import INTERVAL
from ..papers import differences, paper as package
from ..papers.coverage import coverage_rows, has_coverage
from ..papers import paper_lines
from ..claims import claims_dir
from ..runs.store import atomic_write_bytes, atomic_write_json

NO_CAUSE = "no cause recorded"
# A cause of the rules before version 3 that cleared a budget on flat or settled curves alone.
# (Version 3 writes "not a budget artefact up to <n> rounds: ..." and only on a measured longer run.)
_UNMEASURED = re.compile(r"not a budget artefact: ")


def _cell(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def timings_path(profile: str, root: Path | None = None) -> Path:
    """The report ``fedrepro reproduce --profile <profile>`` leaves beside the executed notebooks
    (under the output root ``root``, default :func:`fedrepro.env.settings.output_root`)."""
    return output_path("notebooks", profile, root) / "timings.json"


def load_timings(profile: str, root: Path | None = None, timings: Path | None = None) -> dict | None:
    """The pass's report: ``timings`` if given, else the one the last pass left; None when there is none."""
    path = Path(timings) if timings is not None else timings_path(profile, root)
    if timings is not None and not path.is_file():
        raise ConfigError(f"timings={str(path)!r}: no such file; valid: a timings.json written by "
                                f"`fedrepro reproduce` (e.g. {timings_path(profile, root)})")
    if not path.is_file():
        return None
    fix = (f"run `fedrepro reproduce --profile {profile}` again to write it anew, or delete it (the pages then "
           "leave the times out)" if timings is None else "name a timings.json written by `fedrepro reproduce`")
    return read_json_file(path, "timings file", fix, TIMINGS_FIELDS, ("notebooks", TIMINGS_NOTEBOOK_FIELDS))


# What the pages read of a pass's report (reproduce's timings.json), and of each notebook in it.
TIMINGS_FIELDS = {"wall_s": NUMBER, "notebooks": list, "runs_trained": NUMBER, "runs_planned": NUMBER,
                  "cpu_use": NUMBER, "cores": NUMBER, "peak_memory_mib": NUMBER, "commit": MayLack(str),
                  "cpu": MayLack(str), "allocator": MayLack(str), "n_notebooks": MayLack(int)}
TIMINGS_NOTEBOOK_FIELDS = {"notebook": str, "render_s": NUMBER, "runs": MayLack(int), "runs_read": MayLack(int),
                           "train_s_of_its_runs": MayLack(NUMBER)}


def notebook_paper(notebook: str) -> str | None:
    """The paper a notebook of the report belongs to (``fedotp/01_label_shift.ipynb`` -> ``fedotp``,
    ``00_tour.ipynb`` -> ``tour``); None for the notebooks of no paper (backbones, the summary)."""
    first, _, rest = notebook.partition("/")
    if rest:
        return first if first in PAPERS else None
    return "tour" if first.removesuffix(".ipynb").endswith("_tour") else None


def _notebook_label(name: str | None) -> str:
    from ..papers.verdicts import notebook_path

    return notebook_path(name)


def _seeds(c) -> str:
    """The seeds a claim read, and the most a sequential claim may read (its ``max_seeds``); "" for a
    record without them (NOT RUN, or recorded before claims named their seeds)."""
    seeds = c.get("seeds")
    seeds = [] if not isinstance(seeds, (list, tuple)) else list(seeds)
    if not seeds:
        return ""
    top = c.get("max_seeds")
    more = f" (sequential: up to {int(top)})" if isinstance(top, (int, float)) and top == top and top > 3 else ""
    return f"{len(seeds)}: {seeds}{more}"


# Test.text's note on an interval that Test.limits cut to the quantity's range.
_CUT = re.compile(r"interval cut to the quantity's range \[([+-]\d+(?:\.\d+)?), ([+-]\d+(?:\.\d+)?)\]")


def _effect(c) -> str:
    """The claim's effect said once (:func:`fedrepro.claims.core.effect_once`): its mean in the claim's
    words, the interval turned to the direction those words read, and the requirement; the interval
    alone for a record without words (NOT RUN, or an older pass). An interval that ``Test.limits`` cut
    to its quantity's range (a share: 0 to 100%) says so."""
    words = c.get("effect")
    interval = c.get("interval") or ""
    said = effect_once(words if isinstance(words, str) else "", interval)
    cut = _CUT.search(c.get("evidence") or "")
    read = read_interval(interval)
    if cut and read and (read[0] == float(cut.group(1)) or read[1] == float(cut.group(2))):
        said += f" (interval cut to the quantity's range [{cut.group(1)}, {cut.group(2)}])"
    return said


def _short(paper: str) -> str:
    """The paper's name in a sentence: "FedPFT" (its title up to the authors or the colon), "the tour"."""
    return "the tour" if paper == "tour" else re.split(r" \(|:", _title(paper))[0]


def _clearance(row: Mapping) -> float:
    """How far a decided interval lies past the claim's bound (PASS) or short of it (FAIL), in widths
    of the interval: what "most clearly" orders by; inf for an exact quantity, NaN where unreadable."""
    read = read_interval(row.get("interval") or "")
    if read is None:
        return math.nan
    low, high, requires, bound, _ = read
    if requires == ">":
        past = low - bound if row["verdict"] == "PASS" else bound - high
    elif requires == "<":
        past = bound - high if row["verdict"] == "PASS" else low - bound
    else:
        past = (abs(bound) - max(abs(low), abs(high)) if row["verdict"] == "PASS"
                else min(abs(low), abs(high)) - abs(bound))
    width = high - low
    return past / width if width > 0 else math.inf


# Most statements a summary quotes for each side (the claims table lists them all).
SHOWN = 3
# Each verdict in the summary: how it is said of one claim and of several, and whether the summary
# quotes their statements.
_SAID = {"PASS": ("holds (PASS)", "hold (PASS)", True), "FAIL": ("does not (FAIL)", "do not (FAIL)", True),
         "INCONCLUSIVE": ("is undecided (INCONCLUSIVE: the seeds cannot tell)",
                          "are undecided (INCONCLUSIVE: the seeds cannot tell)", False),
         UNTESTABLE: ("cannot be tested here (UNTESTABLE: the stand-in leaves no room)",
                      "cannot be tested here (UNTESTABLE: the stand-in leaves no room)", False),
         "NOT RUN": ("has not been checked at this profile (NOT RUN)",
                     "have not been checked at this profile (NOT RUN)", False),
         REHEARSAL: ("was checked only on a rehearsal (REHEARSAL)", "were checked only on a rehearsal (REHEARSAL)",
                     False)}


def _on_main_tables(paper: str) -> set[str]:
    """The claims that read a table of the paper's main text (``fedrepro.papers.<paper>.coverage``)."""
    if not has_coverage(paper):
        return set()
    return {c for row in coverage_rows(paper) if row["main"] for c in row["claims"]}


def what_holds(paper: str, rows: Iterable[Mapping]) -> str:
    """One or two sentences of what holds and what does not, generated from the verdicts: how many
    claims of ``paper`` PASS and FAIL, each side quoting the statements of at most :data:`SHOWN`
    claims, those on the paper's main tables first (:func:`_on_main_tables`), then those whose
    intervals clear or miss their bounds by the most interval widths (:func:`_clearance`); then the
    undecided ones. ``rows``: the paper's claims (``claim_id``, ``statement``, ``verdict``, ``interval``)."""
    rows = list(rows)
    main = _on_main_tables(paper)

    def order(r: Mapping) -> tuple[bool, float]:
        past = _clearance(r)
        return r.get("claim_id") not in main, -past if past == past else math.inf
    holds, rest = [], []
    for verdict in shown_verdicts([r["verdict"] for r in rows]):
        mine = [r for r in rows if r["verdict"] == verdict]
        if not mine:
            continue
        one, several, quoted = _SAID.get(verdict, (verdict, verdict, False))
        part = f"{len(mine)} {one if len(mine) == 1 else several}"
        if quoted:
            mine.sort(key=order)
            shown = "; ".join(f"“{str(r['statement']).rstrip('.')}”" for r in mine[:SHOWN])
            more = len(mine) - SHOWN
            first = " (main tables first, then by margin)" if main else " (by margin)"
            part += f", among them{first}: {shown} (and {more} more)" if more > 0 else f": {shown}"
        (holds if quoted else rest).append(part)
    if not holds and not rest:
        return f"No claim of {_short(paper)} is recorded here."
    first = f"Of {_short(paper)}'s {_count(len(rows), 'claim')}, " + (". ".join(holds) or "; ".join(rest)) + "."
    second = "; ".join(rest) if holds else ""
    return first + (f" {second[0].upper()}{second[1:]}." if second else "")


def _verdict_counts(claims):
    counts = claims.groupby("paper")["verdict"].value_counts().unstack(fill_value=0)
    return counts.reindex(columns=list(shown_verdicts(claims["verdict"])), fill_value=0)


def _papers(claims) -> list[str]:
    present = set(claims["paper"])
    return [p for p in PAPERS if p in present] + sorted(present - set(PAPERS))


def _title(paper: str) -> str:
    return getattr(paper_module(paper), "TITLE", paper) if paper in PAPERS else paper


def _likely_cause(claim_id: str) -> str:
    return getattr(CLAIMS.get(claim_id), "likely_cause", "") if claim_id in CLAIMS.names() else ""


def _older_code(commit: str, shown: int = 10) -> list[str]:
    """A notice for a page whose pass ran older code than this checkout's: the commits since that
    change the package (what could change its results), or that git cannot tell."""
    head = git_commit(repo_root())
    if not head or commit in ("unknown", head) or head.startswith(commit.removesuffix("-dirty")):
        return []
    since = commits_since(repo_root(), commit)
    if since is None:
        return [f"> **Older code.** These results come from commit `{commit}`, which this checkout's history "
                f"does not hold; this checkout is at `{head}`. Run `make reproduce` to bring them up to date.", ""]
    if not since:
        return []
    # A commit's subject, cut at its first clause: the list says what changed, the log says how.
    listed = [f">   - `{_subject(line)}`" for line in since[:shown]] + ([f">   - and {len(since) - shown} more"]
                                                            if len(since) > shown else [])
    return [f"> **Older code.** These results come from commit `{commit}`; since then {_count(len(since), 'commit')} "
            f"changed the package (`fedrepro/`), which may change them:", *listed, ""]


def _subject(line: str, width: int = 100) -> str:
    """``"<hash> <subject>"`` of a one-line log entry, cut to ``width`` characters (an ellipsis says so)."""
    line = line.replace("`", "'")
    return line if len(line) <= width else line[:width - 1].rstrip() + "…"


def _pass_lines(profile: str, timings: dict | None, commit: str) -> list[str]:
    """The notice of older code, where the pages were generated from, and the pass's line: one part
    (``timings``, its report or None, and ``commit``) or, for pages that combine several passes, one
    block per part (``timings["parts"]``, from :func:`_combined`)."""
    if timings is None or "parts" not in timings:
        return _part_lines(profile, timings, commit)
    parts = timings["parts"]
    if not parts:  # a paper none of whose notebooks any pass rendered
        return _part_lines(profile, None, commit)
    if len(parts) == 1:
        return _part_lines(profile, parts[0]["report"], parts[0]["commit"])
    lines = [f"These pages combine {len(parts)} passes, each of some of the notebooks: a pass of some "
             "notebooks keeps the other notebooks' last records (kept beside the pages, in `claims/`). Each part "
             "names its notebooks, its commit and its pass.", ""]
    for part in parts:
        names = ", ".join(f"`{n}`" for n in part["notebooks"])
        lines += [f"**Part at commit `{part['commit']}`**: {names}.", "",
                  *_part_lines(profile, part["report"], part["commit"])]
    return lines


def _part_lines(profile: str, timings: dict | None, commit: str) -> list[str]:
    lines = [*_older_code(commit),
             f"Generated by `fedrepro results --profile {profile}` from the claims the notebooks recorded and "
             f"the report of `fedrepro reproduce --profile {profile}` (commit `{commit}`); nothing here is typed "
             f"by hand.", ""]
    if timings is None:
        return lines + ["No timings report was found for this profile, so the notebooks' times are not shown.", ""]
    minutes = timings["wall_s"] / 60
    reused = reused_runs(timings)
    return lines + [
        f"The pass: {_count(timings.get('n_notebooks', len(timings.get('notebooks', []))), 'notebook')}, "
        f"{timings['runs_trained']} runs trained of {timings['runs_planned']} planned"
        + (f" (the other {reused} were stored already and reused, so its time is not that of a pass from an "
           f"empty store; docs/speed.md gives the measured time of a whole pass)" if reused else "")
        + f", {minutes:.1f} min of wall time at {100 * timings['cpu_use']:.1f}% CPU "
        f"use of {timings['cores']} cores"
        + (f" ({timings['cpu']}, allocator {timings['allocator']})" if "cpu" in timings else "")
        + f"; peak memory {timings['peak_memory_mib']:,} MiB.", ""]


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def _verdict_rule() -> list[str]:
    return [f"Each claim measures an effect once per seed (paired by seed) and states a bound. The interval is "
            f"{INTERVAL}. **PASS**: the whole interval clears the bound; **FAIL**: the whole interval falls short "
            f"of it; **INCONCLUSIVE**: it straddles the bound, so the seeds cannot tell; **{UNTESTABLE}**: the "
            f"claim requires a gain larger than the room its control leaves at this profile (the "
            f"ceiling the claim declares minus the control's mean), so no result here could pass it; it is counted "
            f"apart from FAIL, with both numbers; **NOT RUN**: no notebook "
            f"has checked it at this profile. A claim that needs several effects shows the one that decides it. "
            f"The effect is said once: its mean in the claim's words, then the interval turned to the direction "
            f"those words read (\"raises by 1.37 [-0.92, +3.65]\" is a cost of -1.37 [-3.65, +0.92]), then what "
            f"the claim requires. The interval of a bounded quantity (a share, which lies between 0 and 100%) is "
            f"cut to its range (the claim's `limits`): the true mean lies in the range, so the cut interval "
            f"covers it as often as the whole one, and a bound inside the range gets the same verdict from "
            f"either; a cut interval says so.", ""]


# The claims tables' column of how firm each verdict is (fedrepro.claims.replication).
RERUN_COLUMN = "holds on a re-run"


# Measurements of the same runs on a second CPU (bench/second_cpu.py writes them).
SECOND_CPU = "bench/second_cpu_*.json"


def _second_cpu_lines() -> list[str]:
    """What the committed second-CPU measurements found (:data:`SECOND_CPU`), a sentence each: how
    many runs came out identical, the largest difference, and each claim's verdict on both CPUs beside
    the archived record's estimate of how firm it is."""
    lines = []
    for path in sorted(repo_root().glob(SECOND_CPU)):
        fix = "run bench/second_cpu.py again to rewrite it"
        m = read_json_file(path, "second-CPU measurement", fix, {"table": str, "runs": list, "claims": dict,
                                                                  "archive": dict, "here": dict})
        verdicts = []
        for cid, by in m["claims"].items():
            then, now = ((by.get(k) or {}).get("verdict") for k in ("archive", "here"))
            est = by.get("archived_record_holds_on_rerun")
            chance = est[0] if isinstance(est, list) and est and isinstance(est[0], (int, float)) else None
            verdicts.append(f"`{cid}` {then} → {now}" + (f" (estimated to hold: {chance:.2f})" if chance is not None
                                                          else ""))
        same = sum(bool(r.get("identical")) for r in m["runs"])
        largest = max((float(r.get("max_abs_diff_pts") or 0) for r in m["runs"]), default=0.0)
        lines.append(f"Measured: `{m['table']}` trained again on {m['here'].get('cpu')} (the archive's runs: "
                     f"{m['archive'].get('cpu')}): {same} of {len(m['runs'])} runs identical, the largest "
                     f"difference of a run's metric {largest:.2f} points; verdicts there → here: "
                     f"{'; '.join(verdicts)} (`{path.relative_to(repo_root())}`).")
    return [*lines, ""] if lines else []


# Claims measured under another reading of the paper (issue 54: "show the verdict under the other
# reading where it matters"): bench/<paper>_<what>_reading.json, one section per notebook, each claim's
# verdict under each reading (bench/pfedcspc_edge_reading.py writes pFedCSPC's).
READINGS = "bench/{paper}_*_reading.json"


def _reading_lines(paper: str) -> list[str]:
    """A sentence per committed other-reading measurement of ``paper`` (:data:`READINGS`): how many of
    its claims keep their verdict under both readings, and each one that changes."""
    lines = []
    for path in sorted(repo_root().glob(READINGS.format(paper=paper))):
        m = read_json_file(path, "other-reading measurement", f"run {path.with_suffix('.py').name} again",
                           {"notebooks": dict})
        same, changed, readings = 0, [], []
        for nb, section in sorted(m["notebooks"].items()):
            for cid, by in sorted((section.get("claims") or {}).items()):
                verdicts = [(r, (v or {}).get("verdict")) for r, v in by.items()]
                readings = readings or [r for r, _ in verdicts]
                if len({v for _, v in verdicts}) == 1:
                    same += 1
                else:
                    changed.append(f"`{cid}` " + " → ".join(f"{v} ({r})" for r, v in verdicts))
        if not same and not changed:
            continue
        notebooks = ", ".join(sorted(m["notebooks"]))
        what = f" of {m['what']}" if isinstance(m.get("what"), str) else ""
        lines.append(f"Measured under another reading{what} (notebooks {notebooks}; readings: {'; '.join(readings)}): "
                     f"{same} of {same + len(changed)} claims keep their verdict"
                     + (f"; changed: {'; '.join(changed)}" if changed else "")
                     + f" (`{path.relative_to(repo_root())}`).")
    return [*lines, ""] if lines else []


def _rerun_rule() -> list[str]:
    """What the :data:`RERUN_COLUMN` says, once per page; the strengths' thresholds read off
    :data:`fedrepro.claims.replication.STRENGTHS`."""
    bands = ", ".join(f"{name} ≥ {floor:g}" for floor, name in STRENGTHS if floor > 0)
    last = STRENGTHS[-1][1]
    return [f"**{RERUN_COLUMN[0].upper()}{RERUN_COLUMN[1:]}**: the chance that an independent re-run at as many "
            f"seeds returns the same verdict, from the claim's per-seed effects: the re-run's mean effect is drawn "
            f"about ours with the spread of a fresh draw of seeds (a run on another CPU differs from ours about as "
            f"much as a run of another seed), and judged by the same interval ({bands}, {last} below; "
            f"`fedrepro.claims.replication`, docs/claims.md). A record from before the estimate is read off the "
            f"tests its evidence prints, and where those do not give its verdict back the page says "
            f"\"{NOT_ESTIMATED}\".", ""]


def _rerun(c) -> str:
    """How likely a claim's verdict is to hold on a re-run, as the pages print it ("firm, 0.97"); ""
    for NOT RUN, :data:`NOT_ESTIMATED` where the record gives no estimate (:func:`record_rerun`)."""
    if c.get("verdict") == "NOT RUN":
        return ""
    row = {k: (None if not isinstance(v, (dict, list)) and pd.isna(v) else v) for k, v in dict(c).items()}
    return said(record_rerun(row)[0])


def _commit(timings: dict | None, commit: str | None) -> str:
    return commit or (timings or {}).get("commit") or git_commit(repo_root()) or "unknown"


def _reason(row) -> str:
    """Why a claim did not pass: the cause the claim records, else the one read off the stored runs
    (``row["cause"]``, :mod:`fedrepro.papers.diagnose`), else :data:`NO_CAUSE`; for INCONCLUSIVE also
    what the verdict itself means; for NOT RUN what kept it from being checked."""
    verdict = row["verdict"]
    if verdict == "PASS":
        return ""
    if verdict in ("NOT RUN", REHEARSAL):
        return row["evidence"]
    from ..papers.diagnose import RULES_VERSION  # defers torch (the store), as write_pages does

    own = _likely_cause(row["claim_id"])
    if verdict == UNTESTABLE:  # the numbers that make it so come first, whatever else is recorded
        room = row.get("room") if isinstance(row.get("room"), str) and row.get("room") else row["evidence"]
        return f"the stand-in leaves no room: {room}" + (f"; likely cause: {own}" if own else "")
    cause = own or (row.get("cause") if isinstance(row.get("cause"), str) else "")
    at = row.get("commit") if isinstance(row.get("commit"), str) and row.get("commit") else "an older commit"
    if cause and not own and row.get("cause_rules") != RULES_VERSION and _UNMEASURED.match(cause):
        # Rules before version 3 cleared a budget on flat curves alone, which cannot clear it: that
        # reading is not repeated as a cause (issue 54).
        cause = (f"likely cause: budget not ruled out: no longer run measured (read at `{at}` by an earlier "
                 "version of these rules, which took flat curves for absence)")
    elif cause and not own and row.get("cause_rules") != RULES_VERSION:
        # Read off runs this store lacks, by the rules of the pass that recorded it.
        cause = f"likely cause (read at `{at}` by an earlier version of these rules): {cause}"
    elif cause:
        cause = f"likely cause: {cause}"
    cause = cause or NO_CAUSE
    return f"the interval straddles the bound; {cause}" if verdict == "INCONCLUSIVE" else cause


def _timing_rows(timings: dict | None, keep) -> list[dict]:
    return [nb for nb in (timings or {}).get("notebooks", []) if keep(nb["notebook"])]


def _trained_here(timings: dict | None) -> str:
    """The training-time column's name: a pass that reused stored runs timed only those it trained."""
    parts = (timings or {}).get("parts") or [{"report": timings}]
    return " in this pass" if any(reused_runs(p["report"]) for p in parts) else ""


REUSED = "reused"


def _trained(rows: list[dict], timings: dict | None) -> str:
    """The training time of the runs ``rows`` (notebooks) read, trained in this pass: :data:`REUSED`
    where a pass that reused stored runs trained none of them (their time is not this pass's, and 0
    would read as free), "—" where they read no run."""
    seconds = sum(nb.get("train_s_of_its_runs", 0) for nb in rows)
    if seconds == 0 and _trained_here(timings):
        reads = sum(nb.get("runs_read", nb.get("runs", 0)) or 0 for nb in rows)
        return REUSED if reads else "—"
    return f"{seconds:,.0f}"


def _timings_table(rows: list[dict], timings: dict | None = None) -> list[str]:
    lines = [f"| notebook | render (s) | runs it reads | training time of its runs{_trained_here(timings)} (s) |",
             "|---|---|---|---|"]
    for nb in rows:
        lines.append(f"| `{nb['notebook']}` | {nb['render_s']:.1f} | {nb.get('runs_read', nb.get('runs', 0))} | "
                     f"{_trained([nb], timings)} |")
    lines.append(f"| **all {len(rows)}** | {sum(nb['render_s'] for nb in rows):.1f} | | {_trained(rows, timings)} |")
    if _trained_here(timings) and any(_trained([nb], timings) == REUSED for nb in rows):
        lines += ["", f"\"{REUSED}\": every run the notebook reads was stored before this pass, so this pass "
                  "trained none of them."]
    return lines


def _figure_links(timings: dict | None, pages_dir: Path, root: Path | None) -> dict[str, list[str]]:
    """The figures each notebook of the report wrote in its pass (``figures`` of its row: the pass's
    trace of its ``savefig`` calls, under the output root), by notebook (:func:`_key`), each as a
    Markdown link relative to ``pages_dir``; a notebook whose row names none is left out."""
    base = output_root(root)
    links = {}
    for nb in (timings or {}).get("notebooks", []):
        paths = [Path(f) for f in nb.get("figures") or [] if isinstance(f, str) and f]
        if paths:
            links[_key(nb["notebook"])] = [
                f"[{f.stem}]({Path(os.path.relpath(f if f.is_absolute() else base / f, pages_dir)).as_posix()})"
                for f in paths]
    return links


def _where(c, figures: Mapping[str, list[str]]) -> str:
    """The notebook that checked a claim and the figures it wrote (those show the claim)."""
    notebook = c.get("notebook")
    if not isinstance(notebook, str) or not notebook:
        return ""
    shown = figures.get(_key(notebook), [])
    return _notebook_label(notebook) + (f": {', '.join(shown)}" if shown else "")


# The claims tables' effect column (effect_once): the interval is the effect's in the direction its words read.
EFFECT_COLUMN = "effect in the claim's words [90% interval]; required"


def paper_page(paper: str, profile: str, claims, timings: dict | None, commit: str, cost: dict | None = None,
               figures: Mapping[str, list[str]] | None = None) -> str:
    """The Markdown page of one paper's claims at ``profile`` and its notebooks' timings, opening with
    what holds (:func:`what_holds`); at the paper profile, and wherever ``cost`` is given, each
    notebook's predicted cost at paper scale (``cost``: the last rehearsal's,
    :func:`fedrepro.app.rehearsal.load_cost`, or the committed one,
    :func:`fedrepro.app.rehearsal.committed_cost`). ``figures``: each notebook's figure links
    (:func:`_figure_links`), shown beside the claims it checked."""
    figures = figures or {}
    group = claims[claims["paper"] == paper].sort_values(["notebook", "claim_id"], na_position="last")
    counts = group["verdict"].value_counts()
    lines = [f"# {paper}: results at the {profile} profile", "", f"{_title(paper)}.", "",
             f"**What holds.** {what_holds(paper, group.to_dict('records'))}", "",
             *_pass_lines(profile, timings, commit),
             *_verdict_rule(), *_rerun_rule(), *_second_cpu_lines(), *_reading_lines(paper),
             "Verdicts: " + ", ".join(f"{int(counts.get(v, 0))} {v}" for v in shown_verdicts(group["verdict"]))
             + f" of {len(group)} claims.",
             "", "## Claims", "",
             f"| claim | statement | source | verdict | {RERUN_COLUMN} | {EFFECT_COLUMN} | seeds "
             "| notebook: its figures |",
             "|---|---|---|---|---|---|---|---|"]
    for _, c in group.iterrows():
        verdict = f"**{c['verdict']}**" if c["verdict"] != "NOT RUN" else "NOT RUN"
        lines.append(f"| {_linked(c['claim_id'])} | {_cell(c['statement'])} | {_cell(c['source'])} | {verdict} | "
                     f"{_rerun(c)} | {_cell(_effect(c))} | {_cell(_seeds(c))} | {_cell(_where(c, figures))} |")
    not_passed = group[group["verdict"] != "PASS"]
    lines += ["", "## Why a claim did not pass", ""]
    if not_passed.empty:
        lines.append("Every claim passed.")
    else:
        from ..papers.diagnose import RULES_IN_BRIEF

        lines += ["The cause is the claim's own where it records one from our analysis; otherwise it is read off "
                  f"the stored runs (`fedrepro.papers.diagnose`): {RULES_IN_BRIEF}. Where neither exists the "
                  f"page says \"{NO_CAUSE}\".", "", "| claim | verdict | reason |", "|---|---|---|"]
        for _, c in not_passed.iterrows():
            lines.append(f"| {breakable_id(c['claim_id'])} | {c['verdict']} | {_cell(_reason(c))} |")
    lines += ["", "## Evidence", ""]
    for _, c in group.iterrows():
        lines += [f"### {c['claim_id']}", "", f"{c['statement']} ({c['source']})", "",
                  f"- verdict: **{c['verdict']}**"]
        if c["verdict"] != "NOT RUN":
            lines.append(f"- {RERUN_COLUMN}: {_rerun(c)}")
        if c.get("interval"):
            lines.append(f"- {EFFECT_COLUMN}: {_effect(c)}")
        where = _where(c, figures)
        if ": " in where:
            lines.append(f"- figures of its notebook ({where.replace(': ', '): ', 1)}")
        seeds = _seeds(c)
        if seeds:
            lines.append(f"- seeds: {seeds}")
        if c["verdict"] != "PASS":
            lines.append(f"- reason: {_reason(c)}")
        lines += [f"- evidence: {c['evidence']}", ""]
    lines += _coverage(paper, group)
    rows = paper_lines.lines(paper) if paper_lines.has_lines(paper) else None
    lines += _line_by_line(paper, rows)
    lines += _against_paper(paper, profile, rows)
    lines += ["## Timings", ""]
    rows = _timing_rows(timings, lambda nb: notebook_paper(nb) == paper)
    if rows:
        lines += ["Render time of each notebook, and the training time of the runs it reads (a run two notebooks "
                  "share counts in both; the pool trains every run once, before the notebooks render).", "",
                  *_timings_table(rows, timings)]
    else:
        lines.append("No timings for this paper's notebooks in this pass's report.")
    if profile == "paper" or cost is not None:
        lines += ["", *cost_lines(cost, lambda nb: notebook_paper(nb) == paper)]
    return "\n".join(lines) + "\n"


def _coverage(paper: str, group) -> list[str]:
    """The paper's quoted tables, the claims that read each (with their verdicts here) and the
    comparisons of its main tables that no claim makes, with the reason (``fedrepro.papers.<paper>.coverage``)."""
    if not has_coverage(paper):
        return []
    verdict = dict(zip(group["claim_id"], group["verdict"]))
    lines = ["## Coverage of the paper's tables", "",
             "Each quoted table, whether the main text prints it, the claims that read it (verdict at this profile) "
             "and the comparisons between the method and a baseline row that no claim makes, with the reason "
             f"(`fedrepro/papers/{paper}/coverage.py`).", "",
             "| table | main | claims | left out |", "|---|---|---|---|"]
    for row in coverage_rows(paper):
        claims = "; ".join(f"{_linked(c)} ({verdict.get(c, 'NOT RUN')})" for c in row["claims"]) or "—"
        left = "; ".join(f"{b}: {why}" for b, why in row["left_out"].items()) or "—"
        lines.append(f"| {row['table']} | {'yes' if row['main'] else 'no'} | {_cell(claims)} | {_cell(left)} |")
    return [*lines, ""]


def _line_by_line(paper: str, rows: list[dict] | None) -> list[str]:
    """The paper profile's setup against the paper's, item by item, each with the passage that gives
    the paper's value (:mod:`fedrepro.papers.paper_lines`); empty for a paper without that table."""
    if rows is None:
        return []
    counts = {s: sum(r["status"] == s for r in rows) for s in (paper_lines.MATCH, paper_lines.MISMATCH,
                                                               paper_lines.NOT_STATED, paper_lines.NOT_RUN)}
    return ["## The paper profile against the paper, line by line", "",
            "Each setting of the paper, item by item: the paper's value, ours read off the config of that setting's "
            "row in our table at the paper profile, and the passage that gives the paper's (our paraphrase; "
            f"`fedrepro/papers/{paper}/paper_lines.py`). \"not stated\": the paper gives no value there (or our copy "
            "of its text lost it); \"not run\": no table of ours runs the setting. Every MISMATCH and not run is "
            "listed under \"This profile against the paper\" below. "
            + ", ".join(f"{n} {s}" for s, n in counts.items()) + f" of {len(rows)} lines.", "",
            *paper_lines.markdown(paper, rows), ""]


def _against_paper(paper: str, profile: str, rows: list[dict] | None = None) -> list[str]:
    """The paper's default setup at ``profile`` beside the paper profile's (read off the configs),
    and what the profile leaves open, with the reasons (:mod:`fedrepro.papers.differences`; ``rows``:
    the paper's line-by-line table, where already built)."""
    if not hasattr(package(paper), "layers"):
        return []
    lines = []
    if profile != "paper":
        lines += [f"The default setup of the paper's notebooks at the {profile} profile beside the paper profile's "
                  "(the paper's own setup), read off the configs; **bold**: differs. Tables and variants change "
                  "some of these (their notebooks say which).", "",
                  f"| setting | paper profile | {profile} |", "|---|---|---|"]
        for label, theirs, mine in differences.setup_rows(paper, profile):
            shown = f"**{_cell(mine)}**" if mine != theirs else _cell(mine)
            lines.append(f"| {label} | {_cell(theirs)} | {shown} |")
        lines.append("")
    items = differences.left_open(paper, profile, rows)
    if items:
        lines += ["What this profile does not match, and why:", ""]
        lines += [f"- **{_cell(o.item)}**: {o.reason}" for o in items]
        lines.append("")
    # The paper profile is the paper's setup: a heading only where something is left open.
    return ["## This profile against the paper", "", *lines] if lines else []


def _linked(claim_id: str, page: str = "") -> str:
    """The claim id, wrapping only between its words, linked to its evidence on ``page`` (this page by default)."""
    return f"[{breakable_id(claim_id)}]({page}#{_anchor(claim_id)})"


def _anchor(claim_id: str) -> str:
    """GitHub's anchor for the heading ``### <claim_id>``: lower case, dots dropped."""
    return "".join(ch for ch in claim_id.lower() if ch.isalnum() or ch in "-_")


def _every_claim(claims, figures: Mapping[str, list[str]]) -> list[str]:
    """One line per claim, grouped by paper: its statement, verdict, effect, and the notebook that
    checked it with its figures, each id linked to its entry on the paper's page."""
    lines = []
    for paper in _papers(claims):
        lines += ["", f"## {_title(paper)}", "",
                  f"| claim | statement | verdict | {RERUN_COLUMN} | {EFFECT_COLUMN} | notebook: its figures |",
                  "|---|---|---|---|---|---|"]
        for _, c in claims[claims["paper"] == paper].iterrows():
            lines.append(f"| {_linked(c['claim_id'], f'{paper}.md')} | {_cell(c['statement'])} | "
                         f"**{c['verdict']}** | {_rerun(c)} | {_cell(_effect(c))} | {_cell(_where(c, figures))} |")
    return lines


def _holds_lines(claims) -> list[str]:
    """What holds of each paper (:func:`what_holds`), each paper linked to its page."""
    lines = ["## What holds", ""]
    for paper in _papers(claims):
        rows = claims[claims["paper"] == paper].to_dict("records")
        lines += [f"**[{_short(paper)}]({paper}.md).** {what_holds(paper, rows)}", ""]
    return lines


def index_page(profile: str, claims, timings: dict | None, commit: str,
               figures: Mapping[str, list[str]] | None = None) -> str:
    """The summary across papers: what holds of each paper (:func:`what_holds`), the verdict counts
    per paper, each linked to its page, every claim on one line under its paper (with the figures of
    the notebook that checked it, ``figures``: :func:`_figure_links`), and the notebooks of no paper."""
    counts = _verdict_counts(claims)
    verdicts = shown_verdicts(claims["verdict"])
    lines = [f"# Results at the {profile} profile", "", *_holds_lines(claims),
             *_pass_lines(profile, timings, commit), *_verdict_rule(), *_rerun_rule(), *_second_cpu_lines(),
             "| paper | claims | " + " | ".join(verdicts)
             + f" | notebooks | render (s) | training of their runs{_trained_here(timings)} (s) |",
             "|---|---|" + "---|" * len(verdicts) + "---|---|---|"]
    for paper in _papers(claims):
        row = counts.loc[paper]
        nbs = _timing_rows(timings, lambda nb, p=paper: notebook_paper(nb) == p)
        times = f"{len(nbs)} | {sum(n['render_s'] for n in nbs):.1f} | {_trained(nbs, timings)}" if nbs else " | | "
        lines.append(f"| [{paper}]({paper}.md) | {int(row.sum())} | "
                     + " | ".join(str(int(row[v])) for v in verdicts) + f" | {times} |")
    total = counts.sum()
    lines.append(f"| all | {int(total.sum())} | " + " | ".join(str(int(total[v])) for v in verdicts) + " | | | |")
    if f"| {REUSED} |" in "\n".join(lines):
        lines += ["", f"\"{REUSED}\": every run the paper's notebooks read was stored before this pass, so this "
                  "pass trained none of them."]
    lines += _every_claim(claims, figures or {})
    other = _timing_rows(timings, lambda nb: notebook_paper(nb) is None)
    if other:
        lines += ["", "## Notebooks of no paper", "", *_timings_table(other, timings)]
    return "\n".join(lines) + "\n"


def _key(notebook: str) -> str:
    """A notebook's path under ``notebooks/`` without ``.ipynb``, from a claims record's name
    (``fedotp_01_label_shift``) or a report's (``fedotp/01_label_shift.ipynb``)."""
    return _notebook_label(notebook.removesuffix(".ipynb"))


def _combined(claims, report: dict | None, commit: str | None, kept: dict[str, dict]):
    """The claims and the report the pages show: this pass's (``claims`` as recorded under the output
    root, ``report`` its timings) and, for each notebook it did not render, that notebook's kept record
    from the pass that last did (``kept``), provided the notebook still exists. A notebook recorded
    under the output root but not in this pass's report (an earlier pass there) keeps its kept record
    unless its own is newer. Returns the claims, with the commit each row comes from, the combined
    report (``notebooks``: every notebook's timing row; ``parts``: one per pass, with its commit, report
    and notebooks) and the records to keep."""
    ran = {_key(nb["notebook"]): nb for nb in (report or {}).get("notebooks", [])}
    this = commit or (report or {}).get("commit")
    here = this or _commit(None, None)
    fresh = claims["notebook"].notna()
    keys = claims["notebook"].where(fresh, "").map(lambda n: _key(n) if n else "")
    times = claims[fresh].groupby(keys[fresh])["recorded"].max().to_dict()

    def newer_kept(key: str) -> bool:
        kept_at, mine = (kept.get(key) or {}).get("recorded"), times.get(key)
        return key not in ran and bool(kept_at) and (not isinstance(mine, str) or kept_at >= mine)

    def row_commit(key: str, recorded) -> str:  # the pass's commit, else the one its record names
        return this if key in ran and this else (recorded if isinstance(recorded, str) and recorded else here)

    claims = claims.assign(commit=[row_commit(k, c) if f else None for k, c, f in zip(keys, claims["commit"], fresh)])
    recorded = {k for k in set(keys[fresh]) if not newer_kept(k)} | set(ran)
    carried = {k: r for k, r in kept.items()
               if k not in recorded and (repo_root() / "notebooks" / f"{k}.ipynb").is_file()}
    by_claim = {row["claim_id"]: {**row, "notebook": r.get("notebook"), "commit": r.get("commit")}
                for r in carried.values() for row in r["claims"]}
    rows = [by_claim.get(c["claim_id"], c) if c["verdict"] == "NOT RUN" or k in carried else c
            for c, k in zip(claims.to_dict("records"), keys)]
    claims = pd.DataFrame(rows, columns=list(claims.columns))
    summary = {k: v for k, v in (report or {}).items() if k != "notebooks"} or None
    if summary is not None:
        summary["n_notebooks"] = len(ran)
    records = {}
    for key in sorted(recorded | set(carried)):
        mine = claims[(keys == key).to_numpy()]  # a notebook this pass recorded keeps its rows' places
        records[key] = carried.get(key) or {
            "path": key, "notebook": mine["notebook"].iloc[0] if len(mine) else key,
            "commit": mine["commit"].iloc[0] if len(mine) else here, "recorded": times.get(key),
            "timing": ran.get(key), "pass": summary if key in ran else None,
            "claims": json.loads(mine.drop(columns=["notebook", "commit", "recorded"]).to_json(orient="records"))}
    parts: dict[str, dict] = {}
    for key, r in records.items():
        # One part per pass: its commit and its report (two passes of one commit are two parts).
        part = parts.setdefault(json.dumps([r["commit"], r.get("pass")], sort_keys=True),
                                {"commit": r["commit"], "report": r.get("pass"), "notebooks": []})
        part["notebooks"].append(key)
    timing = [r["timing"] for r in records.values() if r.get("timing")]
    order = {nb["notebook"]: i for i, nb in enumerate((report or {}).get("notebooks", []))}
    timing.sort(key=lambda nb: (order.get(nb["notebook"], len(order)), nb["notebook"]))
    combined = {"notebooks": timing, "parts": list(parts.values())} if (report or carried) else None
    return claims, combined, records


def _caused_anew(kept: dict[str, dict], profile: str, root: Path | None) -> dict[str, dict]:
    """``kept`` with today's likely cause (:func:`fedrepro.papers.diagnose.causes`) on each kept claim
    whose compared runs are all in this store: the cause is an analysis of those runs, not part of
    the verdict, so a changed rule reaches it. A claim whose runs are elsewhere keeps the cause its
    record states."""
    from ..papers.diagnose import RULES_VERSION, causes

    runs_dir = output_path("runs", profile, root)
    at = [(key, i) for key, r in kept.items() for i, row in enumerate(r.get("claims", []))
          if row.get("runs") and all((runs_dir / h / "config.json").is_file() for h in row["runs"])]
    if not at:
        return kept
    fresh = causes(profile, pd.DataFrame([kept[k]["claims"][i] for k, i in at]), runs_dir=runs_dir, root=root)
    out = {k: {**r, "claims": list(r["claims"])} for k, r in kept.items()}
    for (key, i), cause in zip(at, fresh.tolist()):
        out[key]["claims"][i] = {**out[key]["claims"][i], "cause": cause, "cause_rules": RULES_VERSION}
    return out


def _for_paper(combined: dict | None, paper: str) -> dict | None:
    """The combined report's parts that hold a notebook of ``paper``."""
    if combined is None:
        return None
    parts = [p for p in combined["parts"] if any(notebook_paper(n) == paper for n in p["notebooks"])]
    return {**combined, "parts": parts}


def write_pages(profile: str, root: Path | None = None, *, timings: Path | None = None,
                commit: str | None = None, out: Path | None = None) -> dict[str, Path]:
    """Write ``docs/results/<profile>/index.md`` and one ``<paper>.md`` per paper under the output
    root ``root`` (default :func:`fedrepro.env.settings.output_root`), from the claims recorded there;
    returns ``{"index": path, "<paper>": path, ...}``. ``timings``: a report other than the one the
    last pass left (e.g. ``bench/timings.json``); ``out``: another folder for the pages (the teaching
    site builds from a temporary one, so that it changes nothing under the root).

    A pass may render only some notebooks (``reproduce --only``): every other notebook's claims and
    times come from the record kept beside the pages (``<pages>/claims/<notebook>.json``) by the pass
    that last rendered it, and the pages name each part's commit and pass. The records are written
    anew beside the pages."""
    from ..papers.verdicts import collect_claims
    from ..papers.diagnose import RULES_VERSION, causes

    check_profile(profile)
    report = load_timings(profile, root, timings)
    claims = collect_claims(profile, root)
    pages_dir = output_path("results", profile, root)
    kept = kept_records(pages_dir / KEPT)
    if claims["notebook"].isna().all() and not kept:
        # Nothing recorded (a fresh checkout): keep the committed pages rather than write all NOT RUN.
        raise ConfigError(f"profile={profile!r}: no notebook has recorded claims in {claims_dir(profile, root)}; "
                          f"run `fedrepro reproduce --profile {profile}` first")
    claims = claims.assign(cause=causes(profile, claims, root=root), cause_rules=RULES_VERSION)
    kept = _caused_anew(kept, profile, root)
    claims, combined, records = _combined(claims, report, commit, kept)
    commit = _commit(report, commit)
    out = Path(out) if out is not None else output_path("results", profile, root, create=True)
    out.mkdir(parents=True, exist_ok=True)
    # Links from where the pages live under the root (also when ``out`` is elsewhere: the site's copy).
    figures = _figure_links(combined, output_path("results", profile, root), root)
    pages = {"index": index_page(profile, claims, combined, commit, figures)}
    # A rehearsal's own cost table where the paper profile has one, else the committed one.
    cost = (load_cost(root) if profile == "paper" else None) or committed_cost()
    pages.update({p: paper_page(p, profile, claims, _for_paper(combined, p), commit, cost, figures)
                  for p in _papers(claims)})
    written = {}
    for name, text in pages.items():
        path = out / f"{name}.md"
        atomic_write_bytes(path, text.encode())
        written[name] = path
    (out / KEPT).mkdir(exist_ok=True)
    files = {f"{record_name(key)}.json": record for key, record in records.items()}
    for path in (out / KEPT).glob("*.json"):
        if path.name not in files:
            path.unlink()
    for name, record in files.items():
        atomic_write_json(out / KEPT / name, {"profile": profile, **record})
    return written
