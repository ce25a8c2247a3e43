"""The stored runs as a table: what ``fedrepro runs`` and ``fedrepro show`` print, for notebooks too.

:func:`list_runs` reads only each run folder's small JSON files (``config.json``, ``summary.json``,
``meta.json``) and never imports torch, so listing thousands of runs takes a second or two::

    import fedrepro
    runs = fedrepro.list_runs(method="fedavg", where={"data.partition_args.alpha": 0.1})
    runs[["method", "seed", "best_acc_mean", "path"]]

A run's **status** is read from the store's markers (:mod:`fedrepro.runs.store`):

- ``finished``: ``summary.json`` is in place;
- ``diverged``: finished, but training produced NaN at ``diverged_round`` (the rounds before it
  are stored; its final accuracy is empty). This is how a run fails in the store;
- ``running``: no summary yet and another process holds the run's lock;
- ``interrupted``: no summary and nobody holds the lock: the process was killed or raised. The
  store cannot tell the two apart; ``fedrepro run`` (or ``fedrepro.run``) resumes it from its
  checkpoint;
- ``damaged``: ``config.json`` or ``summary.json`` is missing or unreadable, ``config.json`` names
  another run than its folder, or a finished run fails the cheap checks of its recorded hashes
  and sizes (:func:`damage`).

Accuracies are fractions in [0, 1] here and in CSV exports; the CLI prints them as percentages.
"""
from __future__ import annotations

import hashlib
import json
import logging
import numbers
import os
import reprlib
import stat
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from ..env.atomic import atomic_write_bytes
from ..env.settings import output_path
from ..errors import ConfigError, CorruptCacheError
from ..config import FREE_DICTS, CONFIG_SECTIONS, RunConfig
from ..config import yaml_load
from .columns import blank_untested, order_round_columns
from ..env.jsonfiles import loads
from .store import RunResult, RunStore, open_folder, read_run_file

log = logging.getLogger("fedrepro")

STATUSES = ("finished", "diverged", "running", "interrupted", "damaged")

# Partition arguments that say what kind of split it is (sizes are left out of the short label).
_KEY_PARTITION_ARGS = {"alpha": "α", "classes_per_client": "C", "clients_per_domain": "clients/domain",
                       "shots": "shots"}
# Columns of a run table in reading order; every best_*/final_* metric of the summaries follows.
RUN_COLUMNS = ("hash", "method", "dataset", "partition", "partition_key", "model", "clients", "seed", "profile",
               "status", "rounds_done", "rounds_total", "best_acc_mean", "best_round", "final_acc_mean",
               "started", "finished", "path")
_INT_COLUMNS = ("clients", "seed", "rounds_done", "rounds_total", "best_round", "diverged_round")
# Per-round metrics shown first (the rest follow alphabetically).
# The run columns a per-round export repeats on every row.
_ID_COLUMNS = ("hash", "method", "dataset", "partition", "partition_key", "seed", "profile", "status")


# --------------------------------------------------------------------------------------------
# Filters on the stored (resolved) config


def parse_where(items: Iterable[str] | Mapping[str, Any] | None) -> dict[str, Any]:
    """``["method.name=fedavg", "data.partition_args.alpha=0.1"]`` -> ``{key: value}``, each value read
    as YAML (``0.1`` a number, ``null`` None, ``fedavg`` text), as ``--set`` reads them. Keys are
    checked against the config's sections, so a misspelled key is an error, not an empty table."""
    if items is None:
        return {}
    if isinstance(items, Mapping):
        out = {str(k): v for k, v in items.items()}
    else:

        out = {}
        for item in items:
            key, sep, value = str(item).partition("=")
            key = key.strip()
            if not sep or not key:
                raise ConfigError(f"--where {item!r}: expected key=value with a dotted config key, "
                                  "e.g. method.name=fedavg or data.partition_args.alpha=0.1")
            out[key] = yaml_load(value, f"--where {key}={value!r}") if value.strip() else None
    for key in out:
        _check_key(key)
    return out


