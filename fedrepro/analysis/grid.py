"""Analyses over a whole ``run_grid`` table, cached like runs.

A probe of a finished run is a pure function of the run and the probe config, so its result is
stored beside the runs (``<runs_dir>/_analysis/<kind>/<run-hash>-<config-hash>.json``) and reused;
run folders themselves stay immutable.

A cache is data only, whoever wrote it: JSON, never unpickled or executed. It records whose result
it is (the analysis, its probe config, the run's hash and the run's content hash: the sha256 of
the run's stored summary, whose record holds every file's sha256, and of its meta, which says when
it trained), and it is served only when all of them are today's and every declared field has its
type. Anything else (an empty, torn, binary or oversized file, a field missing or of another type,
a cache of an earlier training of the same config, one that is not a plain file) is computed again
with a one-line warning and overwritten.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import warnings
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Mapping

import pandas as pd
from tqdm.auto import tqdm

from ..env.jsonfiles import NUMBER, MayLack, Obj, OneOf, field_problem
from ..fl.device import torch_threads
from ..errors import FedreproError, ResourceError
from ..runs.fingerprint import source_digest
from ..runs.store import RefusedFile, RunResult, RunStore, atomic_write_json, read_json, read_plain_file
from .probe import ProbeConfig, linear_probe, mismatch_probe, summarize_probe

# The layout of a cache file; a file of another (or none: the plain summaries written before) is
# computed again. Format 3 records the analysis code that computed it.
CACHE_FORMAT = 3
# The modules that compute a cached analysis from a run's final state: a cache computed by other code
# than today's is computed again (issue 53, class 6), as a stored run is retrained when its own code
# changes (fedrepro.runs.fingerprint).
_CODE = ("probe.py", "embedding.py", "grid.py")
# A summary is a few hundred bytes: anything much larger is not one (and is not read whole).
MAX_CACHE_BYTES = 1 << 20

# The fields of each analysis's result and their types. A number the analysis could not compute
# (no participating client) is NaN, which JSON stores as null: such fields are declared MayLack,
# and _NEEDED says which of them must still be present.
_PROBE_FIELDS: dict[str, Any] = {
    "clients": int, "origin": MayLack(NUMBER), "probe": MayLack(NUMBER), "match": MayLack(NUMBER),
    "mismatch": MayLack(NUMBER), "probe_minus_match": MayLack(NUMBER), "origin_train": MayLack(NUMBER),
    "probe_train": MayLack(NUMBER), "match_train": MayLack(NUMBER)}
_LINEAR_FIELDS: dict[str, Any] = {"on": str, "probe": MayLack(NUMBER), "probe_weighted": MayLack(NUMBER)}
_NEEDED = {"mismatch_probe": ("origin", "probe", "match", "mismatch", "probe_minus_match"),
           "linear_probe": ("probe", "probe_weighted")}


def _fields(kind: str) -> tuple[dict[str, Any], tuple[str, ...]]:
    """The declared fields of analysis ``kind``'s result and those that must be present."""
    base = "mismatch_probe" if kind == "mismatch_probe" else "linear_probe"
    fields = _PROBE_FIELDS if base == "mismatch_probe" else {**_LINEAR_FIELDS,
                                                             "on": OneOf((kind.removeprefix("linear_probe_"),))}
    return fields, _NEEDED[base]


@lru_cache(maxsize=1)
def analysis_code() -> str:
    """The digest of what the analysis modules (:data:`_CODE`) do: their syntax trees without
    docstrings (:func:`fedrepro.runs.fingerprint.source_digest`), so a comment leaves caches valid."""
    here = Path(__file__).parent
    digests = "".join(source_digest((here / name).read_text()) for name in _CODE)
    return hashlib.sha256(digests.encode()).hexdigest()[:16]


