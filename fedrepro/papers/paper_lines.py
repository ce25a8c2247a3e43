"""The paper profile against the paper, line by line: for each of a paper's settings (its main
table, and each other setting whose values the paper states apart), one row per item of the setup
(clients, participation, rounds, local epochs, batch, optimiser and rates, model, input size,
prompts, data split) with the paper's value, ours, the passage that gives the paper's, and whether
they agree.

Each paper declares its rows in ``fedrepro/papers/<paper>/paper_lines.py`` (``SETTINGS``: a tuple of
:class:`Setting`). Our value is never typed there: each :class:`Line` reads it off the config of
one row of one of the paper's tables at the paper profile (:class:`Row`), built as the table
builds its runs (:meth:`~fedrepro.papers.tables.TableDef.configs_by_column`), so the table cannot
drift from the code. The rows are shown on each paper's results page
(:mod:`fedrepro.app.results_page`), and every row that does not match joins what the paper's page
lists as left open (:func:`fedrepro.papers.differences.left_open`), generated from this table.

A row's status: ``match``; ``MISMATCH``; ``not stated`` where the paper gives no value (the row
names the passage checked, and shows ours); ``not run`` where no table of ours runs the setting
(a mismatch too).
"""
from __future__ import annotations

import importlib
import importlib.util
import inspect
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from ..config import RunConfig
from . import PAPERS
from . import paper as package
from . import setup

PROFILE = "paper"
MATCH, MISMATCH, NOT_STATED, NOT_RUN = "match", "MISMATCH", "not stated", "not run"
# A line's ``expect`` where the paper gives no value.
SILENT = object()
# The CIFAR loaders read the datasets' own 32×32 arrays and take no size option (fedrepro.data.cifar).
NATIVE_SIZE = {"cifar10": 32, "cifar100": 32}


@dataclass(frozen=True)
class Row:
    """The config of one row of one of our tables at the paper profile, and what lines read off it."""

    cfg: RunConfig
    table: Any  # the TableDef
    runs: tuple[RunConfig, ...] = ()  # every run of the table's column (seed 0), the row's included

    @property
    def params(self) -> Any:
        """The method's resolved arguments (its ``Params`` with the row's ``method.args``)."""
        from ..methods import METHODS  # defers torch: the results pages import this module

        return METHODS.get(self.cfg.method.name).parse_params(self.cfg.method.args)

    @property
    def per_round(self) -> int:
        """Clients trained per round: the engine's own sampling over the clients not held out."""
        from ..fl.engine import sample_clients  # defers torch

        d = self.cfg.data
        return len(sample_clients(self.cfg.seed, 0, list(range(d.num_clients - d.holdout_clients)),
                                  self.cfg.train.participation))

    @property
    def input_size(self) -> int | None:
        """The side of the images the loader hands the model: its ``image_size`` option, else the
        loader's default, else the dataset's own size; None where none is known."""
        from ..data.registry import DATASETS  # defers torch (the loaders)

        d = self.cfg.data
        if "image_size" in d.dataset_args:
            return int(d.dataset_args["image_size"])
        option = inspect.signature(DATASETS.get(d.dataset)).parameters.get("image_size")
        if option is not None and option.default is not inspect.Parameter.empty:
            return int(option.default)
        return NATIVE_SIZE.get(d.dataset)

    @property
    def search(self) -> Any:
        """The table's learning-rate search at the paper profile (None where it runs the setup's rate)."""
        return self.table.search(PROFILE)


def same(expect: Any, ours: Any) -> bool:
    """Equal, numbers within float rounding, sequences item by item."""
    if isinstance(expect, (list, tuple)) and isinstance(ours, (list, tuple)):
        return len(expect) == len(ours) and all(same(e, o) for e, o in zip(expect, ours))
    numbers = (int, float)
    if isinstance(expect, numbers) and isinstance(ours, numbers) and not isinstance(expect, bool):
        return math.isclose(float(expect), float(ours), rel_tol=1e-9, abs_tol=1e-12)
    return expect == ours


def shown(value: Any) -> str:
    """A value as the table shows it: None as "none", a sequence as its items."""
    if value is None:
        return "none"
    if isinstance(value, (list, tuple)):
        return ", ".join(shown(v) for v in value)
    return str(value)