def _check_key(key: str) -> None:
    parts = key.split(".")
    top = {f.name for f in fields(RunConfig)}
    if parts[0] not in top:
        raise ConfigError(f"unknown config key {key!r} in --where; valid keys start with: {', '.join(sorted(top))}")
    if parts[0] in CONFIG_SECTIONS:
        names = {f.name for f in fields(CONFIG_SECTIONS[parts[0]])}
        if len(parts) < 2 or parts[1] not in names:
            raise ConfigError(f"unknown config key {key!r} in --where; valid keys: "
                              + ", ".join(f"{parts[0]}.{n}" for n in sorted(names)))
        if len(parts) > 2 and tuple(parts[:2]) not in FREE_DICTS:
            raise ConfigError(f"unknown config key {key!r} in --where: {parts[0]}.{parts[1]} has no sub-keys")
    elif len(parts) > 1:
        raise ConfigError(f"unknown config key {key!r} in --where: {parts[0]} has no sub-keys")


_MISSING = object()


def _lookup(cfg: Mapping[str, Any], key: str) -> Any:
    node: Any = cfg
    for part in key.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return _MISSING
        node = node[part]
    return node


def _method_default(method: str, arg: str) -> Any:
    """A method argument's default (``method.args`` stores only the arguments that were set).
    Imports the method registry, so only a ``--where method.args.*`` filter pays for torch."""
    from ..methods import METHODS
    import dataclasses


    if method not in METHODS:
        return _MISSING
    for f in dataclasses.fields(METHODS.get(method).Params):
        if f.name == arg:
            if f.default is not dataclasses.MISSING:
                return f.default
            if f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
                return f.default_factory()  # type: ignore[misc]
    return _MISSING


def _same(have: Any, want: Any) -> bool:
    if have is _MISSING:
        return False
    if isinstance(want, str) and not isinstance(have, str):
        return str(have) == want  # "--where seed=0" from a mapping that holds text
    return have == want


def matches(cfg: Mapping[str, Any], where: Mapping[str, Any]) -> bool:
    """Whether a stored config (a nested dict) has every ``where`` value (dotted keys)."""
    for key, want in where.items():
        have = _lookup(cfg, key)
        if have is _MISSING and key.startswith("method.args."):
            have = _method_default(str(cfg.get("method", {}).get("name")), key.split(".", 2)[2])
        if not _same(have, want):
            return False
    return True


# --------------------------------------------------------------------------------------------
# Reading run folders (small files only)


def _read_json(path: Path) -> Any:
    # Through the store's reader: a link to /dev/zero or a FIFO in place of a run file is not read.
    try:
        return loads(read_run_file(path))
    except (OSError, CorruptCacheError, UnicodeDecodeError, json.JSONDecodeError):
        return None


def _lock_held(runs_dir: Path, name: str) -> bool:
    """Whether a process holds the run's lock, tested with a shared non-blocking ``flock`` on the
    existing lock file (opened read-only: listing never creates or writes anything)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover  (no locks without fcntl: see store.RunLock)
        return False
    # Without following a link or blocking (a FIFO would hang the listing), and on regular files only.
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        # Inside the lock folder opened without following a link: a .locks aimed at another folder
        # must not make a run there read as running (RunLock refuses to lock through one).
        folder = open_folder(runs_dir / ".locks", "lock folder")
    except (OSError, CorruptCacheError):
        return False
    try:
        fd = os.open(f"{name}.lock", flags, dir_fd=folder)
    except OSError:
        return False
    finally:
        os.close(folder)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def partition_key(partition_args: Mapping[str, Any] | None) -> str:
    """The arguments that name the kind of split, e.g. ``"α=0.5"`` (empty when there are none)."""
    args = partition_args or {}
    return " ".join(f"{label}={args[k]}" for k, label in _KEY_PARTITION_ARGS.items()
                    if k in args and args[k] is not None)


def _number(v: Any) -> float:
    return float("nan") if v is None or isinstance(v, bool) or not isinstance(v, (int, float)) else float(v)


def _whole(v: Any) -> int | None:
    """``v`` as a cell of an integer column: a whole number within int64, else empty. A damaged or
    planted file's 2.5, 1e30 or infinity must leave its own cell empty, not break the whole table."""
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (numbers.Integral, numbers.Real)):
        return None
    if not isinstance(v, numbers.Integral) and not float(v).is_integer():
        return None
    return int(v) if -2 ** 63 <= v < 2 ** 63 else None


def _mtime(f: Path) -> str | None:
    from datetime import datetime, timezone

    try:
        return datetime.fromtimestamp(f.stat().st_mtime, timezone.utc).isoformat()
    except OSError:
        return None


def _status(folder: Path, summary: Any) -> str:
    if isinstance(summary, dict):
        return "diverged" if summary.get("diverged_round") is not None else "finished"
    if (folder / "summary.json").exists():
        return "damaged"
    return "running" if _lock_held(folder.parent, folder.name) else "interrupted"


