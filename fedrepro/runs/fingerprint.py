"""Which code a run's result depends on, and whether today's code still is that code.

A run folder is keyed by its resolved config (:meth:`fedrepro.config.RunConfig.hash`), not by the
code that trained it, so a stored run outlives a change to its method. Each run therefore records
a **code fingerprint** of every module of this package that can change its numbers (``meta.json``:
``code_files``, ``code_links``, ``code_fingerprint``).

The modules are found from the config, not listed by hand: the method's, the model's and the dataset
loader's modules, the engine and the data pipeline (data, partition, clients), and every ``fedrepro``
module those import (at module level or inside a function), followed transitively. Left out are the
modules that launch, store, trace or draw runs (:data:`NOT_RESULT`) and package ``__init__`` files,
which only register their modules: adding a method must not make every stored run stale.

The fingerprint does not depend on where the code lives. A module's digest is that of its syntax
tree without docstrings and with the paths of its ``fedrepro`` imports blanked (the names it imports
stay), so an edited comment, docstring or layout, a moved or renamed module, and the import lines
that follow a move leave runs fresh, while any change to what the code does marks them stale. Which
module imports which is recorded apart, as pairs of digests (``code_links``), so that an import
rewired to other code counts as a change too. Comparisons match digests, not paths. The package's
data files that those modules name (a committed stand-in checkpoint, ``data_files``) are digested
byte for byte and matched the same way.

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
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Callable

from ..config import RunConfig
from ..env.host import PACKAGE_PARENT
from ..errors import FedreproError

ROOT = PACKAGE_PARENT
PACKAGE = ROOT / "fedrepro"
# Modules that move, store, trace or draw results but never change a number of a run.
NOT_RESULT = frozenset({
    "fedrepro.runs.store", "fedrepro.env.trace", "fedrepro.env.allocator", "fedrepro.env.host",
    "fedrepro.app.figures", "fedrepro.errors", "fedrepro.params", "fedrepro.config", "fedrepro.registry",
    "fedrepro.runs.fingerprint", "fedrepro.execute.local", "fedrepro.papers.plan", "fedrepro.app.reproduce",
    "fedrepro.app.cli", "fedrepro.app.results_page", "fedrepro.app.bench", "fedrepro.app.verify",
    "fedrepro.execute.run", "fedrepro.runs.catalog", "fedrepro.app.describe", "fedrepro.app.setup_text",
})
# What ``staleness`` answers.
FRESH, STALE, UNKNOWN = "fresh", "stale", "unknown"
# Bumped when what a digest covers changes: runs recorded under another version are compared by it.
VERSION = 2


@dataclass(frozen=True)
class Tree:
    """The package's sources as one version holds them: ``read(path)`` is a file's text and ``files``
    every file, both by path relative to the repository (``fedrepro/fl/engine.py``)."""

    read: Callable[[str], str]
    files: frozenset[str]

    def module_file(self, name: str) -> str | None:
        if not (name == "fedrepro" or name.startswith("fedrepro.")):
            return None
        rel = name.replace(".", "/")
        return next((f for f in (f"{rel}.py", f"{rel}/__init__.py") if f in self.files), None)

    def is_result(self, name: str) -> bool:
        f = self.module_file(name)
        return f is not None and name not in NOT_RESULT and not f.endswith("__init__.py")


def _read(path: str) -> str:
    return (ROOT / path).read_text()


def today() -> Tree:
    """The working tree's sources."""
    return Tree(_read, frozenset(str(p.relative_to(ROOT)) for p in PACKAGE.rglob("*.py")))


def _internal(node: ast.AST) -> bool:
    if isinstance(node, ast.ImportFrom):
        return node.level > 0 or (node.module or "").split(".")[0] == "fedrepro"
    return isinstance(node, ast.Import) and any(a.name.split(".")[0] == "fedrepro" for a in node.names)


def _imports(name: str, path: str, tree: ast.AST, src: Tree) -> list[str]:
    """Every ``fedrepro`` module that ``tree`` (the module ``name`` at ``path``) imports, anywhere in it."""
    package = name if path.endswith("__init__.py") else name.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = importlib.util.resolve_name("." * node.level + (node.module or ""), package) if node.level \
                else node.module or ""
            # "from . import fedavg" names a module; "from .engine import simulate" names its module
            found += [f"{base}.{a.name}" if src.module_file(f"{base}.{a.name}") else base for a in node.names]
    return [m for m in dict.fromkeys(found) if src.module_file(m) is not None]


