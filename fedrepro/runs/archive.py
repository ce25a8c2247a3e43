"""The reference archive: a pass's runs as data, committed with the code (issue 56).

A laptop pass costs hours, and its runs live only in the store of the machine that trained them. The
archive keeps, for every run the pass's notebooks read, the files a notebook reads of it
(``config.json``, ``meta.json``, ``summary.json``, ``rounds.jsonl``, ``clients.jsonl``), byte for byte,
so that a fresh clone renders the notebooks and pages without training. It keeps no model weights
(``final_state.pt``): what needs them (a probe, a t-SNE) trains the run.

Layout (``results/<profile>/`` in the repository, :func:`archive_folder`):

- ``<name>.jsonl.gz``: one JSON line per run, ``{"hash", "files": {file name: its text}}``, sorted by
  hash, gzip with no timestamp (the same runs give the same bytes);
- ``MANIFEST.json``: per archive file its sha256, size, number of runs, and the pass it came from
  (commit, CPU, date).

Reading (:class:`Archive`): the manifest and each archive file are read as bounded regular files
(:func:`~fedrepro.runs.store.read_plain_file`), each file is checked against the manifest's sha256
before it is decompressed, and decompressed to at most :data:`MAX_TEXT_BYTES`; every run's files
against the sha256 that its own ``summary.json`` records. Everything in it is JSON: nothing is
unpickled or executed, whoever wrote it. A damaged or edited file is refused with a one-line
:class:`~fedrepro.errors.CorruptCacheError` naming it.

Use (:data:`ENV`, ``FEDREPRO_ARCHIVE``): ``read`` (default) restores a run that the store lacks from the
archive into the store (:func:`restore`: the run's folder with :data:`~fedrepro.runs.store.ARCHIVED`
in place of its final state), so a notebook reads it as any stored run and says where it came from;
``off`` trains every run, and a restored run counts as not trained (``fedrepro reproduce`` trains
with the archive off, then compares its runs with it).
"""
from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import shutil
import uuid
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping

from ..env.host import repo_root
from ..env.host import ENV_ARCHIVE
from ..env.jsonfiles import loads
from ..errors import ConfigError, CorruptCacheError
from .store import ARCHIVED, RefusedFile, RunResult, RunStore, atomic_write_bytes, read_plain_file

FORMAT = "fedrepro-archive/1"
MANIFEST = "MANIFEST.json"
ENV = ENV_ARCHIVE
# Where the archives live instead of the repository's results/ (one folder per profile under it).
ENV_ROOT = "FEDREPRO_ARCHIVE_ROOT"
# read: restore what the store lacks (notebooks, make figures); off: train everything (make reproduce);
# resume: a training pass that continues an unfinished one, restoring only runs of a file marked partial.
POLICIES = ("read", "off", "resume")
# The files of a run the archive keeps: what notebooks and pages read (not the model weights).
KEPT = ("config.json", "meta.json", "summary.json", "rounds.jsonl", "clients.jsonl")
# Bounds on what is read: an archive file as stored, and decompressed (a planted gzip bomb stops here).
MAX_FILE_BYTES = 64 << 20
MAX_TEXT_BYTES = 1 << 30
MAX_MANIFEST_BYTES = 1 << 20


def policy() -> str:
    """``FEDREPRO_ARCHIVE``: ``read`` (default), ``off`` or ``resume``; a one-line ConfigError otherwise."""
    value = os.environ.get(ENV) or "read"
    if value not in POLICIES:
        raise ConfigError(f"{ENV}={value!r}; valid: {', '.join(POLICIES)}")
    return value


def archive_folder(profile: str) -> Path:
    """Where the archive of ``profile`` lives: ``results/<profile>/`` in the repository, or under
    ``$FEDREPRO_ARCHIVE_ROOT``."""
    root = os.environ.get(ENV_ROOT)
    return (Path(root) if root else repo_root() / "results") / profile


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _refuse(path: Path, why: str) -> CorruptCacheError:
    return CorruptCacheError(f"reference archive file {path} {why}; restore it with `git checkout -- {path}` "
                             f"(or set {ENV}=off to train without the archive)")


def _read(path: Path, limit: int) -> bytes:
    try:
        return read_plain_file(path, limit)
    except FileNotFoundError:
        raise _refuse(path, "is missing") from None
    except (RefusedFile, OSError) as e:
        raise _refuse(path, f"cannot be read ({e})") from None


def entry_of(res: RunResult) -> dict:
    """The archive line of a finished, checked run: its hash and the text of each file in :data:`KEPT`."""
    res.verify()
    files = {}
    for name in KEPT:
        data = read_plain_file(res.path / name, MAX_FILE_BYTES)
        files[name] = data.decode("utf-8")
    return {"hash": res.path.name, "files": files}