def damage(folder: Path, stored: Any, status: str) -> str | None:
    """Why a run folder is damaged, by cheap checks (None when it passes them): a config.json that is
    missing, unreadable or names another run's hash, a summary.json that is unreadable, and for a
    finished run the store's checks of its recorded hashes and sizes
    (:meth:`fedrepro.runs.store.RunResult.cheap_check`)."""
    if folder.is_symlink():  # fedrepro never makes one, and `fedrepro run` refuses to write through it
        return f"{folder} is a symbolic link, not a run folder fedrepro wrote; remove it"
    if not isinstance(stored, dict) or not isinstance(stored.get("config"), dict):
        return f"{folder / 'config.json'} is missing or unreadable; delete the folder {folder}"
    if stored.get("hash") != folder.name:
        return (f"{folder / 'config.json'} is for run {stored.get('hash')!r}, not for its folder name "
                f"{folder.name!r} (copied or renamed?); delete the folder {folder}")
    if status == "damaged":
        return f"{folder / 'summary.json'} is unreadable; delete the folder {folder} to run this config again"
    if status in ("finished", "diverged"):

        return RunResult(folder).cheap_check()
    return None


def run_record(folder: str | os.PathLike) -> dict[str, Any]:
    """One run folder as a row of :func:`list_runs` (the stored config nested under ``"config"``,
    and under ``"problem"`` why it is damaged, or None)."""
    folder = Path(folder)
    stored = _read_json(folder / "config.json")
    cfg = stored.get("config") if isinstance(stored, dict) else None
    summary = _read_json(folder / "summary.json") if (folder / "summary.json").exists() else None
    meta = _read_json(folder / "meta.json")
    meta = meta if isinstance(meta, dict) else {}
    status = _status(folder, summary) if isinstance(cfg, dict) else "damaged"
    problem = damage(folder, stored, status)
    if problem is not None:
        status, summary = "damaged", None  # a tampered summary's numbers are not shown as results
    cfg = cfg if isinstance(cfg, dict) else {}
    data, train = cfg.get("data") or {}, cfg.get("train") or {}
    s = summary if isinstance(summary, dict) else {}
    row: dict[str, Any] = {
        "hash": folder.name,
        "method": (cfg.get("method") or {}).get("name"),
        "dataset": data.get("dataset"),
        "partition": data.get("partition"),
        "partition_key": partition_key(data.get("partition_args")),
        "model": (cfg.get("model") or {}).get("name"),
        "clients": data.get("num_clients"),
        "seed": cfg.get("seed"),
        # Every stored config records its profile (RunConfig.profile); "-" only for a damaged folder.
        "profile": cfg.get("profile") or "-",
        "status": status,
        "rounds_done": s.get("rounds") if s else None,
        "rounds_total": train.get("rounds"),
        "best_acc_mean": _number(s.get("best_acc_mean")),
        "best_round": s.get("best_round"),
        "final_acc_mean": _number(s.get("final_acc_mean")),
        "started": meta.get("started"),
        "finished": _mtime(folder / "summary.json") if s else None,
        "path": str(folder),
    }
    for k, v in s.items():
        if k.startswith(("best_", "final_")) and k not in row:
            row[k] = _number(v)
    if s.get("diverged_round") is not None:
        row["diverged_round"] = s["diverged_round"]
    row["config"] = cfg
    row["problem"] = problem
    return row


def run_folders(runs_dir: str | os.PathLike | None = None) -> list[Path]:
    """Every run folder under ``runs_dir`` (hash-named; temporary and ``.stale`` folders left out)."""
    root = runs_root(runs_dir)
    if not root.is_dir():
        return []
    found = []
    with os.scandir(root) as it:
        for entry in it:
            if entry.name.startswith("."):
                continue
            try:
                if entry.is_dir():
                    found.append(Path(entry.path))
            except OSError as e:
                # A symlink loop (or an entry that cannot be read) is no run: it must not hide the others.
                log.warning("fedrepro: skipped %s in the runs folder: %s; remove it or point it at a run folder",
                            entry.path, e.strerror or e)
    return sorted(found)


def runs_root(runs_dir: str | os.PathLike | None = None) -> Path:
    """``runs_dir``, else the store's default (``$FEDREPRO_RUNS``, else ``runs/``)."""
    if runs_dir is not None:
        return Path(runs_dir).expanduser()
    return output_path("runs")  # $FEDREPRO_RUNS, else runs/ under the output root


