"""The package's layers, read from its imports: every import points down a layer (or stays in its own
package), no two packages or modules import each other in a circle, imports inside functions only
defer heavy libraries, and no module imports another module's private names (docs/architecture.md)."""
from __future__ import annotations

import ast
import importlib.util
from collections import defaultdict
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "fedrepro"

# Bottom to top: a module may import from its own layer's packages or from lower layers.
LAYERS = (
    ("fedrepro.errors", "fedrepro.version", "fedrepro.registry", "fedrepro.params"),
    ("fedrepro.env",),
    ("fedrepro.ot", "fedrepro.data"),
    ("fedrepro.models",),
    ("fedrepro.fl",),
    ("fedrepro.methods",),
    ("fedrepro.config",),
    ("fedrepro.runs",),
    ("fedrepro.flower",),
    ("fedrepro.execute",),
    ("fedrepro.analysis",),
    ("fedrepro.pretrain",),
    ("fedrepro.claims",),
    ("fedrepro.papers",),
    ("fedrepro.app",),
    ("fedrepro", "fedrepro.__main__"),
)
# The libraries an import inside a function may defer (each costs a second or more, or hundreds of MiB).
HEAVY = {"torch", "torchvision", "ray", "flwr", "matplotlib", "timm", "open_clip", "ot", "sklearn", "scipy",
         "pandas", "papermill", "nbformat", "nbclient", "sphinx", "selenium", "tensorboard", "jupyter_client"}
# Edges still to remove: (importer, imported) units. Must end empty.
ALLOWED: set[tuple[str, str]] = set()


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


MODULES = modules()


def unit(name: str) -> str:
    parts = name.split(".")
    top = ".".join(parts[:2])
    return top if top in {u for layer in LAYERS for u in layer} else "fedrepro"


LAYER_OF = {u: i for i, layer in enumerate(LAYERS) for u in layer}


def _type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.dump(node.test)


def _imports_its_modules(tree: ast.AST, nested: set[int]) -> bool:
    """Whether a package's ``__init__`` calls ``importlib.import_module`` when it is imported (not
    inside a function)."""
    in_functions = {id(n) for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
                    for n in ast.walk(f)}
    return any(isinstance(n, ast.Call) and getattr(n.func, "attr", getattr(n.func, "id", "")) == "import_module"
               and id(n) not in in_functions for n in ast.walk(tree))


def imports(name: str, path: Path):
    """``(imported module, names, deferred, line)`` for each import in a module: ``deferred`` when it
    runs only when a function is called (or never: under ``TYPE_CHECKING``)."""
    tree = ast.parse(path.read_text())
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    nested = {id(n) for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
              or _type_checking(f) for n in ast.walk(f) if isinstance(n, (ast.Import, ast.ImportFrom))}
    if path.name == "__init__.py" and _imports_its_modules(tree, nested):
        # A registry package that imports every module of its own at import time (methods/).
        for child in MODULES:
            if child.rpartition(".")[0] == name:
                yield child, (), False, 0
    for node in ast.walk(tree):
        inside = id(node) in nested
        if isinstance(node, ast.Import):
            for a in node.names:
                yield a.name, (), inside, node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = importlib.util.resolve_name("." * node.level + (node.module or ""), package) if node.level \
                else node.module or ""
            for a in node.names:
                full = f"{base}.{a.name}"
                yield (full, (), inside, node.lineno) if full in MODULES else (base, (a.name,), inside, node.lineno)


def edges():
    for name, path in MODULES.items():
        for target, names, inside, line in imports(name, path):
            if target.split(".")[0] == "fedrepro" and target in MODULES:
                yield name, target, names, inside, line


def unit_graph() -> dict[str, set[str]]:
    graph = defaultdict(set)
    for a, b, *_ in edges():
        if unit(a) != unit(b):
            graph[unit(a)].add(unit(b))
    return graph


def test_every_module_belongs_to_a_layer():
    assert {unit(m) for m in MODULES} <= set(LAYER_OF)
    stray = [m for m in MODULES if m.count(".") == 1 and unit(m) == "fedrepro" and m != "fedrepro"]
    assert not stray, f"modules outside every layer: {stray}"


def test_no_import_points_up_a_layer():
    up = sorted({(unit(a), unit(b), f"{a}:{line} imports {b}") for a, b, _, _, line in edges()
                 if LAYER_OF[unit(b)] > LAYER_OF[unit(a)] and (unit(a), unit(b)) not in ALLOWED})
    assert not up, "imports up a layer:\n" + "\n".join(w for *_, w in up)


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in list(graph):
        if v not in index:
            visit(v)
    return out


def test_no_two_packages_import_each_other_in_a_circle():
    graph = {a: {b for b in bs if (a, b) not in ALLOWED} for a, bs in unit_graph().items()}
    assert not _cycles(graph)


def test_no_two_modules_import_each_other_in_a_circle():
    """Within a package too; a package's ``__init__`` that re-exports its modules is not part of a
    circle (its modules never import it back: the test finds it if they do)."""
    graph = defaultdict(set)
    for a, b, *_ in edges():
        graph[a].add(b)
    assert not _cycles(graph)


def _parents(name: str) -> list[str]:
    """The packages Python imports before ``name`` (``fedrepro``, ``fedrepro.runs``, ...)."""
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def loaded_at_import() -> dict[str, frozenset[str]]:
    """The heavy libraries that importing each module loads: its module-level imports, its parent
    packages' and theirs, transitively."""
    direct = {name: {t for t, _, deferred, _ in imports(name, path) if not deferred} for name, path in MODULES.items()}
    memo: dict[str, frozenset[str]] = {}

    def heavy(name: str, seen: frozenset[str] = frozenset()) -> frozenset[str]:
        if name in memo:
            return memo[name]
        if name in seen:
            return frozenset()
        out, seen = set(), seen | {name}
        for t in direct.get(name, ()) | set(_parents(name)):
            if t in MODULES:
                out |= heavy(t, seen)
            elif t.split(".")[0] in HEAVY:
                out.add(t.split(".")[0])
        memo[name] = frozenset(out)
        return memo[name]

    return {name: heavy(name) for name in MODULES}


def test_imports_inside_functions_only_defer_heavy_libraries():
    """A fedrepro module imported inside a function must defer a heavy library that importing the
    importer does not load already; any other such import hides an edge from the layer rules."""
    loaded = loaded_at_import()
    typing_only = {(name, n.lineno) for name, path in MODULES.items() for f in ast.walk(ast.parse(path.read_text()))
                   if _type_checking(f) for n in ast.walk(f) if isinstance(n, (ast.Import, ast.ImportFrom))}
    bad = sorted({f"{name}:{line} imports {target} inside a function, deferring nothing heavy"
                  for name, path in MODULES.items() for target, _, deferred, line in imports(name, path)
                  if deferred and target in MODULES and not loaded[target] - loaded[name]
                  and (name, line) not in typing_only})
    assert not bad, "\n".join(bad)


def test_no_module_imports_another_modules_private_names():
    bad = [f"{a}:{line} imports {b}.{n}" for a, b, names, _, line in edges() for n in names
           if n.startswith("_") and not n.startswith("__")]
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("layer", LAYERS)
def test_each_layer_exists(layer):
    for u in layer:
        assert u in MODULES, f"{u} is in LAYERS but not in the package"
