"""What each registered name is: ``fedrepro list methods -v`` and ``fedrepro describe NAME``.

Everything is read from the code, so it cannot drift from it: the one-line description and the
citation from the docstring of the method's module (or of the dataset loader, partitioner or model
builder), the parameters and their defaults from the method's ``Params`` dataclass (with what
:func:`fedrepro.params.hp` accepts) or from the builder's signature, and which of the reproduced
papers' tables run it from the tables' own configs (:mod:`fedrepro.papers`).
"""
from __future__ import annotations

import dataclasses
import inspect
import re
import sys
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from ..env.host import PACKAGE_PARENT
from ..errors import ConfigError, FedreproError
from ..params import bounds_of
from .. import papers

# The plural a user types after ``fedrepro list`` -> the kind a name has.
KINDS = {"methods": "method", "datasets": "dataset", "partitions": "partition", "models": "model"}
_YEAR = re.compile(r"\b(19|20)\d\d\b")
_PAPER = re.compile(r"FedPFT|pFedCSPC|PEP-FedPT|FedOTP|ICLR|arXiv|TNNLS|CVPR")


@dataclass(frozen=True)
class Param:
    name: str
    type: str
    default: Any           # dataclasses.MISSING / inspect.Parameter.empty -> REQUIRED
    valid: str = ""        # what the value may be ("a number >= 0"), when declared


REQUIRED = object()


@dataclass
class Entry:
    kind: str              # method | dataset | partition | model
    name: str
    summary: str           # one sentence
    paper: str             # the citation the docstring gives ("-" when it gives none)
    params: list[Param]
    config_key: str        # where its parameters go in a config ("method.args")
    source: str            # the file that defines it, relative to the package's parent
    used_in: dict[str, list[str]] | None = None  # paper -> its tables that run it (None: not looked up)


# --------------------------------------------------------------------------------------------
# Docstrings


def _first_paragraph(doc: str | None) -> str:
    return " ".join((inspect.cleandoc(doc or "").split("\n\n") or [""])[0].split())


def first_sentence(text: str) -> str:
    """The text up to the first full stop outside parentheses and quotes."""
    depth, quoted = 0, False
    for i, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth = max(0, depth - 1)
        elif ch == '"':
            quoted = not quoted
        elif ch == "." and depth == 0 and not quoted and (i + 1 == len(text) or text[i + 1] == " "):
            # "et al." and "Eq." are inside parentheses in this package's citations
            return text[: i + 1]
    return text


def _paren_groups(text: str) -> list[tuple[int, str]]:
    """``(start, inner text)`` of every top-level parenthesised group."""
    out, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "(":
            if depth == 0:
                start = i
            depth += 1
        elif ch == ")" and depth:
            depth -= 1
            if depth == 0:
                out.append((start, text[start + 1:i]))
    return out


def citation(sentence: str, named_first: bool = True) -> str:
    """The citation in a docstring's first sentence: with ``named_first``, the group right after the
    name in ``"FedProx (Li et al., MLSys 2020): ..."``; else the first group that holds a year or
    names one of the reproduced papers; ``"-"`` when there is none."""
    groups = _paren_groups(sentence)
    colon = sentence.find(":")
    if named_first and groups and (colon < 0 or groups[0][0] < colon):
        chosen = groups[0][1]
    else:
        chosen = next((g for _, g in groups if _YEAR.search(g) or _PAPER.search(g)), None)
    if not chosen:
        return "-"
    # "Xu, Yan, Huang; IJCNN 2022" keeps the venue; "..., IJCV 2022; FedOTP's Table 1" drops the rest
    parts = [p.strip() for p in chosen.split(";")]
    upto = next((i for i, p in enumerate(parts) if _YEAR.search(p)), 0)
    text = "; ".join(parts[: upto + 1])
    # "McMahan et al. 2017: conv 32/64 5×5" is a citation, then a remark; a quoted title's colon stays
    cut = next((i for i in range(len(text)) if text.startswith(": ", i) and text[:i].count('"') % 2 == 0), None)
    return text[:cut] if cut is not None else text


