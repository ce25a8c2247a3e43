"""``fedrepro verify``: train stored runs again in fresh processes and compare every number.

A sample of finished runs (chosen by config filters, or N at random with a seed) is trained anew
into a scratch folder by the pool's spawned workers, each at the thread count its config fixes, and
each run's per-round and per-client metrics are compared with the stored ones:

- **identical**: every metric equal, bit for bit, and every tensor and value of the final state
  (``final_state.pt``: the trained models, which no metric line shows whole);
- **rounding**: not identical, but no metric differs by more than :data:`ROUNDING`, and no value of
  the final state by more than :data:`STATE_ROUNDING` of its size (float sums taken in another
  order);
- **different**: a metric or a state value differs by more; the largest difference is reported;
- **damaged**: the stored run fails its own checks (every file against its recorded sha256, its
  config against its folder name, a final state that loads as tensors only) and is not trained
  again; the report names the file.

Timings are not compared. Each report line also says where the stored run was made (CPU model,
threads, torch build, allocator, commit) and where it was verified.
"""
from __future__ import annotations

import math
import random
import reprlib
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

from ..config import RunConfig, from_dict
from ..errors import ConfigError, CorruptCacheError
from ..env.host import cpu_model
from ..execute.local import run_pool
from ..env.jsonfiles import loads
from ..runs.archive import MANIFEST, Archive, archive_folder, check_files, restore
from ..runs.store import FINISHED_FILES, RunResult, RunStore, read_json, read_jsonl, read_run_file

ROUNDING = 1e-9
# A final state's values after float sums in another order: within this share of their size
# (|a - b| <= STATE_ROUNDING * max(1, |a|)). A model's float32 weights carry a few units in the last
# place of such noise; a state swapped for another run's differs by orders of magnitude more.
STATE_ROUNDING = 1e-4
# "damaged": the stored run fails its own checks (a file against its recorded sha256, its config
# against its folder name); it is not trained again, as there is nothing trustworthy to compare.
OUTCOMES = ("identical", "rounding", "different", "damaged")


@dataclass(frozen=True)
class Verified:
    hash: str
    outcome: str
    max_diff: float        # the largest absolute difference of a metric (0 when identical)
    worst: str             # where it is: "rounds.jsonl round 7 acc_mean"
    made_on: str           # the stored run's machine and build
    verified_on: str


def _is_timing(key: str) -> bool:
    return key.startswith("time_") or key.endswith("_s")


def _state_differences(a, b, where: str) -> tuple[bool, float, str] | str:
    """How two final states (nested dicts, lists and tensors) differ: ``(identical, largest relative
    difference, where)``, or a text saying where their structure differs."""
    import torch

    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)) or a.shape != b.shape \
                or a.dtype != b.dtype:
            return f"{where}: {_kind(a)} stored, {_kind(b)} trained"
        if _same_bits(a, b):
            return True, 0.0, ""
        if not a.is_floating_point():
            return False, math.inf, where
        x, y = a.double(), b.double()
        both_nan = torch.isnan(x) & torch.isnan(y)
        diff = ((x - y).abs() / x.abs().clamp_min(1.0)).masked_fill(both_nan, 0.0)
        d = float(diff.max()) if diff.numel() else 0.0
        return False, (math.inf if math.isnan(d) else d), where
    if isinstance(a, dict) and isinstance(b, dict):
        if a.keys() != b.keys():
            return f"{where}: keys {sorted(map(str, a))[:5]} stored, {sorted(map(str, b))[:5]} trained"
        parts = [(k, a[k], b[k]) for k in a]
    elif isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        if len(a) != len(b):
            return f"{where}: {len(a)} entries stored, {len(b)} trained"
        parts = list(zip(range(len(a)), a, b))
    else:
        same = a == b or (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b))
        return (True, 0.0, "") if same else f"{where}: {a!r} stored, {b!r} trained"
    identical, worst, at = True, 0.0, ""
    for k, x, y in parts:
        got = _state_differences(x, y, f"{where}[{k!r}]")
        if isinstance(got, str):
            return got
        identical &= got[0]
        if not got[0] and (got[1] > worst or not at):
            worst, at = got[1], got[2]
    return identical, worst, at


def _same_bits(a, b) -> bool:
    """Whether two tensors of one shape and dtype hold the same bits: "identical" means bit for bit,
    so a NaN equals the same NaN (``torch.equal`` says it differs, which made a state holding one
    read as "rounding") and 0.0 is not -0.0."""
    import torch

    x, y = (t.detach().cpu().contiguous().reshape(-1) for t in (a, b))
    try:
        return torch.equal(x.view(torch.uint8), y.view(torch.uint8))
    except RuntimeError:  # a dtype without a byte view (none a state holds today): compare values
        return torch.equal(x, y)