def _gzip(lines: list[str]) -> bytes:
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", compresslevel=9, mtime=0, filename="") as gz:
        for line in lines:
            gz.write(line.encode("utf-8") + b"\n")
    return buf.getvalue()


def write(folder: Path, name: str, runs: Iterable[RunResult], source: Mapping[str, object]) -> Path:
    """Write the archive file ``<name>.jsonl.gz`` of ``runs`` into ``folder`` (replacing one of that
    name) and record it in the manifest with ``source`` (the pass: commit, CPU, date, notebooks).
    Returns the file's path."""
    if not name or "/" in name or name.startswith("."):
        raise ConfigError(f"archive name {name!r}; valid: a plain file stem such as a paper's name")
    entries = {e["hash"]: e for e in (entry_of(r) for r in runs)}
    lines = [json.dumps(entries[h], sort_keys=True, ensure_ascii=False) for h in sorted(entries)]
    data = _gzip(lines)
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"{name}.jsonl.gz"
    atomic_write_bytes(target, data)
    manifest = _manifest(folder) if (folder / MANIFEST).exists() else {"format": FORMAT, "files": {}}
    manifest["files"][target.name] = {"sha256": _sha(data), "bytes": len(data), "runs": len(lines),
                                      "source": dict(source)}
    atomic_write_bytes(folder / MANIFEST, (json.dumps(manifest, indent=1, sort_keys=True) + "\n").encode())
    return target


def write_claims(folder: Path, records: Mapping[str, bytes]) -> None:
    """Keep the pass's claim records (``{record name: the JSON bytes a notebook saved}``) under
    ``folder/claims/``, each with its sha256 in the manifest: the verdicts a reproduction is compared
    with (:mod:`fedrepro.app.compare`)."""
    manifest = _manifest(folder) if (folder / MANIFEST).exists() else {"format": FORMAT, "files": {}}
    kept = manifest.setdefault("claims", {})
    (folder / "claims").mkdir(parents=True, exist_ok=True)
    for name, data in sorted(records.items()):
        if not name or "/" in name or name.startswith(".") or not name.endswith(".json"):
            raise ConfigError(f"claims record name {name!r}; valid: <notebook record>.json")
        json.loads(data)  # a record is JSON, or nothing is written
        atomic_write_bytes(folder / "claims" / name, data)
        kept[name] = {"sha256": _sha(data), "bytes": len(data)}
    atomic_write_bytes(folder / MANIFEST, (json.dumps(manifest, indent=1, sort_keys=True) + "\n").encode())


def write_stages(folder: Path, stages: Mapping[str, int]) -> None:
    """Record in the manifest the seed stage each table stood at in the pass (``{"<paper>/<table>":
    seeds}``, :func:`fedrepro.papers.plan.recorded_stages`), raising none that is recorded: a notebook
    that reads the archive plans these seeds (:func:`fedrepro.papers.claim_seeds`), so that its
    verdicts rest on the seeds of the archived records."""
    if not _seed_counts(stages):
        raise ConfigError(f"seed stages {dict(stages)!r}; valid: {{'<paper>/<table>': a positive seed count}}")
    manifest = _manifest(folder) if (folder / MANIFEST).exists() else {"format": FORMAT, "files": {}}
    kept = manifest.setdefault("stages", {})
    for key, n in stages.items():
        kept[key] = max(int(kept.get(key, 0)), int(n))
    manifest["stages"] = dict(sorted(kept.items()))
    folder.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(folder / MANIFEST, (json.dumps(manifest, indent=1, sort_keys=True) + "\n").encode())


def _seed_counts(stages: Mapping) -> bool:
    """Whether ``stages`` maps table names to positive seed counts (what :func:`write_stages` keeps)."""
    return all(isinstance(k, str) and type(v) is int and v > 0 for k, v in stages.items())


def _plain_name(name: object, suffix: str) -> bool:
    """Whether ``name`` may name a file of the archive folder: a printable name ending in ``suffix``,
    without a folder part or a leading dot (so ``..`` and a NUL byte are not one)."""
    return isinstance(name, str) and name.endswith(suffix) and name.isprintable() and "/" not in name \
        and "\\" not in name and not name.startswith(".")


