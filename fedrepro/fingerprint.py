"""Which code a run's result depends on, and whether today's code still is that code.

A run folder is keyed by its resolved config (:meth:`fedrepro.config.RunConfig.hash`), not by the
code that trained it, so a stored run outlives a change to its method. Each run therefore records
a **code fingerprint**: a digest of every module of this package that can change its numbers, with
one digest per module (``meta.json``: ``code_files``, ``code_fingerprint``).

The modules are found from the config, not listed by hand: the method's, the model's and the dataset
loader's modules, the engine and :mod:`fedrepro.pipeline` (data, partition, clients), and every
``fedrepro`` module those import (at module level or inside a function), followed transitively.
Left out are the modules that launch, store, trace or draw runs (:data:`NOT_RESULT`) and package
``__init__`` files, which only register their modules: adding a method must not make every stored
run stale.

A module's digest is that of its syntax tree without docstrings, so an edited comment, docstring or
layout leaves runs fresh, and any change to what the code does marks them stale. The package's
data files that those modules name (a committed stand-in checkpoint, ``data_files``) are digested
byte for byte.

:func:`staleness` compares a stored run with today's code. A run stored before fingerprints were
recorded is checked against the git commit in its ``meta.json``, when git has that commit and the
run was made from a clean tree; otherwise it is ``unknown``.
"""
from __future__ import annotations

import ast
import hashlib
import importlib.util
import json
import subprocess
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from .config import RunConfig

PACKAGE = Path(__file__).resolve().parent
# Modules that move, store, trace or draw results but never change a number of a run.
NOT_RESULT = frozenset({
    "fedrepro.store", "fedrepro.trace", "fedrepro.allocator", "fedrepro.host", "fedrepro.figures",
    "fedrepro.errors", "fedrepro.params", "fedrepro.config", "fedrepro.registry", "fedrepro.fingerprint",
    "fedrepro.pool", "fedrepro.plan", "fedrepro.reproduce", "fedrepro.cli", "fedrepro.results_page",
    "fedrepro.bench", "fedrepro.verify", "fedrepro.experiment", "fedrepro.catalog", "fedrepro.describe", "fedrepro.setup_text",
})
# What ``staleness`` answers.
FRESH, STALE, UNKNOWN = "fresh", "stale", "unknown"


def _module_file(name: str) -> Path | None:
    if not (name == "fedrepro" or name.startswith("fedrepro.")):
        return None
    parts = name.split(".")[1:]
    if not parts:
        return PACKAGE / "__init__.py"
    rel = Path(*parts)
    for cand in (PACKAGE / rel.with_suffix(".py"), PACKAGE / rel / "__init__.py"):
        if cand.is_file():
            return cand
    return None


def _imports(name: str, tree: ast.AST) -> set[str]:
    """Every ``fedrepro`` module that ``tree`` (the module ``name``) imports, anywhere in it."""
    package = name if _module_file(name) and _module_file(name).name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = importlib.util.resolve_name("." * node.level + (node.module or ""), package) if node.level \
                else node.module or ""
            found.add(base)
            found.update(f"{base}.{a.name}" for a in node.names)  # "from . import fedavg" names a module
    return {m for m in found if _module_file(m) is not None}


def _strip_docstrings(tree: ast.AST) -> ast.AST:
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant) \
                    and isinstance(body[0].value.value, str):
                node.body = body[1:] or [ast.Pass()]
    return tree


def source_digest(source: str) -> str:
    """The digest of what ``source`` does: its syntax tree without docstrings (comments and layout
    are not in the tree)."""
    tree = _strip_docstrings(ast.parse(source))
    return hashlib.sha256(ast.dump(tree, include_attributes=False).encode()).hexdigest()[:16]


def _read(path: Path) -> str:
    return path.read_text()


@lru_cache(maxsize=1024)
def _file_digest(path: Path, mtime_ns: int) -> str:
    return source_digest(_read(path))


def _roots(cfg: RunConfig) -> set[str]:
    from .data import DATASETS
    from .methods import METHODS
    from .models import MODELS

    roots = {"fedrepro.pipeline", "fedrepro.fl.engine"}
    for registry, key in ((METHODS, cfg.method.name), (MODELS, cfg.model.name), (DATASETS, cfg.data.dataset)):
        try:
            roots.add(registry.get(key).__module__)
        except Exception:  # noqa: BLE001  (an unknown name fails validation elsewhere, with its own message)
            pass
    return roots