def _strip(tree: ast.AST) -> ast.AST:
    """``tree`` without docstrings, and with the paths of its ``fedrepro`` imports blanked."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant) \
                    and isinstance(body[0].value.value, str):
                node.body = body[1:] or [ast.Pass()]
        elif _internal(node):
            if isinstance(node, ast.ImportFrom):
                node.module, node.level = None, 0
            else:  # "import fedrepro.x as y" binds y; "import fedrepro.x" binds fedrepro
                node.names = [ast.alias(a.asname or a.name.split(".")[0]) for a in node.names]
    return tree


def source_digest(source: str) -> str:
    """The digest of what ``source`` does: its syntax tree without docstrings and without the paths of
    its ``fedrepro`` imports (comments and layout are not in the tree)."""
    return hashlib.sha256(ast.dump(_strip(ast.parse(source)), include_attributes=False).encode()).hexdigest()[:16]


@lru_cache(maxsize=4096)
def _module(src: Tree, name: str) -> tuple[str, tuple[str, ...]]:
    """``(digest, imported modules)`` of module ``name`` in ``src``."""
    path = src.module_file(name)
    text = src.read(path)
    return source_digest(text), tuple(_imports(name, path, ast.parse(text), src))


def _roots(cfg: RunConfig) -> set[str]:
    from ..methods import METHODS
    from ..data import DATASETS
    from ..models import MODELS

    roots = {"fedrepro.runs.pipeline", "fedrepro.fl.engine"}
    if cfg.train.stop_when_flat:  # the rule decides where such a run stops (only then: others stay fresh)
        roots.add("fedrepro.fl.converge")
    for registry, key in ((METHODS, cfg.method.name), (MODELS, cfg.model.name), (DATASETS, cfg.data.dataset)):
        try:
            roots.add(registry.get(key).__module__)
        except Exception:  # noqa: BLE001  (an unknown name fails validation elsewhere, with its own message)
            pass
    return roots


def _closure(src: Tree, roots: frozenset[str]) -> tuple[str, ...]:
    seen: set[str] = set()
    todo = [m for m in roots if src.is_result(m)]
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo += [m for m in _module(src, name)[1] if src.is_result(m) and m not in seen]
    return tuple(sorted(seen))


def _code(src: Tree, roots: frozenset[str]) -> tuple[dict[str, str], list[str]]:
    """``({path: digest}, links)`` of the modules that ``roots`` reach in ``src``; a link
    ``"a>b"`` says that the module of digest a imports the module of digest b."""
    mods = _closure(src, roots)
    files = {src.module_file(m): _module(src, m)[0] for m in mods}
    links = sorted({f"{_module(src, m)[0]}>{_module(src, t)[0]}" for m in mods for t in _module(src,
                                                                                                m)[1] if t in mods})
    return files, links


@lru_cache(maxsize=256)
def _today(roots: frozenset[str], stamp: tuple) -> tuple[dict[str, str], list[str]]:
    return _code(today(), roots)


def _stamp() -> tuple:
    """What changes when any source file of the package does (its files' names, sizes and times)."""
    return tuple(sorted((str(p), p.stat().st_mtime_ns, p.stat().st_size) for p in PACKAGE.rglob("*.py")))


def _code_today(cfg: RunConfig) -> tuple[dict[str, str], list[str]]:
    files, links = _today(frozenset(_roots(cfg)), _stamp())
    return dict(files), list(links)


def code_files(cfg: RunConfig) -> dict[str, str]:
    """``{path in the repository: digest}`` of every module that determines ``cfg``'s result, today."""
    return _code_today(cfg)[0]


def code_links(cfg: RunConfig) -> list[str]:
    """Which of :func:`code_files`' modules imports which, as pairs of their digests."""
    return _code_today(cfg)[1]


@lru_cache(maxsize=None)
def _package_data() -> tuple[Path, ...]:
    """Files of the package that are not code (committed checkpoints, their records)."""
    return tuple(sorted(p for p in PACKAGE.rglob("*") if p.is_file() and p.suffix not in (".py", ".pyc")
                        and "__pycache__" not in p.parts))


@lru_cache(maxsize=1024)
def _bytes_digest(path: Path, mtime_ns: int) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def data_files(cfg: RunConfig, files: dict[str, str] | None = None) -> dict[str, str]:
    """``{path: sha256 prefix}`` of the package's data files (a committed stand-in checkpoint) that a
    module of ``cfg``'s code names by file name: weights change numbers as surely as code does.
    ``files``: :func:`code_files` of ``cfg``, when the caller has them."""
    sources = [_read(path) for path in (code_files(cfg) if files is None else files)]
    return {str(p.relative_to(ROOT)): _bytes_digest(p, p.stat().st_mtime_ns)
            for p in _package_data() if any(p.name in src for src in sources)}


def combine(files: dict[str, str], links: list[str] = ()) -> str:
    """One digest of a run's code: its modules' and data files' digests and links, not their paths."""
    return hashlib.sha256(json.dumps([sorted(files.values()), sorted(links)]).encode()).hexdigest()[:16]


def inputs(cfg: RunConfig) -> dict[str, str]:
    """Content digests of the input files of ``cfg``'s run that vary from user to user and that its config
    does not fix: the dataset's files (:func:`fedrepro.data.registry.input_digest`) and a pretrained
    weights file (:func:`fedrepro.models.record.weights_digest`); only those that are here. Recorded
    apart from the code fingerprint (a Ray driver need not hold the data its workers read)."""
    from ..data.registry import input_digest
    from ..models.record import weights_digest

    found = {"data": lambda: input_digest(cfg.data.dataset, cfg.data.dataset_args),
             "weights": lambda: weights_digest(cfg.model.name, cfg.model.args)}
    out = {}
    for kind, digest in found.items():
        try:
            value = digest()
        except FedreproError:  # an unknown name fails validation elsewhere, with its own message
            value = None
        if value:
            out[kind] = value
    return out


def record(cfg: RunConfig) -> dict:
    """What a run stores in its ``meta.json`` (``inputs`` only where it reads such files: :func:`inputs`)."""
    files, links = _code_today(cfg)
    data = data_files(cfg, files)
    found = inputs(cfg)
    return {"code_fingerprint": combine({**files, **data}, links), "code_files": files, "code_links": links,
            "data_files": data, "fingerprint_version": VERSION, **({"inputs": found} if found else {})}


@lru_cache(maxsize=64)
def _at(commit: str) -> Tree | None:
    """The package's sources at ``commit``, or None when git cannot show it here."""
    def git(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=30)

    try:
        listing = git("ls-tree", "-r", "--name-only", commit, "--", "fedrepro")
    except (OSError, subprocess.SubprocessError):
        return None
    if listing.returncode != 0:
        return None
    return Tree(lambda path: git("show", f"{commit}:{path}").stdout,
                frozenset(f for f in listing.stdout.splitlines() if f.endswith(".py")))


@dataclass(frozen=True)
class Staleness:
    """A stored run against today's code: ``state`` is fresh, stale or unknown; ``changed`` names the
    modules whose code differs; ``why`` says how it was decided."""

    state: str
    changed: tuple[str, ...] = ()
    why: str = ""


def _unmatched(ours: dict[str, str], theirs: dict[str, str]) -> list[str]:
    """Paths in ``ours`` whose digests ``theirs`` lacks (as often as they occur: two equal modules
    are two)."""
    left = Counter(theirs.values())
    out = []
    for path, digest in sorted(ours.items()):
        if left[digest] > 0:
            left[digest] -= 1
        else:
            out.append(path)
    return out


def _rewired(files: dict[str, str], links: list[str], stored: dict[str, str], was: list[str]) -> list[str]:
    """Modules present unchanged on both sides whose imports point at other modules now."""
    both = set(files.values()) & set(stored.values())
    by_digest = {d: p for p, d in files.items()}
    moved = {link.split(">")[0] for link in set(links) ^ set(was) if set(link.split(">")) <= both}
    return [by_digest[d] for d in moved]


def staleness(cfg: RunConfig, meta: dict) -> Staleness:
    """Whether the run of ``cfg`` whose ``meta.json`` is ``meta`` was trained by today's code."""
    roots = frozenset(_roots(cfg))
    files, links = _code_today(cfg)
    stored, was = meta.get("code_files"), meta.get("code_links")
    if stored is None:
        commit = meta.get("git_commit")
        if not commit or meta.get("git_dirty"):
            why = "made from a modified tree" if commit else "no code fingerprint and no git commit"
            return Staleness(UNKNOWN, why=f"{why}: its code cannot be checked")
        then = _at(commit)
        if then is None:
            return Staleness(UNKNOWN, why=f"git cannot show commit {commit[:10]} here")
        stored, was = _code(then, roots)
        how = f"its code at commit {commit[:10]}"
    elif meta.get("fingerprint_version") != VERSION:
        return Staleness(STALE, tuple(sorted(files)), "its code fingerprint is of an older kind, which named "
                                                       "modules by path")
    else:
        how = "its recorded code fingerprint"
    changed = _unmatched(files, stored) + _unmatched(stored, files) + _rewired(files, links, stored, was or [])
    if "data_files" in meta:  # runs recorded before data files were covered are checked on code alone
        data, had = data_files(cfg, files), meta["data_files"]
        changed += _unmatched(data, had) + _unmatched(had, data)
    had = meta.get("inputs")
    if isinstance(had, dict) and had:
        # Trained on other input files (a changed dataset or weights file): its result is not this input's.
        # Files that are not here today cannot be compared, and leave the stored run readable.
        now = inputs(cfg)
        moved = [f"{kind} input files" for kind in sorted(had) if kind in now and now[kind] != had[kind]]
        if moved:
            changed += moved
            how += " and its recorded input digests"
    return Staleness(STALE if changed else FRESH, tuple(sorted(set(changed))), how)