@dataclass(frozen=True)
class Line:
    """One item: the paper's value as it states it (``paper``), where (``source``: the section or
    table and our paraphrase of the passage), how to read ours off a :class:`Row` (``ours``), the
    paper's value in the terms ours reads (``expect``; :data:`SILENT` where the paper gives none),
    how the two compare (``agree``, default :func:`same`) and how ours is shown (``show``)."""

    item: str
    paper: str
    source: str
    ours: Callable[[Row], Any]
    expect: Any = SILENT
    agree: Callable[[Any, Any], bool] = same
    show: Callable[[Any], str] = shown


@dataclass(frozen=True)
class Setting:
    """A setting of the paper (``name``: e.g. "Table 1, CIFAR-100, pathological") and the row of our
    table that runs it: ``table`` (a key of the paper's ``TABLES``), ``column`` (the table's paper
    column, where it runs several) and ``row`` (config values that pick the row: dotted keys)."""

    name: str
    table: str
    lines: tuple[Line, ...]
    row: Mapping[str, Any] = field(default_factory=dict)
    column: str | None = None


def has_lines(paper: str) -> bool:
    return paper in PAPERS and importlib.util.find_spec(f"fedrepro.papers.{paper}.paper_lines") is not None


def settings(paper: str) -> tuple[Setting, ...]:
    return tuple(importlib.import_module(f"fedrepro.papers.{paper}.paper_lines").SETTINGS)


def _value(cfg: RunConfig, key: str) -> Any:
    node: Any = cfg
    for part in key.split("."):
        node = node.get(part) if isinstance(node, Mapping) else getattr(node, part)
    return node


# The runs of a table's column at the paper profile, by (paper, table, column, the hashes of the setups
# the table starts from): building them validates every config (tens of ms each), and a results pass
# asks for each paper's table more than once. A changed setup changes the key.
_RUNS: dict[tuple, list[RunConfig]] = {}


def _runs(paper: str, table: Any, column: str | None) -> list[RunConfig]:
    columns = table.paper_columns(PROFILE) or {}
    starts = [table.setup, *(c.setup for c in columns.values())]
    key = (paper, table.name, column, *(setup(paper, PROFILE, v).hash() for v in dict.fromkeys(starts)))
    if key not in _RUNS:
        _RUNS[key] = table.configs_by_column(PROFILE, seeds=[0], table_seeds=[0]).get(column, [])
    return _RUNS[key]


def row_config(paper: str, setting: Setting) -> Row | None:
    """The first run (lowest seed) of the setting's row in its table at the paper profile; None where
    the paper has no such table, column or row."""
    tables = package(paper).TABLES
    if setting.table not in tables:
        return None
    table = tables[setting.table]
    runs = _runs(paper, table, setting.column)
    for cfg in runs:
        if all(same(v, _value(cfg, k)) for k, v in setting.row.items()):
            return Row(cfg, table, tuple(runs))
    return None


def _status(line: Line, ours: Any) -> str:
    if line.expect is SILENT:
        return NOT_STATED
    return MATCH if line.agree(line.expect, ours) else MISMATCH


def lines(paper: str) -> list[dict]:
    """One dict per line of every setting of ``paper``: ``setting``, ``item``, ``paper``, ``ours``,
    ``source``, ``status``."""
    out = []
    for s in settings(paper):
        row = row_config(paper, s)
        if row is None:
            # One row for the whole setting: none of its items can be read where nothing runs it.
            stated = [line for line in s.lines if line.expect is not SILENT] or list(s.lines)
            out.append({"setting": s.name, "item": "the setting itself",
                        "paper": "; ".join(f"{line.item}: {line.paper}" for line in stated),
                        "ours": f"no run of ours (no row {dict(s.row)} of a table {s.table!r}"
                                + (f", column {s.column!r}" if s.column else "") + ")",
                        "source": "; ".join(dict.fromkeys(line.source for line in stated)), "status": NOT_RUN})
            continue
        for line in s.lines:
            value = line.ours(row)
            out.append({"setting": s.name, "item": line.item, "paper": line.paper, "ours": line.show(value),
                        "source": line.source, "status": _status(line, value)})
    return out