def _kind(v) -> str:
    shape = getattr(v, "shape", None)
    return type(v).__name__ if shape is None else f"{type(v).__name__}{list(shape)} {v.dtype}"


def compare_states(stored: Path, fresh: Path) -> tuple[str, float, str]:
    """``(outcome, largest relative difference, where)`` of two run folders' final states, each read
    as tensors only and checked against its recorded sha256 (CorruptCacheError otherwise)."""
    got = _state_differences(RunResult(stored).final_state(), RunResult(fresh).final_state(), "final_state.pt")
    if isinstance(got, str):
        return "different", math.inf, got
    identical, worst, where = got
    if identical:
        return "identical", 0.0, ""
    return ("rounding" if worst <= STATE_ROUNDING else "different"), worst, where


def compare_runs(stored: Path, fresh: Path) -> tuple[str, float, str]:
    """``(outcome, largest difference, where)`` of two run folders: their rounds and clients tables,
    then their final states (:func:`compare_states`)."""
    outcome, diff, where = compare_lines(stored, fresh)
    if outcome == "different" or RunResult(stored).archived:  # the archive keeps no final state
        return outcome, diff, where
    state, sdiff, swhere = compare_states(stored, fresh)
    if state == "identical":
        return outcome, diff, where
    if state == "different" or outcome == "identical":
        return state, sdiff, swhere
    return outcome, diff, where  # both within rounding: the metrics' difference is reported


def compare_lines(stored: Path, fresh: Path) -> tuple[str, float, str]:
    """``(outcome, largest difference, where)`` of two run folders' rounds and clients tables."""
    worst, where, identical = 0.0, "", True
    for name in ("rounds.jsonl", "clients.jsonl"):
        a, b = read_jsonl(stored / name), read_jsonl(fresh / name)  # raw: a hand-edited file is read too
        for side, rows in (("stored", a), ("trained", b)):
            odd = next((i for i, r in enumerate(rows) if not isinstance(r, dict)), None)
            if odd is not None:  # a line of a hand-edited (or planted) file that is no row: a difference
                return "different", math.inf, f"{name} row {odd} {side} is {reprlib.repr(rows[odd])}, not a row"
        if len(a) != len(b):
            return "different", math.inf, f"{name}: {len(a)} rows stored, {len(b)} trained"
        for i, (ra, rb) in enumerate(zip(a, b)):
            for key in sorted(set(ra) | set(rb)):
                if _is_timing(key):
                    continue
                va, vb = ra.get(key), rb.get(key)
                if va == vb or (isinstance(va, float) and isinstance(vb, float) and math.isnan(va) and math.isnan(vb)):
                    continue
                identical = False
                if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (va, vb)):
                    return "different", math.inf, f"{name} row {i} {key}: {va!r} stored, {vb!r} trained"
                d = abs(float(va) - float(vb))
                if d > worst or not where:
                    worst, where = d, f"{name} round {ra.get('round')} {key}" + \
                        (f" client {ra['client']}" if "client" in ra else "")
    if identical:
        return "identical", 0.0, ""
    return ("rounding" if worst <= ROUNDING else "different"), worst, where


# meta.json fields that say when a run trained and with which allocator: two trainings of one
# config on one machine differ only there (and in timings); HOST_META says on which machine and
# checkout, which differs between the nodes of a cluster.
VOLATILE_META = ("started", "finished", "allocator")
HOST_META = ("python", "platform", "cpu", "torch_git", "git_commit", "git_dirty")


def _without(d: dict, keys) -> dict:
    return {k: v for k, v in d.items() if k not in keys}


