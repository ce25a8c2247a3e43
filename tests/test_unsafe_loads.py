"""No loader that can run code from what it reads, anywhere in the repository.

Every ``.py`` file under ``fedrepro/``, ``bench/`` and ``tests/``, and every notebook's code cells, is
read with ``ast`` and fails on:

- ``torch.load(...)`` without ``weights_only=True`` (and any mention of ``torch.load`` that is not
  such a call, or of ``torch.serialization.add_safe_globals``/``safe_globals``, which widen it);
- ``pickle.load``/``loads``/``Unpickler``, ``cloudpickle.load``/``loads``, ``marshal.load``/``loads``,
  ``shelve.open``, ``joblib.load``, ``pandas.read_pickle``, any import of ``dill``;
- ``yaml.load``/``load_all`` without a safe ``Loader``; ``yaml.unsafe_load``, ``full_load``;
- ``numpy.load(..., allow_pickle=<anything but False>)``.

Exceptions, by name: CIFAR's on-disk batches are pickles, read by ``fedrepro/data/cifar.py``'s
``_NumpyOnlyUnpickler``, which admits only numpy's array globals (tests/data/test_cifar.py plants a
payload); ``fedrepro/config.py`` reads YAML with ``_YamlLoader``, a SafeLoader subclass (checked
below). A test that builds a payload on purpose marks the line with ``# unsafe-load-ok: <why>``;
the mark counts in ``tests/`` only.
"""
from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MARK = "# unsafe-load-ok:"

# Calls that unpickle (or unmarshal) whatever they read: refused outright.
ALWAYS = {
    "pickle.load", "pickle.loads", "pickle.Unpickler", "_pickle.load", "_pickle.loads", "_pickle.Unpickler",
    "cloudpickle.load", "cloudpickle.loads", "marshal.load", "marshal.loads", "shelve.open", "joblib.load",
    "pandas.read_pickle", "yaml.unsafe_load", "yaml.unsafe_load_all", "yaml.full_load", "yaml.full_load_all",
    "torch.serialization.add_safe_globals", "torch.serialization.safe_globals", "numpy.lib.format.read_array",
}
SAFE_YAML_LOADERS = {"yaml.SafeLoader", "yaml.CSafeLoader", "yaml.BaseLoader", "yaml.CBaseLoader"}
# (file, name): the documented exceptions.
ALLOWED = {
    ("fedrepro/data/cifar.py", "pickle.Unpickler"),  # the base of _NumpyOnlyUnpickler (find_class overridden)
    ("fedrepro/config.py", "_YamlLoader"),  # a yaml.SafeLoader subclass
}


def _aliases(tree: ast.AST) -> dict[str, str]:
    """Local name -> the dotted name it stands for, from the module's imports (any scope)."""
    out: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                out[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for a in node.names:
                out[a.asname or a.name] = f"{node.module}.{a.name}"
    return out


def _dotted(node: ast.AST, aliases: dict[str, str]) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    base = aliases.get(node.id, node.id)
    name = ".".join([base, *reversed(parts)])
    for short, full in (("np.", "numpy."), ("pd.", "pandas.")):  # the usual aliases, imported or not
        if name.startswith(short):
            name = full + name[len(short):]
    return name


def _kw(call: ast.Call, name: str) -> ast.expr | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def _is_const(node: ast.expr | None, value) -> bool:
    return isinstance(node, ast.Constant) and node.value is value


def problems(source: str, rel: str) -> list[str]:
    """Each unsafe load in ``source`` (the file ``rel``), as ``"rel:line: what"``."""
    tree = ast.parse(source)
    aliases = _aliases(tree)
    lines = source.splitlines()
    found: list[tuple[int, int, str]] = []
    called: set[int] = set()

    def flag(node: ast.AST, what: str) -> None:
        found.append((node.lineno, getattr(node, "end_lineno", node.lineno) or node.lineno, what))

    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            mods = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            if any(m.split(".")[0] == "dill" for m in mods):
                flag(node, "imports dill (it unpickles anything)")
        if not isinstance(node, ast.Call):
            continue
        name = _dotted(node.func, aliases)
        if name is None:
            continue
        called.add(id(node.func))
        if name in ("torch.load", "torch.serialization.load"):
            if not _is_const(_kw(node, "weights_only"), True):
                flag(node, f"{name} without weights_only=True")
        elif name in ("yaml.load", "yaml.load_all"):
            loader = _kw(node, "Loader") or (node.args[1] if len(node.args) > 1 else None)
            lname = _dotted(loader, aliases) if loader is not None else None
            if lname not in SAFE_YAML_LOADERS and (rel, lname) not in ALLOWED:
                flag(node, f"{name} without a safe Loader ({lname})")
        elif name == "numpy.load":
            pick = _kw(node, "allow_pickle")
            if pick is not None and not _is_const(pick, False):
                flag(node, "numpy.load with allow_pickle other than False")
    # Any mention of the refused names (a call, a base class, a value handed on), and of torch.load
    # other than as a call checked above.
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Attribute, ast.Name)) or id(node) in called and not _always(node, aliases):
            continue
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            continue
        name = _dotted(node, aliases)
        if name in ALWAYS and (rel, name) not in ALLOWED:
            flag(node, f"uses {name}")
        elif name in ("torch.load", "torch.serialization.load") and id(node) not in called:
            flag(node, f"hands on {name} (its weights_only cannot be checked)")
    out = []
    for first, last, what in sorted(set(found)):
        marked = any(MARK in lines[i - 1] for i in range(first, last + 1) if i - 1 < len(lines))
        if not (marked and rel.startswith("tests/")):
            out.append(f"{rel}:{first}: {what}")
    return out