def _values(v: str | Sequence[str] | None) -> list[str] | None:
    if v is None:
        return None
    items = [v] if isinstance(v, str) else list(v)
    return [x.strip() for item in items for x in str(item).split(",") if x.strip()]


def list_runs(runs_dir: str | os.PathLike | None = None, *, method: str | Sequence[str] | None = None,
              dataset: str | Sequence[str] | None = None, status: str | Sequence[str] | None = None,
              profile: str | Sequence[str] | None = None,
              where: Mapping[str, Any] | Iterable[str] | None = None,
              sort: str | Sequence[str] | None = ("method", "dataset", "partition", "partition_key", "seed"),
              config_columns: bool = False) -> pd.DataFrame:
    """The stored runs under ``runs_dir`` (default: ``$FEDREPRO_RUNS``, else ``runs/``), one row each.

    ``method``, ``dataset``, ``status`` and ``profile`` keep the runs with one of the given values (a
    name, a comma-separated text or a list); ``where`` keeps runs whose stored config has every
    value (dotted keys: ``{"data.partition_args.alpha": 0.1}`` or ``["train.rounds=40"]``).
    ``sort`` orders the rows (a column or columns; ``"-best_acc_mean"`` for descending).
    ``config_columns`` adds every config value as a ``cfg.<dotted key>`` column.

    Columns: :data:`RUN_COLUMNS`, then every ``best_*``/``final_*`` metric a summary holds
    (fractions, NaN when not recorded). Only small JSON files are read; torch is not imported.
    """
    statuses = _values(status)
    bad = sorted(set(statuses or ()) - set(STATUSES))
    if bad:
        raise ConfigError(f"unknown status {', '.join(map(repr, bad))}; valid: {', '.join(STATUSES)}")
    wanted = {"method": _values(method), "dataset": _values(dataset), "status": statuses,
              "profile": _values(profile)}
    where = parse_where(where)
    rows = []
    for folder in run_folders(runs_dir):
        try:
            row = run_record(folder)
        except (OSError, CorruptCacheError, ValueError, TypeError, AttributeError, RecursionError) as e:
            # One folder that cannot be read is no run: it must not hide the others.
            log.warning("fedrepro: skipped %s in the runs folder: %s; delete it or make it a run folder", folder,
                        (str(e).splitlines() or [type(e).__name__])[0])
            continue
        if any(want is not None and str(row[col]) not in want for col, want in wanted.items()):
            continue
        if where and not matches(row["config"], where):
            continue
        cfg = row.pop("config")
        row.pop("problem")
        if config_columns:
            row.update({f"cfg.{k}": v for k, v in _flatten(cfg).items()})
        rows.append(row)
    table = pd.DataFrame(rows, columns=None if rows else list(RUN_COLUMNS))
    for col in _INT_COLUMNS:  # counts stay integers next to an unfinished run's empty cell
        if col in table:
            table[col] = pd.array([_whole(v) for v in table[col]], dtype="Int64")
    extra = [c for c in table.columns if c not in RUN_COLUMNS]
    table = table[list(RUN_COLUMNS) + sorted(c for c in extra if not c.startswith("cfg."))
                  + [c for c in extra if c.startswith("cfg.")]]
    return _sorted(table, sort)


# Short names for the columns one sorts by most.
SORT_ALIASES = {"best": "best_acc_mean", "final": "final_acc_mean", "rounds": "rounds_done"}


def _sorted(table: pd.DataFrame, sort: str | Sequence[str] | None) -> pd.DataFrame:
    keys = _values(sort) or []
    if not keys or table.empty:
        return table.reset_index(drop=True)
    cols, ascending = [], []
    for key in keys:
        col = SORT_ALIASES.get(key.lstrip("-"), key.lstrip("-"))
        if col not in table.columns:
            raise ConfigError(f"cannot sort by {col!r}; valid columns: {', '.join(table.columns)}")
        cols.append(col)
        ascending.append(not key.startswith("-"))
    # Mixed types (a damaged run's None) sort as text; numbers sort as numbers.
    return table.sort_values(cols, ascending=ascending, kind="stable", na_position="last",
                             key=lambda s: s if pd.api.types.is_numeric_dtype(s) else s.astype(str)
                             ).reset_index(drop=True)