# --------------------------------------------------------------------------------------------
# Parameters


def _type_name(tp: Any) -> str:
    if isinstance(tp, str):
        return tp
    if isinstance(tp, type):
        return tp.__name__
    return str(tp).replace("typing.", "")


def _dataclass_params(cls: type) -> list[Param]:
    hints = typing.get_type_hints(cls)
    valid = bounds_of(cls)
    out = []
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING:
            default = f.default
        elif f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
            default = f.default_factory()  # type: ignore[misc]
        else:
            default = REQUIRED
        out.append(Param(f.name, _type_name(hints.get(f.name, "")), default, valid.get(f.name, "")))
    return out


def _signature_params(fn: Callable, names: list[str]) -> list[Param]:
    sig = inspect.signature(fn)
    out = []
    for name in names:
        p = sig.parameters[name]
        default = REQUIRED if p.default is inspect.Parameter.empty else p.default
        ann = "" if p.annotation is inspect.Parameter.empty else _type_name(p.annotation)
        out.append(Param(name, ann, default))
    return out


def _source(obj: Any) -> str:
    try:
        f = Path(inspect.getfile(obj)).resolve()
    except TypeError:
        return "?"
    root = PACKAGE_PARENT
    return str(f.relative_to(root)) if f.is_relative_to(root) else str(f)


# --------------------------------------------------------------------------------------------
# One builder per kind


def _method(name: str) -> Entry:
    from ..methods import METHODS
    cls = METHODS.get(name)
    sentence = first_sentence(_first_paragraph(sys.modules[cls.__module__].__doc__)
                              or _first_paragraph(cls.__doc__))
    return Entry("method", name, sentence, citation(sentence), _dataclass_params(cls.Params), "method.args",
                 _source(cls))


def _dataset(name: str) -> Entry:
    from ..data import DATASETS
    from ..data.registry import dataset_options

    fn = DATASETS.get(name)
    sentence = first_sentence(_first_paragraph(fn.__doc__) or _first_paragraph(sys.modules[fn.__module__].__doc__))
    return Entry("dataset", name, sentence, citation(sentence, False), _signature_params(fn, dataset_options(name)),
                 "data.dataset_args", _source(fn))


def _partition(name: str) -> Entry:
    from ..data.partition import PARTITIONERS, scheme_params

    fn = PARTITIONERS.get(name)
    sentence = first_sentence(_first_paragraph(fn.__doc__))
    return Entry("partition", name, sentence, citation(sentence, False), _signature_params(fn, scheme_params(fn)[0]),
                 "data.partition_args", _source(fn))


def _model(name: str) -> Entry:
    from ..models import MODELS, model_kwargs

    fn = MODELS.get(name)
    sentence = first_sentence(_first_paragraph(fn.__doc__) or _first_paragraph(sys.modules[fn.__module__].__doc__))
    return Entry("model", name, sentence, citation(sentence, False), _signature_params(fn, list(model_kwargs(name))),
                 "model.args", _source(fn))


_BUILDERS: dict[str, Callable[[str], Entry]] = {"method": _method, "dataset": _dataset, "partition": _partition,
                                                 "model": _model}


def names(kind: str) -> list[str]:
    """The registered names of ``kind`` (``method`` ... or its plural)."""
    from ..methods import list_methods
    from ..data import list_datasets
    from ..data.partition import list_partitions
    from ..models import list_models

    kind = KINDS.get(kind, kind)
    lists = {"method": list_methods, "dataset": list_datasets, "partition": list_partitions, "model": list_models}
    if kind not in lists:
        raise ConfigError(f"unknown kind {kind!r}; valid: {', '.join(KINDS)}")
    return lists[kind]()


