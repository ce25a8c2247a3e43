"""Where an executed notebook ran: the profile, the commit and the machine, for the note at the top of
its page.

``fedrepro reproduce`` records the pass (commit, CPU, cores, allocator, each notebook's render
time) in ``timings.json`` beside the executed notebooks; papermill records each notebook's
parameters and start and end times in its metadata. A notebook executed some other way (papermill
by hand, nbval) has no pass record, and its note says so instead of guessing.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Provenance:
    profile: str | None
    commit: str | None
    machine: str | None
    started: str | None = None
    render_s: float | None = None

    def note(self) -> str:
        """The Markdown of the note (a MyST admonition) shown at the top of a notebook's page."""
        profile = f"the **{self.profile}** profile" if self.profile else "an unrecorded profile"
        lines = [f"Executed at {profile}",
                 f"commit `{self.commit}`" if self.commit else "commit not recorded (not run by `make reproduce`)",
                 f"on {self.machine}" if self.machine else "machine not recorded"]
        when = []
        if self.started:
            when.append(f"started {self.started[:16].replace('T', ' ')} UTC")
        if self.render_s is not None:
            when.append(f"rendered in {self.render_s:.0f} s")
        body = "; ".join(lines) + (f" ({', '.join(when)})" if when else "") + "."
        return ("```{admonition} How this page was made\n:class: note\n\n" + body +
                " The numbers below are what that run printed; run the notebook yourself to change them.\n```")


def read_pass(notebooks_dir: Path) -> dict | None:
    """The pass's report (``timings.json``) beside the executed notebooks, or None."""
    f = notebooks_dir / "timings.json"
    return json.loads(f.read_text()) if f.is_file() else None


def machine(report: dict) -> str | None:
    """The machine in words, from the pass's report."""
    if not report or "cores" not in report:
        return None
    words = f"{report['cores']} cores"
    if report.get("cpu"):
        words += f" of {report['cpu']}"
    if report.get("allocator"):
        words += f", allocator {report['allocator']}"
    return words


def provenance(nb_metadata: dict, rel: str, report: dict | None) -> Provenance:
    """The provenance of notebook ``rel`` (its path under the notebooks folder) from its metadata and
    the pass's report. A ``fedrepro`` entry in the notebook's metadata (``profile``, ``commit``,
    ``machine``) wins over the pass's, as it was written by the notebook's own run."""
    papermill = nb_metadata.get("papermill") or {}
    own = nb_metadata.get("fedrepro") or {}
    report = report or {}
    timing = next((n for n in report.get("notebooks", []) if n.get("notebook") == rel), {})
    profile = own.get("profile") or (papermill.get("parameters") or {}).get("PROFILE") or report.get("profile")
    return Provenance(profile=profile, commit=own.get("commit") or report.get("commit"),
                      machine=own.get("machine") or machine(report), started=papermill.get("start_time"),
                      render_s=timing.get("render_s"))
