"""The results store: one immutable folder per run, ``<runs_dir>/<config-hash>/``.

Layout (every file written to a temporary name, then ``os.replace``-d into place):

- ``config.json``   the resolved config (and its hash);
- ``meta.json``     seed, partition hash, package versions, git commit, device, start time;
- ``checkpoint.pt`` while running: the full simulator state after the last finished round;
- ``rounds.jsonl``  one line per round (means, std, timing);
- ``clients.jsonl`` one line per (evaluated round, client);
- ``final_state.pt`` the trained state after the last round: the shared tensors and every client's
  persistent state (what analyses such as the mismatch probe need; ``RunResult.final_state()``);
- ``summary.json``  best-round and final-round values. Written last: its presence marks a finished
  run, which is then read-only and reused, never re-run or overwritten.

A folder that exists but is inconsistent (unreadable JSON, a config that does not hash to the folder
name, a finished run missing its metrics, an unreadable checkpoint) raises
:class:`~fedrepro.errors.CorruptCacheError` naming the file and the fix.
"""
from __future__ import annotations

import json
import math
import os
import platform
import stat
import subprocess
import tempfile
from dataclasses import dataclass
from datetime import datetime, timezone
from functools import cached_property
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from .config import RunConfig, from_dict
from .errors import CorruptCacheError