def _always(node: ast.AST, aliases: dict[str, str]) -> bool:
    return _dotted(node, aliases) in ALWAYS


def _notebook_cells(path: Path) -> list[str]:
    nb = json.loads(path.read_text(encoding="utf-8"))
    cells = []
    for cell in nb.get("cells", []):
        if cell.get("cell_type") != "code":
            continue
        src = cell.get("source", "")
        src = "".join(src) if isinstance(src, list) else src
        # IPython magics and shell lines are not Python: blanked, so line numbers stay.
        cells.append("\n".join("" if ln.lstrip().startswith(("%", "!")) else ln for ln in src.splitlines()))
    return cells


def _sources() -> list[tuple[str, str]]:
    out = []
    for folder in ("fedrepro", "bench", "tests", "notebooks"):
        for f in sorted((ROOT / folder).rglob("*.py")):
            if ".ipynb_checkpoints" not in f.parts:
                out.append((f.relative_to(ROOT).as_posix(), f.read_text(encoding="utf-8")))
    for f in sorted((ROOT / "notebooks").rglob("*.ipynb")):
        if ".ipynb_checkpoints" not in f.parts:
            rel = f.relative_to(ROOT).as_posix()
            out += [(f"{rel}[cell {i}]", src) for i, src in enumerate(_notebook_cells(f))]
    return out


def test_no_unsafe_load_anywhere():
    sources = _sources()
    assert any(rel.startswith("fedrepro/runs/store.py") for rel, _ in sources)
    assert any(".ipynb[cell" in rel for rel, _ in sources)
    found = [p for rel, src in sources for p in problems(src, rel)]
    assert not found, "loaders that may run code from what they read:\n" + "\n".join(found)


def test_the_documented_exceptions_are_what_they_say():
    import yaml

    from fedrepro import config
    from fedrepro.data import cifar

    assert issubclass(config._YamlLoader, yaml.SafeLoader)
    assert cifar._NumpyOnlyUnpickler.find_class is not __import__("pickle").Unpickler.find_class


@pytest.mark.parametrize("code, rel, bad", [
    ("import torch\ntorch.load(f)", "fedrepro/x.py", True),
    ("import torch\ntorch.load(f, weights_only=False)", "fedrepro/x.py", True),
    ("import torch\ntorch.load(f, weights_only=flag)", "fedrepro/x.py", True),
    ("import torch\ntorch.load(f, map_location='cpu', weights_only=True)", "fedrepro/x.py", False),
    ("from torch import load as L\nL(f)", "fedrepro/x.py", True),
    ("import torch as T\nT.serialization.load(f)", "fedrepro/x.py", True),
    ("import torch\nfn = torch.load", "fedrepro/x.py", True),
    ("import torch\ntorch.serialization.add_safe_globals([X])", "fedrepro/x.py", True),
    ("import pickle\npickle.loads(b)", "fedrepro/x.py", True),
    ("from pickle import load\nload(f)", "bench/x.py", True),
    ("import pickle\nclass U(pickle.Unpickler): pass", "fedrepro/x.py", True),
    ("import pickle\nclass U(pickle.Unpickler): pass", "fedrepro/data/cifar.py", False),
    ("import pickle\npickle.dumps(x)", "fedrepro/x.py", False),
    ("import cloudpickle\ncloudpickle.loads(b)", "fedrepro/x.py", True),
    ("import dill", "fedrepro/x.py", True),
    ("import marshal\nmarshal.loads(b)", "fedrepro/x.py", True),
    ("import yaml\nyaml.load(s)", "fedrepro/x.py", True),
    ("import yaml\nyaml.load(s, Loader=yaml.Loader)", "fedrepro/x.py", True),
    ("import yaml\nyaml.load(s, Loader=yaml.SafeLoader)", "fedrepro/x.py", False),
    ("import yaml\nyaml.load(s, Loader=_YamlLoader)", "fedrepro/config.py", False),
    ("import yaml\nyaml.load(s, Loader=_YamlLoader)", "fedrepro/other.py", True),
    ("import yaml\nyaml.safe_load(s)", "fedrepro/x.py", False),
    ("import yaml\nyaml.full_load(s)", "fedrepro/x.py", True),
    ("import numpy as np\nnp.load(p, allow_pickle=True)", "fedrepro/x.py", True),
    ("import numpy as np\nnp.load(p, allow_pickle=False)", "fedrepro/x.py", False),
    ("import numpy as np\nnp.load(p)", "fedrepro/x.py", False),
    ("import pandas as pd\npd.read_pickle(p)", "fedrepro/x.py", True),
    (f"import pickle\npickle.loads(b)  {MARK} the test's own payload", "tests/test_x.py", False),
    (f"import pickle\npickle.loads(b)  {MARK} marks count in tests only", "fedrepro/x.py", True),
])
def test_the_check_finds_what_it_should(code, rel, bad):
    assert bool(problems(code, rel)) == bad, problems(code, rel)