def run_content(result: RunResult) -> str:
    """The sha256 of what identifies this training of a run: its ``summary.json`` as stored (scores and,
    since store format 2, every file's sha256, ``final_state.pt``'s included) and its ``meta.json``
    (when it started). Both are checked against the run's record first, so a damaged run is the
    store's one-line error, not a key; a run trained again under the same config has another."""
    _ = result.summary  # checks summary.json against its record
    blob = json.dumps({"summary": read_json(result.path / "summary.json"), "meta": result.meta}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


def _probe_config(cfg: ProbeConfig) -> dict:
    """``cfg`` as it reads back from JSON (tuples become lists)."""
    return json.loads(json.dumps(dataclasses.asdict(cfg), sort_keys=True))


def _key(run_path: Path, cfg: ProbeConfig) -> str:
    blob = json.dumps(dataclasses.asdict(cfg), sort_keys=True)
    return f"{run_path.name}-{hashlib.sha256(blob.encode()).hexdigest()[:12]}"


def _read_bounded(path: Path) -> bytes | str:
    """The bytes of the cache file ``path``, or why it is not one to read (the store's
    :func:`~fedrepro.runs.store.read_plain_file`: a symlink, which could point at /dev/zero, a FIFO,
    which would block, or more than :data:`MAX_CACHE_BYTES`)."""
    try:
        return read_plain_file(path, MAX_CACHE_BYTES)
    except FileNotFoundError as e:
        return f"cannot be read ({e.strerror or e})"
    except RefusedFile as e:
        return str(e)


def _checked(path: Path, kind: str, run: str, content: str, probe_cfg: dict) -> dict | str:
    """The result in the cache file ``path`` when it is the one of analysis ``kind`` with
    ``probe_cfg`` on the run ``run`` whose content hash is ``content``, with every declared field of
    its type; otherwise why it is not (a line for the warning)."""
    data = _read_bounded(path)
    if isinstance(data, str):
        return data
    if not data.strip():
        return "is empty"
    try:
        obj = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
        return f"is not valid JSON ({type(e).__name__}: {str(e)[:80]})"
    if not isinstance(obj, dict) or obj.get("format") != CACHE_FORMAT:
        return f"is not an analysis cache of format {CACHE_FORMAT} (written by another version, or damaged)"
    fields, needed = _fields(kind)
    problem = field_problem(obj, {"format": int, "analysis": str, "run": str, "run_content": str,
                                  "code": str, "probe_config": dict, "result": Obj(fields)}, "it")
    if problem is None:
        missing = [k for k in needed if k not in obj["result"]]
        problem = f"has no {', '.join(map(repr, missing))} in its result" if missing else None
    if problem is not None:
        return problem.removeprefix("it ")
    if obj["analysis"] != kind or obj["run"] != run or obj["probe_config"] != probe_cfg:
        return (f"holds analysis {obj['analysis']!r} of run {obj['run']!r} with another probe config, not "
                f"{kind!r} of run {run!r} with this one" if obj["probe_config"] != probe_cfg else
                f"holds analysis {obj['analysis']!r} of run {obj['run']!r}, not {kind!r} of run {run!r}")
    if obj["run_content"] != content:
        return "was computed for another training of this run (retrained or replaced since)"
    if obj["code"] != analysis_code():
        return "was computed by other analysis code than today's (fedrepro/analysis changed since)"
    return _numbers(obj["result"], fields)


def _numbers(result: Mapping, fields: Mapping[str, Any]) -> dict:
    """``result`` as the analysis returns it: a number field stored as null (NaN) is NaN again."""
    return {k: (math.nan if v is None and isinstance(fields.get(k), MayLack) else v) for k, v in result.items()}


def _writable_dir(folder: Path, runs_dir: Path) -> bool:
    """Whether ``folder`` (under ``runs_dir``) is one to write a cache into: none of its parts below
    ``runs_dir`` a symbolic link, which whoever shares the store could aim elsewhere."""
    p = folder
    while p != runs_dir and p != p.parent:
        if p.is_symlink():
            return False
        p = p.parent
    return True


def _cached(result: RunResult, kind: str, cfg: ProbeConfig, compute: Callable[[], dict]) -> dict:
    runs_dir = result.path.parent
    cache = runs_dir / "_analysis" / kind / f"{_key(result.path, cfg)}.json"
    content, probe_cfg = run_content(result), _probe_config(cfg)
    if os.path.lexists(cache):
        got = _checked(cache, kind, result.path.name, content, probe_cfg)
        if isinstance(got, dict):
            return got
        warnings.warn(f"analysis cache {cache} {got}; computing it again", stacklevel=3)
    with torch_threads(result.config.threads):  # the run's own count: same numbers in any process
        summary = compute()
    record = {"format": CACHE_FORMAT, "analysis": kind, "run": result.path.name, "run_content": content,
              "code": analysis_code(), "probe_config": probe_cfg, "result": summary}
    try:
        if not _writable_dir(cache.parent, runs_dir):
            raise ResourceError(f"{cache.parent} is a symbolic link or lies under one")
        cache.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_json(cache, record)
    except (OSError, ResourceError) as e:  # the result stands; only its reuse is lost
        warnings.warn(f"analysis cache {cache} not written ({e}); it is computed again next time", stacklevel=3)
    return summary


def probe_run(result: RunResult, cfg: ProbeConfig = ProbeConfig()) -> dict:
    """:func:`summarize_probe` of one run's mismatch probe, computed once and cached."""
    return _cached(result, "mismatch_probe", cfg, lambda: summarize_probe(mismatch_probe(result, cfg)))


def linear_probe_run(result: RunResult, on: str = "features", cfg: ProbeConfig = ProbeConfig()) -> dict:
    """Mean over participating clients of :func:`linear_probe` on ``on`` (and the weighted mean),
    computed once and cached."""
    def compute() -> dict:
        df = linear_probe(result, on, cfg)
        df = df[~df["held_out"]]
        return {"on": on, "probe": float(df["probe"].mean()),
                "probe_weighted": float((df["probe"] * df["n_test"]).sum() / df["n_test"].sum())}

    return _cached(result, f"linear_probe_{on}", cfg, compute)


def probe_grid(table: pd.DataFrame, cfg: ProbeConfig = ProbeConfig(), progress: bool = True) -> pd.DataFrame:
    """Add the mismatch probe's client means (``origin``, ``probe``, ``match``, ``mismatch``) to every
    row of a :func:`fedrepro.run_grid` table."""
    rows = []
    for _, row in tqdm(list(table.iterrows()), desc="probes", disable=not progress, leave=False):
        s = probe_run(RunResult(Path(row["path"])), cfg)
        rows.append({k: s[k] for k in ("origin", "probe", "match", "mismatch", "probe_minus_match")})
    return pd.concat([table.reset_index(drop=True), pd.DataFrame(rows)], axis=1)


def linear_probe_grid(table: pd.DataFrame, on: str = "phi", cfg: ProbeConfig = ProbeConfig(),
                      column: str | None = None, progress: bool = True) -> pd.DataFrame:
    """Add the mean linear-probe accuracy on representation ``on`` (``"phi"``, ``"features"``,
    ``"features_rho"``) as column ``column`` (default ``probe_<on>``) to a run table."""
    column = column or f"probe_{on}"
    vals = [linear_probe_run(RunResult(Path(p)), on, cfg)["probe"]
            for p in tqdm(list(table["path"]), desc=f"probes on {on}", disable=not progress, leave=False)]
    return table.reset_index(drop=True).assign(**{column: vals})


# The cached analyses a notebook's plan may name (``fedrepro.papers.plan.Need.analyses``): ``fedrepro
# reproduce`` computes them in its worker pool as soon as their run is stored, so that the notebook
# finds them cached and only draws.
CACHED = {
    "mismatch_probe": lambda result: probe_run(result),
    # FedPFT notebook 02's second recipe: a smaller step for longer, to show the probe has converged.
    "mismatch_probe:lr0.01x1000": lambda result: probe_run(result, ProbeConfig(lr=0.01, epochs=1000)),
    "linear_probe:phi": lambda result: linear_probe_run(result, "phi"),
    "linear_probe:features": lambda result: linear_probe_run(result, "features"),
    "linear_probe:features_rho": lambda result: linear_probe_run(result, "features_rho"),
}


def check_cached(names) -> None:
    """Fail, naming the valid ones, when a name is not one of :data:`CACHED`."""
    for name in names:
        if name not in CACHED:
            raise FedreproError(f"unknown analysis {name!r}; valid: {', '.join(CACHED)}")


def compute_cached(name: str, cfg) -> None:
    """Analysis ``name`` of :data:`CACHED` on the stored run of ``cfg`` (cached beside the run)."""
    CACHED[name](RunStore(cfg.runs_dir).load(cfg))