def _manifest(folder: Path) -> dict:
    path = folder / MANIFEST
    try:
        manifest = loads(_read(path, MAX_MANIFEST_BYTES))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise _refuse(path, f"is not JSON ({e.__class__.__name__})") from None
    files = manifest.get("files") if isinstance(manifest, dict) else None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT or not isinstance(files, dict) \
            or not all(isinstance(manifest.get(k) or {}, dict) for k in ("claims", "stages")) or not all(
            _plain_name(k, ".jsonl.gz") and isinstance(v, dict) and isinstance(v.get("sha256"), str)
            and isinstance(v.get("source") or {}, dict) for k, v in files.items()) or not all(
            _plain_name(k, ".json") and isinstance(v, dict)
            and isinstance(v.get("sha256"), str) for k, v in (manifest.get("claims") or {}).items()) \
            or not _seed_counts(manifest.get("stages") or {}):
        raise _refuse(path, f"is not a {FORMAT} manifest ({{'format', 'files': {{name: {{'sha256', ...}}}}}})")
    return manifest


@dataclass(frozen=True)
class ArchivedRun:
    """One run of the archive: its config hash, its files' text, and the archive file it came from
    with that file's pass (``source``)."""

    hash: str
    files: Mapping[str, str]
    archive_file: str
    source: Mapping[str, object]