def file_differences(a: Path, b: Path, across_hosts: bool = False) -> list[str]:
    """Where two folders of one config's finished run differ: ``[]`` when every file is equal bit
    for bit but for timings (``time_*``, ``*_s``), :data:`VOLATILE_META` (and :data:`HOST_META`
    with ``across_hosts``), the runs folder named in ``config.json`` and the sha256 record of the
    files that hold those."""
    a, b = Path(a), Path(b)
    out = []
    names = [sorted(f.name for f in p.iterdir()) for p in (a, b)]
    if a.name != b.name:
        out.append(f"folder names {a.name} and {b.name}")
    if names[0] != names[1] or names[0] != sorted(FINISHED_FILES):
        out.append(f"files {names[0]} and {names[1]}")
        return out
    for name in ("final_state.pt", "clients.jsonl"):
        if read_run_file(a / name) != read_run_file(b / name):
            out.append(name)
    timeless = [[_without(r, [k for k in r if _is_timing(k)]) for r in read_jsonl(p / "rounds.jsonl")] for p in (a, b)]
    if timeless[0] != timeless[1]:
        out.append("rounds.jsonl")
    configs = [read_json(p / "config.json") for p in (a, b)]
    for c in configs:
        c["config"].pop("runs_dir", None)
    if configs[0] != configs[1]:
        out.append("config.json")
    skip = VOLATILE_META + (HOST_META if across_hosts else ())
    if _without(read_json(a / "meta.json"), skip) != _without(read_json(b / "meta.json"), skip):
        out.append("meta.json")
    summaries = [read_json(p / "summary.json") for p in (a, b)]
    summaries = [_without(s, [k for k in s if _is_timing(k)] + ["files_sha256"]) for s in summaries]
    if summaries[0] != summaries[1]:
        out.append("summary.json")
    return out


def _provenance(meta: dict) -> str:
    return (f"{meta.get('cpu', '?')}, {meta.get('torch_threads', '?')} thread(s), torch {meta.get('torch', '?')}, "
            f"allocator {meta.get('allocator', '?')}, commit {(meta.get('git_commit') or '?')[:10]}")


def stored_runs(runs_dir: Path) -> list[Path]:
    return sorted(p for p in Path(runs_dir).iterdir() if p.is_dir() and (p / "summary.json").is_file()
                  and not p.name.startswith("."))


def _matches(cfg: dict, where: dict[str, str]) -> bool:
    for key, want in where.items():
        node = cfg
        for part in key.split("."):
            if not isinstance(node, dict) or part not in node:
                return False
            node = node[part]
        if str(node) != want:
            return False
    return True


def parse_where(items: Iterable[str]) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"--where {item!r}: expected key=value with a dotted config key, e.g. method.name=fedavg")
        out[key] = value
    return out


def _selected(folder: Path, where: dict[str, str]) -> bool:
    """Whether the run matches ``where``; a run whose config cannot be read is selected, so that it
    is reported damaged rather than left out unseen."""
    try:
        stored = read_json(folder / "config.json")
    except CorruptCacheError:
        return True
    if not isinstance(stored, dict) or not isinstance(stored.get("config"), dict):
        return True
    return _matches(stored["config"], where)


def damaged(folder: Path) -> str | None:
    """Why the stored run at ``folder`` cannot be verified (a file that fails its recorded sha256 or
    size, a config that is not its folder's), or None when it passes every check."""
    res = RunResult(folder)
    problem = res.cheap_check()
    if problem is not None:
        return problem
    try:
        res.verify(deep=True)
        if not res.archived:
            res.final_state()  # tensors only: a pickled object in it, whatever its record, is damage
    except CorruptCacheError as e:
        return str(e)
    return None


def _meta_or_empty(folder: Path) -> dict:
    try:
        meta = read_json(folder / "meta.json")
    except CorruptCacheError:
        return {}
    return meta if isinstance(meta, dict) else {}


def choose(runs_dir: Path, where: dict[str, str] | None = None, n: int | None = None, seed: int = 0) -> list[Path]:
    """Stored finished runs whose config matches every ``where`` (dotted key -> value as text), then
    ``n`` of them drawn with ``seed`` (all when ``n`` is None)."""
    if n is not None and n < 1:
        raise ConfigError(f"n={n}; valid: a positive number of runs")
    if not Path(runs_dir).is_dir():
        raise ConfigError(f"no runs folder at {runs_dir} (--runs-dir or $FEDREPRO_RUNS name another)")
    found = [p for p in stored_runs(runs_dir) if _selected(p, where or {})]
    if not found:
        raise ConfigError(f"no finished run in {runs_dir} matches {where or 'anything'}")
    if n is not None and n < len(found):
        found = sorted(random.Random(seed).sample(found, n))
    return found


