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
from ..errors import ConfigError, FedreproError
from ..runs import archive
from ..runs.catalog import run_folders
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


def _paper_of(only: str | None, profile: str) -> str:
    """The one paper whose notebooks ``only`` selects (a partial pass is archived paper by paper)."""
    root = repo_root()
    papers = {rel.parts[0] if len(rel.parts) > 1 else "tour"
              for rel in (nb.relative_to(root / "notebooks") for nb in numbered_notebooks(root)) if selected(rel, only)}
    if len(papers) != 1:
        raise ConfigError(f"--partial archives one paper's unfinished pass; --only {only!r} selects "
                          f"{', '.join(sorted(papers)) or 'no notebook'} (valid: e.g. --only fedpft)")
    return papers.pop()


def _finished_runs(runs_dir: Path, profile: str) -> list[str]:
    """Every finished run of ``profile`` in the pass's store ``runs_dir`` (a folder with its summary)."""
    out = []
    for folder in run_folders(runs_dir):
        if folder.name.isalnum() and not folder.is_symlink() and (folder / "summary.json").is_file():
            try:
                if RunResult(folder).config.profile == profile:
                    out.append(folder.name)
            except (FedreproError, OSError):
                continue
    return out


def _continues(paper: str, folder: Path) -> bool:
    """Whether the paper's archive file in ``folder`` was written by an unfinished pass (``partial`` in
    its source), whose restored runs a pass that continued it may archive again."""
    arch = archive.Archive(folder)
    info = arch.manifest["files"].get(f"{paper}.jsonl.gz", {}) if arch.exists() else {}
    return bool((info.get("source") or {}).get("partial"))


def archive_pass(profile: str = "laptop", only: str | None = None, runs_dir: Path | None = None,
                 folder: Path | None = None, partial: bool = False) -> dict[str, Path]:
    """Write the archive file of each paper whose notebooks ``only`` selects, from the traces and the
    store (``runs_dir``, default the pass's) of the last pass at ``profile``; returns the files by
    paper. A one-line ConfigError when there is no trace, or a run is missing, restored or stale.

    ``partial``: the pass has not finished (a machine lent for less time than the pass takes): every
    finished run of the one paper ``only`` selects is archived, with the verdicts of the notebooks that
    rendered, and the file is marked ``partial``. The next machine continues it with
    ``FEDREPRO_ARCHIVE=resume fedrepro reproduce --only <paper>`` (those runs are restored, the rest
    trained) and archives again; runs restored from the partial file are then kept, so that the file
    grows into one pass of today's code (each run's meta names its CPU and commit)."""
    found = traced_runs(profile, only)
    runs_dir = Path(runs_dir) if runs_dir else default_runs_dir()
    folder = folder or archive.archive_folder(profile)
    if partial:
        paper = _paper_of(only, profile)
        found = {paper: {**found.get(paper, {}), "": _finished_runs(runs_dir, profile)}}
    if not found:
        raise ConfigError(f"no trace of a rendered notebook at profile {profile!r}"
                          + (f" matching --only {only!r}" if only else "")
                          + f" under {output_path('trace', profile)}; valid: after `fedrepro reproduce --profile "
                          f"{profile}` rendered them, or --partial for an unfinished pass")
    commit = git_commit(repo_root()) or "unknown"
    written = {}
    for paper, notebooks in sorted(found.items()):
        hashes = list(dict.fromkeys(h for hs in notebooks.values() for h in hs))
        notebooks = {nb: hs for nb, hs in notebooks.items() if nb}  # "": a partial pass's untraced runs
        runs, commits = [], {commit}
        continues = _continues(paper, folder)
        for h in hashes:
            res = RunResult(runs_dir / h)
            if not (res.path / "summary.json").is_file():
                raise ConfigError(f"run {res.path} that a {paper} notebook read is not finished in {runs_dir}; "
                                  "valid: the store of the pass that rendered the notebooks")
            if res.archived:
                if not (continues and archive.from_partial(res.path)):
                    raise ConfigError(f"run {res.path} was restored from the reference archive, not trained in "
                                      f"this pass; valid: a pass with {archive.ENV}=off (make reproduce), or one "
                                      f"that continued a partial archive ({archive.ENV}=resume)")
                commits.add(str((archive.archived_source(res.path) or {}).get("commit", "unknown")))
            st = staleness(res.config, res.meta)
            if st.state == STALE:
                raise ConfigError(f"run {res.path} is stale ({st.why}); retrain it before archiving")
            runs.append(res)
        cpus = collections.Counter(str(r.meta.get("cpu", "?")) for r in runs)
        source = {"commit": commit, "cpu": cpus.most_common(1)[0][0] if cpus else cpu_model(),
                  "date": datetime.now(timezone.utc).strftime("%Y-%m-%d"), "notebooks": sorted(notebooks),
                  "profile": profile}
        if len(commits) > 1:
            source["commits"] = sorted(commits)  # a pass continued across machines: every commit it ran at
        if partial:
            source["partial"] = True
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