def _clean(obj: Any) -> Any:
    """JSON has no NaN: write ``null`` instead."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    return obj


def atomic_write_bytes(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def atomic_write_json(path: Path, obj: Any) -> None:
    atomic_write_bytes(path, json.dumps(_clean(obj), indent=2, sort_keys=True, allow_nan=False).encode())


def atomic_write_jsonl(path: Path, rows: list[dict]) -> None:
    lines = "".join(json.dumps(_clean(r), sort_keys=True, allow_nan=False) + "\n" for r in rows)
    atomic_write_bytes(path, lines.encode())


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise CorruptCacheError(f"run file {path} is unreadable ({e}); delete the folder {path.parent} "
                                "to run this config again") from e


def _read_jsonl(path: Path) -> list[dict]:
    try:
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    except (OSError, json.JSONDecodeError) as e:
        raise CorruptCacheError(f"run file {path} is unreadable ({e}); delete the folder {path.parent} "
                                "to run this config again") from e


def default_runs_dir() -> Path:
    """``FEDREPRO_RUNS``, else ``runs/`` at the repository root (or the working directory)."""
    env = os.environ.get("FEDREPRO_RUNS")
    if env:
        return Path(env).expanduser()
    repo = Path(__file__).resolve().parent.parent
    if (repo / "pyproject.toml").is_file():
        return repo / "runs"
    return Path.cwd() / "runs"


def environment_info() -> dict[str, Any]:
    import numpy
    import torchvision

    from . import __version__

    info = {"python": platform.python_version(), "platform": platform.platform(), "torch": torch.__version__,
            "torchvision": torchvision.__version__, "numpy": numpy.__version__, "fedrepro": __version__,
            "git_commit": None, "git_dirty": None}
    repo = Path(__file__).resolve().parent.parent
    try:
        info["git_commit"] = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True,
                                            text=True, timeout=5, check=True).stdout.strip()
        info["git_dirty"] = bool(subprocess.run(["git", "status", "--porcelain", "--", "fedrepro"], cwd=repo,
                                                capture_output=True, text=True, timeout=5).stdout.strip())
    except (OSError, subprocess.SubprocessError):
        pass
    return info


@dataclass
class RunResult:
    """A finished run, read from its folder (a path or a string, e.g. a ``run_grid`` table's
    ``path`` column). Tables come as pandas DataFrames."""

    path: Path

    def __post_init__(self) -> None:
        self.path = Path(self.path)

    @cached_property
    def config(self) -> RunConfig:
        return from_dict(_read_json(self.path / "config.json")["config"])

    @cached_property
    def meta(self) -> dict:
        return _read_json(self.path / "meta.json")

    @cached_property
    def summary(self) -> dict:
        return _read_json(self.path / "summary.json")

    @cached_property
    def rounds(self) -> pd.DataFrame:
        """One row per round: ``acc_mean``, ``acc_weighted``, ``acc_std``... (NaN when not evaluated)."""
        return pd.DataFrame(_read_jsonl(self.path / "rounds.jsonl"))

    @cached_property
    def clients(self) -> pd.DataFrame:
        """One row per (evaluated round, client): ``acc``, ``loss``, ``n_test``, ``held_out``."""
        return pd.DataFrame(_read_jsonl(self.path / "clients.jsonl"))

    @property
    def best(self) -> float:
        return self.summary["best_acc_mean"]

    @property
    def final(self) -> float:
        return self.summary["final_acc_mean"]

    def final_state(self) -> dict:
        """``{"shared": ..., "server_state": ..., "client_states": [...]}`` after the last round (CPU)."""
        f = self.path / "final_state.pt"
        if not f.is_file():
            raise CorruptCacheError(f"finished run {self.path} has no final_state.pt; delete the folder to re-run")
        try:
            return torch.load(f, map_location="cpu", weights_only=False)
        except Exception as e:
            raise CorruptCacheError(f"{f} is unreadable ({type(e).__name__}: {e}); delete the folder "
                                    f"{self.path} to re-run") from e

    def final_clients(self) -> pd.DataFrame:
        c = self.clients
        return c[c["round"] == c["round"].max()].reset_index(drop=True)

    def __repr__(self) -> str:
        s = self.summary
        return (f"RunResult({self.config.method.name}, seed={self.config.seed}, best={s['best_acc_mean']:.4f} "
                f"@ round {s['best_round']}, final={s['final_acc_mean']:.4f}, path={self.path})")


class RunStore:
    """Finds, creates, resumes and finishes run folders under ``runs_dir``."""

    def __init__(self, runs_dir: str | os.PathLike | None = None):
        self.root = Path(runs_dir).expanduser() if runs_dir else default_runs_dir()

    def path(self, cfg: RunConfig) -> Path:
        return self.root / cfg.hash()

    def status(self, cfg: RunConfig) -> str:
        """``"missing"``, ``"partial"`` (started, resumable) or ``"done"``; checks consistency."""
        p = self.path(cfg)
        if not p.exists():
            return "missing"
        cfg_file = p / "config.json"
        if not cfg_file.is_file():
            raise CorruptCacheError(f"run folder {p} has no config.json (a partial write?); delete the folder "
                                    "to run this config again")
        stored = _read_json(cfg_file)
        if stored.get("hash") != p.name:
            raise CorruptCacheError(f"{cfg_file} hashes to {stored.get('hash')!r}, not to its folder name "
                                    f"{p.name!r}; delete the folder {p}")
        if (p / "summary.json").is_file():
            for name in ("rounds.jsonl", "clients.jsonl", "meta.json", "final_state.pt"):
                if not (p / name).is_file():
                    raise CorruptCacheError(f"finished run {p} is missing {name}; delete the folder to re-run")
            return "done"
        return "partial"

    def load(self, cfg: RunConfig) -> RunResult:
        res = RunResult(self.path(cfg))
        res.summary  # noqa: B018  (read now so that a corrupt file fails here, not later)
        return res

    def begin(self, cfg: RunConfig, meta: dict) -> Path:
        p = self.path(cfg)
        p.mkdir(parents=True, exist_ok=True)
        meta = {**meta, **environment_info(), "started": datetime.now(timezone.utc).isoformat()}
        atomic_write_json(p / "meta.json", meta)
        atomic_write_json(p / "config.json", {"hash": p.name, "config": cfg.to_dict()})
        return p

    @staticmethod
    def save_checkpoint(path: Path, payload: dict) -> None:
        import io

        buf = io.BytesIO()
        torch.save(payload, buf)
        atomic_write_bytes(path / "checkpoint.pt", buf.getvalue())

    @staticmethod
    def load_checkpoint(path: Path) -> dict | None:
        f = path / "checkpoint.pt"
        if not f.is_file():
            return None
        try:
            return torch.load(f, map_location="cpu", weights_only=False)
        except Exception as e:  # torch raises several types for a truncated or garbled file
            raise CorruptCacheError(f"checkpoint {f} is unreadable ({type(e).__name__}: {e}); delete it to restart "
                                    "this run from round 0") from e

    def finish(self, path: Path, round_rows: list[dict], client_rows: list[dict], summary: dict,
               final_state: dict, meta_update: dict | None = None) -> RunResult:
        if meta_update:
            meta = _read_json(path / "meta.json")
            meta.update(meta_update, finished=datetime.now(timezone.utc).isoformat())
            atomic_write_json(path / "meta.json", meta)
        atomic_write_jsonl(path / "rounds.jsonl", round_rows)
        atomic_write_jsonl(path / "clients.jsonl", client_rows)
        import io

        buf = io.BytesIO()
        torch.save(final_state, buf)
        atomic_write_bytes(path / "final_state.pt", buf.getvalue())
        atomic_write_json(path / "summary.json", summary)
        ckpt = path / "checkpoint.pt"
        if ckpt.exists():
            ckpt.unlink()
        for f in path.iterdir():  # a finished run is immutable: make that visible on disk too
            f.chmod(f.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
        return RunResult(path)
