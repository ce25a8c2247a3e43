"""How long a fresh clone takes to show a paper's main notebook at the laptop profile from the
reference archive (issue 56: "opening each paper's main notebook shows its laptop figures and
verdicts in ≤ 30 s without training").

Each notebook is executed with papermill (what JupyterLab's Run All does, kernel start included) in
an empty output root, so every run it reads is restored from ``results/laptop/`` and nothing is in
the store beforehand. A paper whose archive file is missing or marked partial (its pass unfinished)
is listed, not timed: opening its notebook would train.

    .venv/bin/python bench/open_from_archive.py [--out bench/open_from_archive.json]

Time it on a quiet machine (the record says what else ran: the load average at the start).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from fedrepro.env.host import cpu_model, git_commit, repo_root
from fedrepro.runs.archive import Archive, archive_folder
from fedrepro.runs.store import ARCHIVED

# Each paper's main notebook: the one that holds its main table.
MAIN = {"fedpft": "fedpft/03_main_tables.ipynb", "pfedcspc": "pfedcspc/01_global_and_personalized.ipynb",
        "fedotp": "fedotp/02_dirichlet.ipynb", "pep_fedpt": "pep_fedpt/01_label_heterogeneity.ipynb"}
PROFILE = "laptop"


def archived(paper: str) -> str | None:
    """Why ``paper``'s notebook cannot be opened from the archive, or None when it can."""
    manifest = Archive(archive_folder(PROFILE)).manifest if archive_folder(PROFILE).is_dir() else {}
    entry = (manifest.get("files") or {}).get(f"{paper}.jsonl.gz")
    if entry is None:
        return "no archive file (its laptop pass is not archived)"
    if str((entry.get("source") or {}).get("partial")) == "True":
        return f"its archive is partial ({entry.get('runs')} runs of an unfinished pass)"
    return None


def open_once(notebook: str) -> dict:
    """Execute ``notebook`` in an empty output root; its wall time and what it printed of the archive."""
    with tempfile.TemporaryDirectory(prefix="fedrepro-open-") as out:
        env = {**os.environ, "FEDREPRO_OUTPUT": out, "FEDREPRO_PROFILE": PROFILE, "MPLBACKEND": "Agg",
               "FEDREPRO_ARCHIVE": "read"}
        executed = Path(out) / "executed.ipynb"
        t = time.perf_counter()
        subprocess.run([sys.executable, "-m", "papermill", str(repo_root() / "notebooks" / notebook), str(executed),
                        "-p", "PROFILE", PROFILE, "--log-level", "WARNING", "--no-progress-bar"],
                       env=env, check=True, capture_output=True)
        wall = time.perf_counter() - t
        text = executed.read_text(encoding="utf-8")
        runs = [p for p in (Path(out) / "runs").glob("*") if p.is_dir() and not p.name.startswith(".")]
        # A run restored from the archive is marked so; any other run folder was trained by the notebook.
        trained = sum(not (p / ARCHIVED).exists() for p in runs)
        return {"wall_s": round(wall, 1), "figures": text.count('"image/png"'),
                "verdicts": len(re.findall(r"\b(?:PASS|FAIL|INCONCLUSIVE|UNTESTABLE)\b", text)),
                "read_from_archive": "read from the reference archive" in text, "runs": len(runs), "trained": trained}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(repo_root() / "bench" / "open_from_archive.json"))
    ap.add_argument("--repeat", type=int, default=2, help="times each notebook is opened (each in a fresh root)")
    args = ap.parse_args()
    record = {"profile": PROFILE, "commit": git_commit(repo_root()), "cpu": cpu_model(), "cores": os.cpu_count(),
              "load_average_at_start": round(os.getloadavg()[0], 2), "notebooks": {}}
    for paper, notebook in MAIN.items():
        why = archived(paper)
        if why is not None:
            record["notebooks"][notebook] = {"timed": False, "why": why}
            print(f"{notebook}: not timed: {why}", flush=True)
            continue
        tries = [open_once(notebook) for _ in range(args.repeat)]
        record["notebooks"][notebook] = {"timed": True, "wall_s": [t["wall_s"] for t in tries],
                                         "figures": tries[0]["figures"], "verdicts": tries[0]["verdicts"],
                                         "runs_restored": tries[0]["runs"], "runs_trained": tries[0]["trained"],
                                         "read_from_archive": all(t["read_from_archive"] for t in tries)}
        walls = ", ".join(f"{t['wall_s']} s" for t in tries)
        print(f"{notebook}: {walls}", flush=True)
    Path(args.out).write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