def entries(kind: str) -> list[Entry]:
    """Every registered ``kind`` described (without ``used_in``: :func:`find` fills it)."""
    kind = KINDS.get(kind, kind)
    return [_BUILDERS[kind](n) for n in names(kind)]


def find(name: str, usage: bool = True) -> list[Entry]:
    """Every registry entry called ``name`` (a name may be, say, both a dataset and a model), with the
    reproduced papers' tables that use it when ``usage``. Unknown: a ConfigError with near names."""
    found = [_BUILDERS[kind](name) for kind in _BUILDERS if name in names(kind)]
    if not found:
        import difflib

        every = sorted({n for kind in _BUILDERS for n in names(kind)})
        near = difflib.get_close_matches(name, every, n=5, cutoff=0.6)
        hint = f"; did you mean {', '.join(near)}?" if near else ""
        raise ConfigError(f"no method, dataset, partition or model is called {name!r}{hint} "
                          "(`fedrepro list methods` ... lists them)")
    if usage:
        uses = table_usage()
        for e in found:
            e.used_in = uses.get((e.kind, e.name), {})
    return found


def table_usage(profiles: tuple[str, ...] = ("laptop", "paper")) -> dict[tuple[str, str], dict[str, list[str]]]:
    """``{(kind, name): {paper: [table, ...]}}`` over every table of the reproduced papers at
    ``profiles``, read from the configs each table would run (nothing is run or loaded)."""
    out: dict[tuple[str, str], dict[str, list[str]]] = {}
    for p in papers.PAPERS:
        for tname, table in getattr(papers.paper(p), "TABLES", {}).items():
            for profile in profiles:
                try:
                    cfgs = table.configs(profile, tuned=False)
                except FedreproError:  # a table a profile does not define
                    continue
                for c in cfgs:
                    for key in (("method", c.method.name), ("dataset", c.data.dataset),
                                ("partition", c.data.partition), ("model", c.model.name)):
                        tables = out.setdefault(key, {}).setdefault(p, [])
                        if tname not in tables:
                            tables.append(tname)
    return out


# --------------------------------------------------------------------------------------------
# Text


def _default_text(p: Param) -> str:
    if p.default is REQUIRED:
        return "(required)"
    if p.default is None:
        return "null"
    return repr(p.default) if isinstance(p.default, str) else str(p.default)


def format_params(params: list[Param], indent: str = "    ") -> list[str]:
    if not params:
        return [f"{indent}(no parameters)"]
    rows = [(p.name, p.type, _default_text(p), p.valid) for p in params]
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    out = []
    for n, t, d, v in rows:
        line = f"{indent}{n:<{widths[0]}}  {t:<{widths[1]}}  = {d:<{widths[2]}}" + (f"  valid: {v}" if v else "")
        out.append(line.rstrip())
    return out


def short(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1].rstrip() + "…"


def format_list(kind: str, verbose: bool) -> str:
    if not verbose:
        return "\n".join(names(kind))
    lines = []
    for e in entries(kind):
        lines.append(f"{e.name}: {short(e.summary, 150)}")
        lines.append(f"    paper: {e.paper}")
        lines.append(f"    parameters ({e.config_key}.*):")
        lines += format_params(e.params, indent="      ")
    return "\n".join(lines)


def format_entry(e: Entry) -> str:
    lines = [f"{e.kind} {e.name}", f"  {e.summary}", f"  paper:   {e.paper}", f"  source:  {e.source}"]
    if e.used_in:
        lines.append("  used in: " + "; ".join(f"{p} ({', '.join(t)})" for p, t in e.used_in.items()))
    elif e.used_in is not None:
        lines.append("  used in: no table of the reproduced papers")
    lines.append(f"  parameters ({e.config_key}.*, e.g. --set {e.config_key}.NAME=VALUE):"
                 if e.params else f"  parameters ({e.config_key}.*):")
    lines += format_params(e.params)
    return "\n".join(lines)