def _result_module(name: str) -> bool:
    f = _module_file(name)
    return f is not None and name not in NOT_RESULT and f.name != "__init__.py"


@lru_cache(maxsize=None)
def _closure(roots: frozenset[str]) -> tuple[str, ...]:
    seen: set[str] = set()
    todo = [m for m in roots if _result_module(m)]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        todo += [m for m in _imports(name, ast.parse(_read(_module_file(name)))) if _result_module(m) and m not in seen]
    return tuple(sorted(seen))


def code_files(cfg: RunConfig) -> dict[str, str]:
    """``{path in the repository: digest}`` of every module that determines ``cfg``'s result, today."""
    files = (_module_file(m) for m in _closure(frozenset(_roots(cfg))))
    return {str(f.relative_to(PACKAGE.parent)): _file_digest(f, f.stat().st_mtime_ns) for f in files}


@lru_cache(maxsize=None)
def _package_data() -> tuple[Path, ...]:
    """Files of the package that are not code (committed checkpoints, their records)."""
    return tuple(sorted(p for p in PACKAGE.rglob("*") if p.is_file() and p.suffix not in (".py", ".pyc")
                        and "__pycache__" not in p.parts))


@lru_cache(maxsize=1024)
def _bytes_digest(path: Path, mtime_ns: int) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def data_files(cfg: RunConfig) -> dict[str, str]:
    """``{path: sha256 prefix}`` of the package's data files (a committed stand-in checkpoint) that a
    module of ``cfg``'s code names by file name: weights change numbers as surely as code does."""
    sources = [_read(_module_file(m)) for m in _closure(frozenset(_roots(cfg)))]
    return {str(p.relative_to(PACKAGE.parent)): _bytes_digest(p, p.stat().st_mtime_ns)
            for p in _package_data() if any(p.name in src for src in sources)}


def combine(files: dict[str, str]) -> str:
    return hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest()[:16]


def record(cfg: RunConfig) -> dict:
    """What a run stores in its ``meta.json``."""
    files, data = code_files(cfg), data_files(cfg)
    return {"code_fingerprint": combine({**files, **data}), "code_files": files, "data_files": data}


@lru_cache(maxsize=4096)
def _digest_at(commit: str, path: str) -> str | None:
    try:
        out = subprocess.run(["git", "show", f"{commit}:{path}"], cwd=PACKAGE.parent, capture_output=True, text=True,
                             timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return source_digest(out.stdout) if out.returncode == 0 else "absent"


@dataclass(frozen=True)
class Staleness:
    """A stored run against today's code: ``state`` is fresh, stale or unknown; ``changed`` names the
    modules whose code differs; ``why`` says how it was decided."""

    state: str
    changed: tuple[str, ...] = ()
    why: str = ""


def staleness(cfg: RunConfig, meta: dict) -> Staleness:
    """Whether the run of ``cfg`` whose ``meta.json`` is ``meta`` was trained by today's code."""
    today = code_files(cfg)
    stored = meta.get("code_files")
    if stored is None:
        commit = meta.get("git_commit")
        if not commit or meta.get("git_dirty"):
            why = "made from a modified tree" if commit else "no code fingerprint and no git commit"
            return Staleness(UNKNOWN, why=f"{why}: its code cannot be checked")
        stored = {path: _digest_at(commit, path) for path in today}
        if any(d is None for d in stored.values()):
            return Staleness(UNKNOWN, why=f"git cannot show commit {commit[:10]} here")
        how = f"its code at commit {commit[:10]}"
    else:
        how = "its recorded code fingerprint"
    changed = [p for p in set(today) | set(stored) if today.get(p) != stored.get(p)]
    if "data_files" in meta:  # runs recorded before data files were covered are checked on code alone
        data, was = data_files(cfg), meta["data_files"]
        changed += [p for p in set(data) | set(was) if data.get(p) != was.get(p)]
    return Staleness(STALE if changed else FRESH, tuple(sorted(changed)), how)
