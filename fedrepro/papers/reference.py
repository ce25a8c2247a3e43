"""Access to the quoted tables: ``paper_table("fedpft", "T-C10")`` -> a pandas DataFrame.

Cells hold the paper's value as printed ("74.10±1.95" becomes mean 74.10, std 1.95 in the
``*_std`` column). Each paper's quoted tables live in its package (``fedrepro.papers.<paper>.reference``).
"""
from __future__ import annotations

import importlib
import importlib.util
import re

import pandas as pd

from ..errors import ConfigError
from . import PAPERS

_CELL = re.compile(r"^\s*(-?[\d.]+)\s*(?:±\s*([\d.]+))?\s*$")


def _with_reference() -> list[str]:
    return [p for p in PAPERS if importlib.util.find_spec(f"fedrepro.papers.{p}.reference") is not None]


def paper_tables(paper: str) -> dict[str, dict]:
    valid = _with_reference()
    if paper not in valid:
        raise ConfigError(f"unknown paper {paper!r}; valid: {', '.join(valid)}")
    return importlib.import_module(f"fedrepro.papers.{paper}.reference").TABLES


def _parse(cell: str) -> tuple[float, float | None]:
    m = _CELL.match(cell)
    if not m:
        raise ValueError(f"cannot parse table cell {cell!r}")
    return float(m.group(1)), (float(m.group(2)) if m.group(2) else None)


def paper_table(paper: str, name: str, with_std: bool = False) -> pd.DataFrame:
    """One quoted table, rows = the paper's rows, columns = its columns (accuracy in %)."""
    tables = paper_tables(paper)
    if name not in tables:
        raise ConfigError(f"unknown table {name!r} for {paper}; valid: {', '.join(tables)}")
    t = tables[name]
    rows = {}
    for row, cells in t["rows"].items():
        values = {}
        for col, cell in zip(t["columns"], cells.split("|")):
            mean, std = _parse(cell)
            values[col] = mean
            if with_std:
                values[f"{col}_std"] = std
        rows[row] = values
    df = pd.DataFrame.from_dict(rows, orient="index")
    df.index.name = t.get("index", "method")
    df.attrs["source"] = t["source"]
    return df


def quarter_of_smallest_gap(paper: str, table: str, a: str, b: str, columns) -> float:
    """A quarter of the smallest gap row ``a`` − row ``b`` over ``columns`` of the quoted ``table``, as a
    fraction (never below 0): the margin of a claim the paper words as "outperforms". A quarter
    leaves room for our smaller runs; the gap still has to be real."""
    t = paper_table(paper, table)
    return max(0.0, round(float(min(t.loc[a, c] - t.loc[b, c] for c in columns)) / 4 / 100, 4))


def beside(ours: pd.DataFrame, paper: pd.DataFrame, ours_label: str = "ours", paper_label: str = "paper",
           rename_columns: dict | None = None) -> pd.DataFrame:
    """Our table and the paper's side by side, rows aligned on the index (methods, settings).

    ``ours`` is typically :func:`fedrepro.pivot_mean_std` output; ``rename_columns`` maps our column
    labels (e.g. α = 0.1) onto the paper's ("α=0.1") so that the two halves line up. Rows only one
    side has are kept, with blanks on the other.
    """
    ours = ours.rename(columns=rename_columns or {})
    ours.columns = [str(c) for c in ours.columns]
    out = pd.concat({ours_label: ours, paper_label: paper.astype(object)}, axis=1)
    order = list(dict.fromkeys([*ours.index, *paper.index]))
    return out.reindex(order).fillna("")
