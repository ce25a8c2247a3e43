"""Result tables of a grid: mean ± std over seeds, paper-style cells, and runs grouped by a column."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import pandas as pd

from .store import RunResult


def pivot_mean_std(table: pd.DataFrame, index: str, columns: str | None = None, metric: str = "best",
                   scale: float = 100.0, label=None) -> pd.DataFrame:
    """A paper-style table of ``"mean ± std"`` strings (accuracy in %): rows ``index`` (e.g. methods),
    columns ``columns`` (e.g. α), each cell over seeds; a cell from one seed shows no ± and a
    ``¹`` mark, so it is never mistaken for a 3-seed mean. ``label`` maps column values to text
    (e.g. ``lambda a: f"α={a}"``, the paper tables' column names)."""
    keys = [index] if columns is None else [index, columns]
    ms = mean_std(table, keys, [metric])
    # A run that diverged has no final value: its cell says so instead of showing a number (or the
    # mean of the seeds that did not diverge, with how many did).
    flags = pd.DataFrame({"lost": table[metric].isna(),
                          "gone": table["diverged_round"].notna() if "diverged_round" in table else False})
    counts = flags.groupby([table[k] for k in keys], sort=False).sum()

    def cell(m, sd, n, lost, gone):
        if lost == n:
            return "diverged" if gone else "n/a"
        text = f"{scale * m:.2f} ± {scale * sd:.2f}" if n - lost > 1 else f"{scale * m:.2f}¹"
        return text + (f" ({lost} of {n} {'diverged' if gone else 'n/a'})" if lost else "")

    text = [cell(m, sd, n, int(lost), int(gone)) for m, sd, n, lost, gone in
            zip(ms[f"{metric}_mean"], ms[f"{metric}_std"], ms["seeds"], counts["lost"], counts["gone"])]
    if columns is None:
        return pd.DataFrame({metric: text}, index=pd.Index(ms[index], name=index))
    cells = dict(zip(zip(ms[index], ms[columns]), text))
    rows = list(dict.fromkeys(table[index]))
    cols = list(dict.fromkeys(table[columns]))
    return pd.DataFrame([[cells.get((r, c), "") for c in cols] for r in rows],
                        index=pd.Index(rows, name=index), columns=[label(c) if label else c for c in cols])


def results_by(table: pd.DataFrame, by: str | Sequence[str]) -> dict[Any, list[RunResult]]:
    """Group the finished runs listed in a :func:`run_grid` table: ``{group value: [RunResult, ...]}``."""
    return {key: [RunResult(Path(p)) for p in group["path"]]
            for key, group in table.groupby(by if isinstance(by, str) else list(by), sort=False)}


def mean_std(table: pd.DataFrame, by: Sequence[str], cols: Sequence[str] = ("best", "final")) -> pd.DataFrame:
    """Mean ± std over seeds (sample std, ddof=1; 0 for a single seed), one row per group; NaN values
    (a diverged run's) are left out of both, and a group without any value has a NaN mean."""
    g = table.groupby(list(by), sort=False)
    out = g[list(cols)].agg(["mean", "std"])
    # One seed has no spread (std 0); a group with no value at all (its runs diverged) keeps a NaN mean.
    stds = [c for c in out.columns if c[1] == "std"]
    out[stds] = out[stds].fillna(0.0)
    out.columns = [f"{c}_{s}" for c, s in out.columns]
    out["seeds"] = g.size()
    return out.reset_index()


def format_mean_std(table: pd.DataFrame, by: Sequence[str], cols: Sequence[str] = ("best", "final"),
                    scale: float = 100.0) -> pd.DataFrame:
    """The same as :func:`mean_std` with ``"81.2 ± 0.4"`` strings (accuracy in %), for display."""
    ms = mean_std(table, by, cols)
    for c in cols:
        ms[c] = [f"{m * scale:.2f} ± {s * scale:.2f}" for m, s in zip(ms[f"{c}_mean"], ms[f"{c}_std"])]
    return ms[list(by) + list(cols) + ["seeds"]]