def sample_archive(archived: Archive, n: int, seed: int = 0) -> list[str]:
    """``n`` run hashes of the archive, stratified: drawn in turn from each (archive file, method)
    group, each group shuffled with ``seed``, so that every paper and every method family is in the
    sample before any of them has two (all runs when ``n`` is at least their number)."""
    if n < 1:
        raise ConfigError(f"--sample {n}; valid: a positive number of runs")
    groups: dict[tuple[str, str], list[str]] = {}
    for h, run in sorted(archived.runs.items()):
        groups.setdefault((run.archive_file, _archived_method(archived, run)), []).append(h)
    rng = random.Random(seed)
    queues = [rng.sample(hs, len(hs)) for _, hs in sorted(groups.items())]
    rng.shuffle(queues)
    out: list[str] = []
    while len(out) < n and any(queues):
        for q in queues:
            if q and len(out) < n:
                out.append(q.pop())
    return out


def _archived_method(archived: Archive, run) -> str:
    """The method of an archived run, read after the run's own checks (its files against its summary's
    sha256, its config against its hash): a damaged or planted line is the archive's one-line error."""
    where = archived.folder / run.archive_file
    check_files(run, where)
    try:
        return str(loads(run.files["config.json"])["config"]["method"]["name"])
    except (KeyError, TypeError, ValueError):
        raise CorruptCacheError(f"reference archive file {where} holds run {run.hash} whose config names no "
                                "method; restore the file from git (or set FEDREPRO_ARCHIVE=off)") from None


def verify_archive(profile: str, n: int, seed: int = 0, workers: int = 1, progress: bool = True) -> list[Verified]:
    """Retrain a stratified sample of ``n`` runs of the reference archive of ``profile``
    (:func:`sample_archive`) in fresh processes and compare their rounds and clients tables with the
    archived ones (the archive keeps no final state)."""
    archived = Archive(archive_folder(profile))
    if not archived.exists():
        raise ConfigError(f"no reference archive at {archived.folder}; valid: a profile whose archive is committed "
                          f"(results/<profile>/{MANIFEST})")
    hashes = sample_archive(archived, n, seed)
    with tempfile.TemporaryDirectory(prefix="fedrepro-archived-") as held:
        store = RunStore(held)
        for h in hashes:
            restore(store, h, archived)
        return verify([Path(held) / h for h in hashes], workers=workers, progress=progress)


def verify(paths: Sequence[Path], workers: int = 1, progress: bool = True) -> list[Verified]:
    """Train each stored run of ``paths`` again in fresh worker processes and compare."""

    here = f"{cpu_model()}"
    bad = {Path(p).name: why for p in paths if (why := damaged(Path(p))) is not None}
    with tempfile.TemporaryDirectory(prefix="fedrepro-verify-") as scratch:
        cfgs: list[tuple[Path, RunConfig]] = []
        for p in paths:
            if Path(p).name in bad:
                continue
            cfg = from_dict(read_json(Path(p) / "config.json")["config"])
            cfgs.append((Path(p), cfg.replace(runs_dir=scratch, progress=False)))
        report = run_pool({p.name: c for p, c in cfgs}, workers=workers, progress=progress,
                          pending={p.name for p, _ in cfgs})
        out = []
        for p, cfg in cfgs:
            meta = RunResult(p).meta
            if p.name in report.failed:
                out.append(Verified(p.name, "different", math.inf, f"training failed: {report.failed[p.name]}",
                                    _provenance(meta), here))
                continue
            try:
                outcome, diff, where = compare_runs(p, Path(scratch) / p.name)
            except CorruptCacheError as e:  # a file changed since it was checked above
                out.append(Verified(p.name, "damaged", math.inf, str(e), _provenance(meta), here))
                continue
            out.append(Verified(p.name, outcome, diff, where, _provenance(meta), here))
    out += [Verified(p.name, "damaged", math.inf, bad[p.name], _provenance(_meta_or_empty(p)), here)
            for p in map(Path, paths) if p.name in bad]
    order = {Path(p).name: i for i, p in enumerate(paths)}
    return sorted(out, key=lambda v: order[v.hash])


def format_report(results: Sequence[Verified]) -> str:
    lines = []
    for v in results:
        if v.outcome == "damaged":
            lines.append(f"{v.hash}: damaged, not trained again: {v.worst}")
            continue
        detail = "" if v.outcome == "identical" else f" (largest difference {v.max_diff:.3g} at {v.worst})"
        lines.append(f"{v.hash}: {v.outcome}{detail}; made on {v.made_on}")
    counts = {o: sum(v.outcome == o for v in results) for o in OUTCOMES}
    runs = f"{len(results)} run" + ("" if len(results) == 1 else "s")
    lines.append(f"{runs}: " + ", ".join(f"{n} {o}" for o, n in counts.items())
                 + (f"; verified on {results[0].verified_on}" if results else ""))
    return "\n".join(lines)
