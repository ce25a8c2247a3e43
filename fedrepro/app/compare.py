"""The reproduction report: a pass's runs and verdicts against the reference archive's (issue 56).

``fedrepro reproduce`` trains with the archive off; this then answers the question a reproducibility
package exists for, "do my runs match yours?", run by run and claim by claim:

- each archived run that the store holds trained (not restored): **identical** (every metric of its
  rounds and clients tables equal), **rounding** (none differs by more than
  :data:`~fedrepro.app.verify.ROUNDING`), **within tolerance** (none by more than :data:`TOLERANCE`),
  or **different**, with the largest difference and where it is;
- each archived claim that the pass checked again: its verdict then and now, and its effect.

Training amplifies the float differences between CPUs, so runs from another machine are expected to
be "within tolerance" or "different" with the same verdicts where those are firm; on the archive's
own machine, identical. :func:`write_report` writes it as a page beside the results pages.
"""
from __future__ import annotations

import collections
import contextlib
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from ..claims.core import claims_dir, recorded_claims
from ..env.host import cpu_model, git_commit, repo_root
from ..env.settings import output_path
from ..runs.archive import Archive, archive_folder
from ..runs.store import RunResult, atomic_write_bytes, default_runs_dir
from .verify import compare_lines

# The largest difference of a metric (an accuracy or a loss per round or client) that still counts
# as "within tolerance": 2 points of accuracy. Chosen so that a run another CPU trained (measured:
# per-seed effects moved by up to 1.8 points, issue 56) is not called different for that alone.
TOLERANCE = 0.02
RUN_OUTCOMES = ("identical", "rounding", "within tolerance", "different", "not trained here")


@dataclass(frozen=True)
class RunComparison:
    hash: str
    archive_file: str
    outcome: str
    max_diff: float
    where: str


@dataclass(frozen=True)
class ClaimComparison:
    claim_id: str
    archived: str
    now: str
    archived_effect: str
    effect: str


def compare_runs(profile: str, runs_dir: Path | None = None) -> list[RunComparison]:
    """Each archived run of ``profile`` against the store's (``runs_dir``, default the pass's)."""
    archived = Archive(archive_folder(profile))
    runs_dir = Path(runs_dir) if runs_dir else default_runs_dir()
    out = []
    for h, run in sorted(archived.runs.items()):
        folder = runs_dir / h
        if not (folder / "summary.json").is_file() or RunResult(folder).archived:
            out.append(RunComparison(h, run.archive_file, "not trained here", 0.0, ""))
            continue
        with _held(run) as held:
            outcome, diff, where = compare_lines(held, folder)
        if outcome == "different" and diff <= TOLERANCE:
            outcome = "within tolerance"
        out.append(RunComparison(h, run.archive_file, outcome, diff, where))
    return out


@contextlib.contextmanager
def _held(run) -> Iterator[Path]:
    """The archived run's tables in a temporary folder, as the store would hold them."""
    with tempfile.TemporaryDirectory(prefix="fedrepro-compare-") as tmp:
        for name in ("rounds.jsonl", "clients.jsonl"):
            (Path(tmp) / name).write_text(run.files[name], encoding="utf-8")
        yield Path(tmp)


def compare_claims(profile: str) -> list[ClaimComparison]:
    """Each claim the archive recorded against the verdict this pass recorded (``"NOT RUN"`` where the
    pass did not check it)."""
    archived = Archive(archive_folder(profile))
    now = recorded_claims(claims_dir(profile))
    out = []
    for record in archived.claims().values():
        for row in record["claims"]:
            cid = str(row.get("claim_id"))
            new = now.get(cid, {})
            out.append(ClaimComparison(cid, str(row.get("verdict")), str(new.get("verdict", "NOT RUN")),
                                       str(row.get("effect", "")), str(new.get("effect", ""))))
    return sorted(out, key=lambda c: c.claim_id)


def report(profile: str, runs_dir: Path | None = None) -> str:
    """The reproduction report as Markdown."""
    archived = Archive(archive_folder(profile))
    runs, claims = compare_runs(profile, runs_dir), compare_claims(profile)
    sources = sorted({f"commit {s.get('commit')}, {s.get('cpu')}, {s.get('date')}"
                      for s in (info.get("source") or {} for info in archived.manifest["files"].values())})
    counts = collections.Counter(r.outcome for r in runs)
    same = sum(c.archived == c.now for c in claims if c.now != "NOT RUN")
    checked = sum(c.now != "NOT RUN" for c in claims)
    lines = [f"# Reproduction report ({profile} profile)", "",
             f"This pass (commit {git_commit(repo_root()) or 'unknown'}, {cpu_model()}) against the reference "
             f"archive `results/{profile}/` ({'; '.join(sources)}).", "",
             "## Verdicts", "",
             f"{same} of the {checked} archived claims that this pass checked again have the same verdict"
             + (f"; {checked - same} changed." if checked - same else "."), ""]
    changed = [c for c in claims if c.now != "NOT RUN" and c.now != c.archived]
    if changed:
        lines += ["| claim | archive | this pass | effect (archive) | effect (this pass) |", "|---|---|---|---|---|"]
        lines += [f"| `{c.claim_id}` | {c.archived} | {c.now} | {_cell(c.archived_effect)} | {_cell(c.effect)} |"
                  for c in changed]
        lines.append("")
    lines += ["## Runs", "",
              "Each archived run's rounds and clients tables against this store's run of the same config "
              f"(within tolerance: no metric more than {TOLERANCE:g} apart; training amplifies float differences "
              "between CPUs, so another machine gives other digits).", "",
              "| outcome | runs |", "|---|---|"]
    lines += [f"| {o} | {counts.get(o, 0)} |" for o in RUN_OUTCOMES]
    different = sorted((r for r in runs if r.outcome == "different"), key=lambda r: -r.max_diff)
    if different:
        lines += ["", "| run | archive file | largest difference | where |", "|---|---|---|---|"]
        lines += [f"| `{r.hash}` | {r.archive_file} | {r.max_diff:.4g} | {_cell(r.where)} |" for r in different[:50]]
        if len(different) > 50:
            lines.append(f"| … | | | {len(different) - 50} more |")
    return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def write_report(profile: str, out: Path | None = None, runs_dir: Path | None = None) -> Path | None:
    """Write :func:`report` to ``reproduction.md`` beside the results pages (``out``, default
    ``docs/results/<profile>/`` under the output root); returns its path, or None when the profile
    has no reference archive to compare with."""
    if not Archive(archive_folder(profile)).exists():
        return None
    path = Path(out or output_path("results", profile)) / "reproduction.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, report(profile, runs_dir).encode("utf-8"))
    return path
