"""``fedrepro archive``: the reference archive (:mod:`fedrepro.runs.archive`) of a pass, from its traces.

``fedrepro reproduce`` gives every notebook it renders a trace of the runs it read
(:mod:`fedrepro.env.trace`). This writes, per paper, every run those traces name into
``results/<profile>/<paper>.jsonl.gz``, from the store the pass trained into, with the pass it came
from (commit, CPU, date, notebooks) in the manifest. Only runs trained in this store by today's code
are archived: a run restored from the archive, or one that today's code would train differently
(stale), is refused by name, so that one archive file is one pass.
"""
from __future__ import annotations

import collections
from datetime import datetime, timezone
from pathlib import Path

from ..claims.core import claims_dir, record_name, recorded_claims
from ..env import trace
from ..env.host import cpu_model, git_commit, repo_root
from ..env.settings import output_path
from ..errors import ConfigError
from ..runs import archive
from ..runs.fingerprint import STALE, staleness
from ..papers.plan import recorded_stages
from ..runs.store import RunResult, default_runs_dir
from .reproduce import numbered_notebooks, selected


def traced_runs(profile: str, only: str | None = None) -> dict[str, dict[str, list[str]]]:
    """``{paper: {notebook: [run hashes it read]}}`` from the traces of the last pass at ``profile``
    (the notebooks ``only`` selects, as ``reproduce --only`` does)."""
    root = repo_root()
    nb_root = root / "notebooks"
    trace_dir = output_path("trace", profile)
    out: dict[str, dict[str, list[str]]] = collections.defaultdict(dict)
    for nb in numbered_notebooks(root):
        rel = nb.relative_to(nb_root)
        if not selected(rel, only):
            continue
        events = trace.read(trace_dir / trace.notebook_file(str(rel)))
        hashes = list(dict.fromkeys(e["hash"] for e in events if e["event"] == "run"))
        if hashes:
            paper = rel.parts[0] if len(rel.parts) > 1 else "tour"
            out[paper][str(rel)] = hashes
    return dict(out)


def archive_pass(profile: str = "laptop", only: str | None = None, runs_dir: Path | None = None,
                 folder: Path | None = None) -> dict[str, Path]:
    """Write the archive file of each paper whose notebooks ``only`` selects, from the traces and the
    store (``runs_dir``, default the pass's) of the last pass at ``profile``; returns the files by
    paper. A one-line ConfigError when there is no trace, or a run is missing, restored or stale."""
    found = traced_runs(profile, only)
    if not found:
        raise ConfigError(f"no trace of a rendered notebook at profile {profile!r}"
                          + (f" matching --only {only!r}" if only else "")
                          + f" under {output_path('trace', profile)}; valid: after `fedrepro reproduce --profile "
                          f"{profile}` rendered them")
    runs_dir = Path(runs_dir) if runs_dir else default_runs_dir()
    folder = folder or archive.archive_folder(profile)
    commit = git_commit(repo_root()) or "unknown"
    written = {}
    for paper, notebooks in sorted(found.items()):
        hashes = list(dict.fromkeys(h for hs in notebooks.values() for h in hs))
        runs = []
        for h in hashes:
            res = RunResult(runs_dir / h)
            if not (res.path / "summary.json").is_file():
                raise ConfigError(f"run {res.path} that a {paper} notebook read is not finished in {runs_dir}; "
                                  "valid: the store of the pass that rendered the notebooks")
            if res.archived:
                raise ConfigError(f"run {res.path} was restored from the reference archive, not trained in this "
                                  f"pass; valid: a pass with {archive.ENV}=off (make reproduce)")
            st = staleness(res.config, res.meta)
            if st.state == STALE:
                raise ConfigError(f"run {res.path} is stale ({st.why}); retrain it before archiving")
            runs.append(res)
        cpus = collections.Counter(str(r.meta.get("cpu", "?")) for r in runs)
        source = {"commit": commit, "cpu": cpus.most_common(1)[0][0] if cpus else cpu_model(),
                  "date": datetime.now(timezone.utc).strftime("%Y-%m-%d"), "notebooks": sorted(notebooks),
                  "profile": profile}
        written[paper] = archive.write(folder, paper, runs, source)
        # The verdicts of the same notebooks, so that a reproduction can be compared claim by claim.
        claims = claims_dir(profile)
        records = {f"{record_name(nb)}.json": (claims / f"{record_name(nb)}.json").read_bytes()
                   for nb in notebooks if (claims / f"{record_name(nb)}.json").is_file()}
        archive.write_claims(folder, records)
        # The seed stage each table reached for those verdicts, so that a notebook reading the
        # archive plans the same seeds (fedrepro.papers.claim_seeds).
        nb_root = repo_root() / "notebooks"
        archive.write_stages(folder, recorded_stages([nb_root / nb for nb in notebooks], nb_root, profile,
                                                     recorded_claims(claims)))
    return written
