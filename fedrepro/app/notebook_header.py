"""A notebook's first output in JupyterLab: how many runs it needs at its profile, how many are
stored, the predicted time, and the smoke profile for a run in minutes (issue 58).

A notebook's setup cell calls :func:`fedrepro.resolve_profile`, which calls :func:`announce` with the
profile: the package registers it in :data:`fedrepro.config.ON_RESOLVE` when imported in a kernel
that Jupyter started for a notebook (jupyter_server gives each notebook's kernel its path as
``JPY_SESSION_NAME``). It prints for a notebook of this repository only, and not in one that
``fedrepro reproduce`` renders (``FEDREPRO_TRACE`` set): the pass has trained its plan before, and
says what it costs itself.

The counts come from the notebook's plan (:func:`fedrepro.papers.plan.plan`) and the store it reads;
the time from :func:`fedrepro.app.compute.predict`, calibrated on the last pass at the profile under
the output root, else on the committed ``bench/timings.json`` as ``fedrepro reproduce --plan
--predict`` is. Counting takes a few seconds, most of them importing torch, which the notebook
needs next anyway; where planning took longer than :data:`PREDICT_BUDGET_S` (the prediction plans
again), or the prediction cannot be made, the header gives the command that makes it instead.
"""
from __future__ import annotations

import os
import time
from pathlib import Path

from ..config import ON_RESOLVE
from ..env.host import repo_root
from ..env.settings import output_path
from ..env.trace import ENV as ENV_TRACE
from ..errors import FedreproError
from ..execute.local import unfinished
from ..papers.plan import plan

# The variable jupyter_server sets in each notebook's kernel: the notebook's path.
ENV_SESSION = "JPY_SESSION_NAME"
# Seconds of planning after which the header leaves the prediction (which plans again) to the command.
PREDICT_BUDGET_S = 3.0


def session_notebook(root: Path | None = None) -> tuple[Path, Path] | None:
    """``(notebook, notebooks folder)`` of the kernel's notebook when Jupyter started this kernel for
    a notebook under ``<root>/notebooks`` (default :func:`~fedrepro.env.host.repo_root`) and
    ``fedrepro reproduce`` is not rendering it; else None."""
    session = os.environ.get(ENV_SESSION)
    if not session or os.environ.get(ENV_TRACE) or not session.endswith(".ipynb"):
        return None
    nb_root = ((root or repo_root()) / "notebooks").resolve()
    path = Path(session)
    path = (path if path.is_absolute() else nb_root / path).resolve()
    return (path, nb_root) if path.is_file() and path.is_relative_to(nb_root) else None


def duration(seconds: float) -> str:
    """``seconds`` in the unit a reader plans with."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def counts(notebook: Path, nb_root: Path, profile: str) -> dict:
    """The runs ``notebook`` reads at ``profile``, those stored in the store it reads, and the runs its
    learning-rate searches will add once they choose the rates (about: two rows may tune to one run),
    and the seconds the counting took (imports aside: the prediction plans again)."""
    from ..methods import METHODS  # noqa: F401  (every method and torch, imported before the clock starts)

    rel = notebook.relative_to(nb_root).as_posix()
    t0 = time.perf_counter()
    planned = plan([notebook], nb_root, profile)
    left = unfinished(list(planned.runs.values()))
    return {"notebook": rel, "runs": len(planned.runs), "stored": len(planned.runs) - len(left),
            "after_searches": len(planned.after_searches) if rel in planned.incomplete else 0,
            "seconds": time.perf_counter() - t0}


def timings_report(profile: str) -> Path:
    """The pass report a prediction calibrates on: the last ``fedrepro reproduce`` pass at ``profile``
    under the output root (this machine's times, today's configs) where there is one, else the
    committed ``bench/timings.json`` (the last whole laptop pass)."""
    from .compute import BENCH_TIMINGS

    here = output_path("notebooks", profile) / "timings.json"
    return here if here.is_file() else repo_root() / BENCH_TIMINGS


def predicted(notebook: Path, nb_root: Path, profile: str) -> dict:
    """``{"train_s", "rest_s", "report"}``: the predicted CPU seconds of the runs left to train, and of
    the notebook's analyses and render, calibrated on :func:`timings_report`."""
    from .compute import predict  # defers torch and every paper

    p = predict([notebook], nb_root, profile, timings_report(profile), repo_root() / "docs" / "results" / profile)
    rows = p["papers"].values()
    return {"train_s": sum(r["to_train_s"] for r in rows),
            "rest_s": sum(r["analyses_s"] + r["renders_s"] for r in rows), "report": p["report"]}


def header(notebook: Path, nb_root: Path, profile: str, budget_s: float = PREDICT_BUDGET_S) -> str:
    """The header's text for ``notebook`` at ``profile``."""
    c = counts(notebook, nb_root, profile)
    rel, stem = c["notebook"], c["notebook"].removesuffix(".ipynb")
    to_train = c["runs"] - c["stored"]
    more = (f" (and about {c['after_searches']} more once its learning-rate searches choose the rates)"
            if c["after_searches"] else "")
    lines = [f"{rel} at the {profile} profile needs {c['runs']} runs{more}: {c['stored']} stored, "
             f"{to_train} to train." if c["runs"] else f"{rel} at the {profile} profile reads no federated runs."]
    command = f"`fedrepro reproduce --plan --predict --only {stem}`"
    if c["seconds"] > budget_s:
        lines.append(f"Predicted time: {command} (planning took {c['seconds']:.0f} s here; predicting would "
                     "take as long again).")
    else:
        try:
            p = predicted(notebook, nb_root, profile)
        except FedreproError as e:
            lines.append(f"Predicted time: not available here ({e}). {command[:-1]} --timings <a pass's "
                         "timings.json>` predicts it from that pass's times.")
        else:
            basis = (f"calibrated on {p['report']}: a prediction, not a measurement"
                     + ("; the searches' later runs not included" if more else ""))
            lines.append(f"Predicted time: about {duration(p['train_s'])} of CPU time to train the {to_train} runs "
                         f"not stored, then about {duration(p['rest_s'])} for the rest of the notebook ({basis})."
                         if to_train else f"Predicted time: about {duration(p['rest_s'])} ({basis}).")
    if profile != "smoke":
        lines.append('For a run in minutes: the smoke profile (PROFILE = "smoke" in the first cell, or '
                     "`make lab PROFILE=smoke`); its runs check that the code works, its verdicts say nothing.")
    return "\n".join(lines)


def announce(profile: str) -> None:
    """Print :func:`header` for the kernel's notebook (:func:`session_notebook`); nothing elsewhere. A
    failure to count is printed in one line and never stops the notebook."""
    found = session_notebook()
    if found is None:
        return
    try:
        text = header(*found, profile)
    except Exception as e:  # noqa: BLE001  (the header informs; the notebook must still run)
        text = f"fedrepro could not count this notebook's runs at {profile}: {type(e).__name__}: {e}"
    print(text, flush=True)


def register() -> None:
    """Have :func:`fedrepro.resolve_profile` call :func:`announce` (once, however often it is called)."""
    if announce not in ON_RESOLVE:
        ON_RESOLVE.append(announce)