class Archive:
    """The archive in ``folder`` (:func:`archive_folder`), read and checked on first use."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)

    def exists(self) -> bool:
        return (self.folder / MANIFEST).exists()

    @property
    def manifest(self) -> dict:
        return _manifest(self.folder)

    def _load(self) -> dict[str, ArchivedRun]:
        runs: dict[str, ArchivedRun] = {}
        for name, info in sorted(self.manifest["files"].items()):
            path = self.folder / name
            data = _read(path, MAX_FILE_BYTES)
            if _sha(data) != info["sha256"]:
                raise _refuse(path, f"does not match the sha256 in {self.folder / MANIFEST} (edited or damaged)")
            try:
                with gzip.GzipFile(fileobj=io.BytesIO(data)) as gz:
                    text = gz.read(MAX_TEXT_BYTES + 1)
            except (OSError, EOFError, zlib.error) as e:  # a damaged deflate stream is a zlib.error
                raise _refuse(path, f"is not gzip ({e})") from None
            if len(text) > MAX_TEXT_BYTES:
                raise _refuse(path, f"decompresses to more than {MAX_TEXT_BYTES} bytes")
            try:
                lines = text.decode("utf-8", errors="strict").splitlines()
            except UnicodeDecodeError as e:
                raise _refuse(path, f"is not UTF-8 text ({e.reason} at byte {e.start})") from None
            for i, line in enumerate(lines, 1):
                try:
                    e = loads(line)
                except json.JSONDecodeError:
                    raise _refuse(path, f"line {i} is not JSON") from None
                files = e.get("files") if isinstance(e, dict) else None
                if not isinstance(e, dict) or not isinstance(e.get("hash"), str) or not e["hash"].isalnum() \
                        or not isinstance(files, dict) or set(files) != set(KEPT) \
                        or not all(isinstance(v, str) for v in files.values()):
                    raise _refuse(path, f"line {i} is not a run ({{'hash', 'files': {{{', '.join(KEPT)}}}}})")
                runs[e["hash"]] = ArchivedRun(e["hash"], files, name, info.get("source") or {})
        return runs

    @property
    def runs(self) -> dict[str, ArchivedRun]:
        """Every archived run by config hash, read and checked once per process for each state of
        the manifest (a rewritten archive is read again)."""
        key = _state(self.folder)
        if key not in _LOADED:
            _LOADED.clear()  # one archive per process in practice: keep the latest
            _LOADED[key] = self._load()
        return _LOADED[key]

    def get(self, config_hash: str) -> ArchivedRun | None:
        return self.runs.get(config_hash) if self.exists() else None

    def stages(self) -> dict[str, int]:
        """The seed stage of each table in the archived pass (``{"<paper>/<table>": seeds}``; empty
        for a pass that recorded none)."""
        return dict(self.manifest.get("stages") or {}) if self.exists() else {}

    def claims(self) -> dict[str, dict]:
        """The pass's claim records by record name, each checked against the manifest's sha256."""
        out = {}
        for name, info in sorted((self.manifest.get("claims") or {}).items()):
            path = self.folder / "claims" / name
            data = _read(path, MAX_MANIFEST_BYTES * 16)
            if _sha(data) != info["sha256"]:
                raise _refuse(path, f"does not match the sha256 in {self.folder / MANIFEST} (edited or damaged)")
            try:
                record = loads(data)
            except (UnicodeDecodeError, json.JSONDecodeError):
                raise _refuse(path, "is not JSON") from None
            if not isinstance(record, dict) or not isinstance(record.get("claims"), list) \
                    or not all(isinstance(row, dict) for row in record["claims"]):
                raise _refuse(path, "is not a claims record ({'claims': [{...}, ...], ...})")
            out[name] = record
        return out


_LOADED: dict[tuple, dict[str, ArchivedRun]] = {}


def _state(folder: Path) -> tuple:
    try:
        st = os.stat(folder / MANIFEST)
        return str(folder.resolve()), st.st_mtime_ns, st.st_size, st.st_ino
    except OSError:
        return str(folder), 0, 0, 0


def check_files(run: ArchivedRun, where: Path) -> None:
    """Each of the run's files against the sha256 its ``summary.json`` records (the archive's
    manifest already vouched for the file they came in), and its config against its hash."""
    try:
        summary = loads(run.files["summary.json"])
        record = summary["files_sha256"]
        for name in KEPT:
            if name == "summary.json":
                continue
            if _sha(run.files[name].encode("utf-8")) != record[name]["sha256"]:
                raise _refuse(where, f"holds run {run.hash} whose {name} does not match its summary's sha256")
        if loads(run.files["config.json"]).get("hash") != run.hash or summary.get("config_hash") != run.hash:
            raise _refuse(where, f"holds run {run.hash} whose config is another run's")
    except (KeyError, TypeError, AttributeError, json.JSONDecodeError):  # a file that is not a run's object
        raise _refuse(where, f"holds run {run.hash} whose summary has no sha256 record, or whose summary or "
                             "config is not a run's") from None


def restore(store: RunStore, config_hash: str, archive: Archive) -> bool:
    """Write the archived run ``config_hash`` into ``store`` as a finished run marked
    :data:`~fedrepro.runs.store.ARCHIVED` (published by one rename, as the store publishes a run);
    False when the archive lacks it or the store already has a folder for it."""
    run = archive.get(config_hash)
    target = store.root / config_hash
    if run is None or os.path.lexists(target):
        return False
    check_files(run, archive.folder / run.archive_file)
    store.prepare_root()
    tmp = store.root / f".{config_hash}.{uuid.uuid4().hex[:8]}.tmp"
    tmp.mkdir()
    try:
        for name, text in run.files.items():
            (tmp / name).write_text(text, encoding="utf-8")
        marker = {"archive": str(archive.folder / run.archive_file), "source": dict(run.source)}
        (tmp / ARCHIVED).write_text(json.dumps(marker, sort_keys=True) + "\n", encoding="utf-8")
        for f in tmp.iterdir():
            f.chmod(0o444)
        try:
            os.rename(tmp, target)
        except OSError:  # another process published it first: theirs is the same run
            if not target.is_dir():
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return True


def is_archived(path: Path) -> bool:
    """Whether the run folder ``path`` was restored from the archive (it has no final state)."""
    return os.path.lexists(Path(path) / ARCHIVED)


def archived_source(path) -> dict | None:
    """The pass an archived run folder came from (its marker's ``source``: commit, CPU, date), or
    None for a run trained here. A marker that is not such a record reads as an unknown pass."""
    marker = Path(path) / ARCHIVED
    if not os.path.lexists(marker):
        return None
    try:
        source = loads(read_plain_file(marker, MAX_MANIFEST_BYTES)).get("source")
    except (RefusedFile, OSError, ValueError, AttributeError):
        source = None
    return {str(k): str(v) for k, v in source.items()} if isinstance(source, dict) else {}


def from_partial(path) -> bool:
    """Whether the run folder ``path`` was restored from a file an unfinished pass wrote (its marker's
    source says ``partial``: :func:`fedrepro.app.archive_pass.archive_pass`)."""
    return (archived_source(path) or {}).get("partial") == "True"


def stands_for_trained(path) -> bool:
    """Whether the run folder ``path`` counts as trained under :func:`policy`: a run trained here
    always; one restored from the archive under ``read``, and under ``resume`` only if it came from a
    file an unfinished pass wrote (``partial``), never under ``off``."""
    if not is_archived(Path(path)):
        return True
    mode = policy()
    return mode == "read" or (mode == "resume" and from_partial(path))


def restore_missing(cfgs: Iterable) -> int:
    """Restore from the archive of each config's profile every run of ``cfgs`` that its store lacks
    (under :func:`policy` ``read``; under ``resume`` only the runs of a file an unfinished pass wrote,
    marked ``partial``: fedrepro.app.archive_pass). Returns how many were restored."""
    mode = policy()
    if mode == "off":
        return 0
    n = 0
    for cfg in cfgs:
        archive = Archive(archive_folder(cfg.profile))
        if not archive.exists():
            continue
        store = RunStore(cfg.runs_dir)
        if mode == "resume":
            run = archive.get(cfg.hash())
            if run is None or not run.source.get("partial"):
                continue
        if store.status(cfg) == "missing" and restore(store, cfg.hash(), archive):
            n += 1
    return n