def mismatches(paper: str, rows: list[dict] | None = None) -> list[dict]:
    """The lines of ``paper`` whose value ours does not match, or that no run of ours has (none for a
    paper without lines); :func:`fedrepro.papers.differences.left_open` lists them as left open."""
    if not has_lines(paper):
        return []
    return [r for r in (lines(paper) if rows is None else rows) if r["status"] in (MISMATCH, NOT_RUN)]


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def markdown(paper: str, rows: list[dict] | None = None) -> list[str]:
    """The table as Markdown lines: setting | item | paper | ours (paper profile) | source | match."""
    rows = lines(paper) if rows is None else rows
    out = ["| setting | item | paper | ours (paper profile) | source | match |", "|---|---|---|---|---|---|"]
    for r in rows:
        status = r["status"] if r["status"] in (MATCH, NOT_STATED) else f"**{r['status']}**"
        out.append(f"| {_cell(r['setting'])} | {_cell(r['item'])} | {_cell(r['paper'])} | {_cell(r['ours'])} | "
                   f"{_cell(r['source'])} | {status} |")
    return out


# Readers shared by the papers' lines ----------------------------------------------------------


def config_value(dotted: str) -> Callable[[Row], Any]:
    """Our value read off the row's config at ``dotted`` (``"train.rounds"``)."""
    def read(r: Row) -> Any:
        value = r.cfg
        for part in dotted.split("."):
            value = getattr(value, part)
        return value

    return read


def per_round(r: Row) -> int:
    return r.per_round


clients = config_value("data.num_clients")
held_out = config_value("data.holdout_clients")
rounds = config_value("train.rounds")
local_epochs = config_value("train.local_epochs")
batch_size = config_value("train.batch_size")
lr = config_value("train.lr")
momentum = config_value("train.momentum")
weight_decay = config_value("train.weight_decay")


def class_options(r: Row) -> dict:
    """The dataset options that pick a subset of its classes (any option named for classes)."""
    return {k: v for k, v in r.cfg.data.dataset_args.items() if "class" in k}


def show_classes(options: dict) -> str:
    return with_args("subset", options) if options else "every class the dataset holds (no class option set)"


def keeps_classes(n: int, options: dict) -> bool:
    """Whether a class option keeps ``n`` classes: a count of ``n``, or ``n`` named classes."""
    return any(v == n if isinstance(v, int) else isinstance(v, (list, tuple)) and len(v) == n
               for v in options.values())


def augment(r: Row) -> str:
    return r.cfg.train.augment


def input_size(r: Row) -> int | None:
    return r.input_size


def dataset(r: Row) -> str:
    return r.cfg.data.dataset


def model(r: Row) -> str:
    return r.cfg.model.name


def model_args(r: Row) -> dict:
    return dict(r.cfg.model.args)


def partition(r: Row) -> str:
    return r.cfg.data.partition


def partition_arg(key: str) -> Callable[[Row], Any]:
    return lambda r: r.cfg.data.partition_args.get(key)


def method_arg(key: str) -> Callable[[Row], Any]:
    return lambda r: getattr(r.params, key)


def with_args(name: str, args: Mapping[str, Any]) -> str:
    return f"{name} ({', '.join(f'{k}={v}' for k, v in sorted(args.items()))})" if args else name


def split(r: Row) -> str:
    """The partitioner and its arguments, the data subsampling and the held-out clients, as shown."""
    d = r.cfg.data
    extra = [f"{k}={v}" for k, v in (("max_train", d.max_train), ("max_test", d.max_test),
                                     ("holdout_clients", d.holdout_clients)) if v]
    return with_args(d.partition, d.partition_args) + (f"; {', '.join(extra)}" if extra else "")


def lr_grid(r: Row) -> tuple | None:
    """The rates the table searches per row (None: the setup's rate, unsearched)."""
    return searched(r, "train.lr")


def searched(r: Row, key: str) -> tuple | None:
    """The values of ``key`` the table's search tries for this row (None: not searched)."""
    s = r.search
    if s is None or s.key != key or (s.applies is not None and not s.applies(r.cfg)):
        return None
    return tuple(s.grid)


def across(key: str) -> Callable[[Row], tuple]:
    """The distinct values of ``key`` over the table column's runs, in order (e.g. the α it runs)."""
    return lambda r: tuple(dict.fromkeys(_value(c, key) for c in r.runs))


__all__ = ["Line", "MATCH", "MISMATCH", "NOT_RUN", "NOT_STATED", "Row", "SILENT", "Setting", "has_lines", "lines",
           "markdown", "mismatches", "row_config", "same", "settings"]