def _flatten(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, Mapping) and v and not prefix.endswith("args."):
            out.update(_flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = json.dumps(v, sort_keys=True) if isinstance(v, (dict, list)) else v
    return out


def run_rounds(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per (run, round) of the runs in ``runs`` (a :func:`list_runs` table): the run's
    identifying columns, then ``rounds.jsonl``'s metrics (``round`` and the main accuracies first).
    Runs without a stored ``rounds.jsonl`` (running, interrupted, damaged) give no rows."""
    ids = [c for c in _ID_COLUMNS if c in runs.columns]
    rows = []
    for run in runs[ids + ["path"]].to_dict("records"):
        try:
            lines = read_run_file(Path(run.pop("path")) / "rounds.jsonl").decode("utf-8").splitlines()
            rows += [{**run, **loads(line)} for line in lines if line.strip()]
        except (OSError, CorruptCacheError, UnicodeDecodeError, json.JSONDecodeError, TypeError):
            continue
    if not rows:
        return pd.DataFrame(columns=ids + ["round"])
    out = pd.DataFrame(rows)
    metrics = order_round_columns(out[[c for c in out.columns if c not in ids]])
    return pd.concat([out[ids], metrics], axis=1)


# --------------------------------------------------------------------------------------------
# One run: find it by a hash prefix, read it whole


def resolve_run(ref: str, runs_dir: str | os.PathLike | None = None) -> Path:
    """The run folder that ``ref`` names: a run folder's path, or a unique prefix of a stored run's
    hash. An unknown or ambiguous prefix raises :class:`ConfigError` listing the candidates."""
    as_path = Path(ref).expanduser()
    if os.sep in ref and as_path.is_dir() and (as_path / "config.json").exists():
        return as_path
    root = runs_root(runs_dir)
    prefix = ref.strip().lower()
    if not prefix or any(c not in "0123456789abcdef" for c in prefix):
        raise ConfigError(f"run {ref!r}: expected a run hash or a unique prefix of one (hex digits, as "
                          f"`fedrepro runs` lists them), or a run folder's path")
    folders = run_folders(root)
    found = [p for p in folders if p.name.startswith(prefix)]
    if len(found) == 1:
        return found[0]
    if not found:
        near = sorted(p.name for p in folders if p.name[:1] == prefix[:1])[:10]
        hint = f"; runs starting with {prefix[:1]!r}: {', '.join(near)}" if near else ""
        raise ConfigError(f"no run in {root} has a hash starting with {prefix!r} ({len(folders)} runs stored"
                          f"{hint}); `fedrepro runs --runs-dir {root}` lists them")
    shown = ", ".join(p.name for p in found[:20]) + (f" and {len(found) - 20} more" if len(found) > 20 else "")
    raise ConfigError(f"run prefix {prefix!r} is ambiguous: {len(found)} runs in {root} start with it: {shown}; "
                      "give more of the hash")


@dataclass
class StoredRun:
    """Everything ``fedrepro show`` prints about one run folder."""

    record: dict[str, Any]          # the list_runs row, with "config"
    meta: dict[str, Any]
    summary: dict[str, Any]
    rounds: pd.DataFrame            # one row per round (empty when none is stored)
    clients: pd.DataFrame           # one row per (evaluated round, client)
    problems: list[str]             # files that fail their recorded sha256, unreadable files
    rounds_from_checkpoint: bool = False


def _checked(folder: Path, name: str, record: Mapping[str, Any] | None, problems: list[str]) -> bytes | None:
    f = folder / name
    try:
        data = read_run_file(f)
    except FileNotFoundError:
        return None
    except CorruptCacheError as e:
        problems.append(str(e))
        return None
    entry = (record or {}).get(name)
    if isinstance(entry, dict) and hashlib.sha256(data).hexdigest() != entry.get("sha256"):
        problems.append(f"{name} does not match the sha256 recorded when the run finished (edited or damaged)")
    return data


def _jsonl(data: bytes | None, name: str, problems: list[str]) -> pd.DataFrame:
    if data is None:
        return pd.DataFrame()
    try:
        return _table([loads(line) for line in data.decode().splitlines() if line.strip()], name, problems)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        problems.append(f"{name} is unreadable ({e})")
        return pd.DataFrame()


def _plain_cell(v: Any) -> bool:
    return v is None or isinstance(v, (bool, int, float))


def _table(rows: Any, name: str, problems: list[str]) -> pd.DataFrame:
    """Rows of a run's table (a lines file's, or a checkpoint's) as a display reads them: JSON objects
    of numbers, flags and empty cells, as the engine writes them. A line that is not an object makes
    the table empty, and a cell that is not a number is shown empty; each is a problem of the run
    (its file was not written by fedrepro), not a traceback of ``fedrepro show``."""
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        problems.append(f"{name} holds a line that is not a JSON object (a row)")
        return pd.DataFrame()
    odd = next(((k, v) for r in rows for k, v in r.items() if not _plain_cell(v)), None)
    if odd is not None:
        problems.append(f"{name} holds {odd[0]}={reprlib.repr(odd[1])}, not a number (shown empty)")
        rows = [{k: (v if _plain_cell(v) else None) for k, v in r.items()} for r in rows]
    return pd.DataFrame(rows)


def read_run(folder: str | os.PathLike, checkpoint: bool = True) -> StoredRun:
    """Read one run folder for display, checking each file against the sha256 recorded when the run
    finished. An unfinished run's rounds so far are read from its checkpoint when ``checkpoint``
    (this imports torch)."""
    folder = Path(folder)
    record = run_record(folder)
    summary = _read_json(folder / "summary.json")
    summary = summary if isinstance(summary, dict) else {}
    files = summary.pop("files_sha256", None)
    problems: list[str] = [record.pop("problem")] if record.get("problem") else []
    for name in ("config.json", "meta.json"):
        _checked(folder, name, files, problems)
    rounds = _jsonl(_checked(folder, "rounds.jsonl", files, problems), "rounds.jsonl", problems)
    clients = blank_untested(_jsonl(_checked(folder, "clients.jsonl", files, problems), "clients.jsonl", problems))
    from_ckpt = False
    if rounds.empty and checkpoint and record["status"] in ("interrupted", "running"):
        state = _checkpoint_state(folder / "checkpoint.pt", problems)
        if state.get("round_rows"):
            rounds, from_ckpt = _table(state["round_rows"], "checkpoint.pt's round rows", problems), True
            clients = _table(state.get("client_rows") or [], "checkpoint.pt's client rows", problems)
            record["rounds_done"] = int(rounds["round"].max())
            if "acc_mean" in rounds and rounds["acc_mean"].notna().any():  # the best so far
                best = rounds.loc[rounds["acc_mean"].idxmax()]
                record["best_acc_mean"], record["best_round"] = float(best["acc_mean"]), int(best["round"])
    if problems and record["status"] in ("finished", "diverged"):  # a file read here failed its recorded hash
        record["status"] = "damaged"
    meta = _read_json(folder / "meta.json")
    return StoredRun(record, meta if isinstance(meta, dict) else {}, summary,
                     order_round_columns(rounds) if not rounds.empty else rounds, clients, problems, from_ckpt)


def _checkpoint_state(f: Path, problems: list[str]) -> dict:
    # Read as a resume reads it (RunStore.load_checkpoint): checked against its sha256, tensors and
    # plain values only (a pickled object in it is refused unread), never through a link or from a
    # FIFO, and for the shape of a run's state, so that a display gets rows, not a traceback.
    try:
        ckpt = RunStore.load_checkpoint(f.parent)
    except FileNotFoundError:
        return {}
    except CorruptCacheError as e:
        problems.append(str(e))
        return {}
    return ckpt["state"] if ckpt is not None else {}


# --------------------------------------------------------------------------------------------
# Export


def write_csv(table: pd.DataFrame, path: str | os.PathLike) -> Path:
    """Write ``table`` to ``path`` atomically (a temporary file in the same folder, then renamed); a
    failed write (a full disk, a read-only folder) is a one-line ResourceError."""
    path = Path(path).expanduser()
    if path.is_dir():
        raise ConfigError(f"--csv {str(path)!r} is a folder; valid: a file name, e.g. runs.csv")
    if not path.parent.is_dir():
        raise ConfigError(f"--csv {str(path)!r}: the folder {str(path.parent)!r} does not exist")
    # A folder name that is not UTF-8 (a run folder's path) is written as Python escapes it.
    atomic_write_bytes(path, table.to_csv(index=False, lineterminator="\n").encode("utf-8", "backslashreplace"),
                       "name another file with --csv")
    return path


def display_path(path: str | os.PathLike) -> str:
    """``path`` relative to the working directory when it is under it (``runs/<hash>``), else as is."""
    p = Path(path)
    try:
        return str(p.resolve().relative_to(Path.cwd().resolve()))
    except (ValueError, OSError):
        return str(p)


