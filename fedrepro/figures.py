"""Where figures go, and the plots every notebook shares (learning curves, bar charts of results).

Figures go under the output root (:mod:`fedrepro.settings`): the ``laptop`` profile's to
``figures/`` (in the repository, where ``make reproduce`` writes, the committed ones shown in the
README), ``paper``'s to ``figures/paper/``, every other profile's to ``output/<profile>/figures/``,
so that a CI or nbval run never overwrites them. ``FEDREPRO_FIGURES`` moves the folder alone.

In a notebook kernel each saved figure is also shown inline (:mod:`fedrepro.inline`), whatever
``MPLBACKEND`` says, so that an executed notebook carries its plots.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence

import matplotlib

matplotlib.use(os.environ.get("MPLBACKEND", "Agg"), force=False)
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from . import inline, trace  # noqa: E402
from .host import repo_root  # noqa: F401,E402  (part of this module's API)
from .settings import output_path  # noqa: E402
from .store import RunResult  # noqa: E402

inline.activate()


def figures_dir(profile: str) -> Path:
    """The folder of ``profile``'s figures (created; a ConfigError naming the setting when it
    cannot be written)."""
    return output_path("figures", profile, create=True)


def savefig(fig, name: str, profile: str) -> Path:
    """Save ``fig`` as ``<figures_dir>/<name>.png`` (written to a temporary file, then renamed) and
    return the path (printed by notebooks); in a notebook kernel, also show it inline."""
    path = figures_dir(profile) / f"{name}.png"
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        fig.savefig(tmp, dpi=110, bbox_inches="tight", format="png")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    trace.record("figure", path=str(path))
    print(f"figure saved: {path}")
    inline.show(fig)
    return path


def plot_curves(results: dict[str, Sequence[RunResult]], ax=None, metric: str = "acc_mean", title: str | None = None,
                scale: float = 100.0, ylabel: str = "mean client test accuracy (%)"):
    """Mean learning curve over seeds (band = ± std across seeds) for each labelled group of runs;
    values × ``scale`` (100: accuracies in %; 1 for a loss). A group whose runs never logged
    ``metric`` (a loss part its method has not, or a run stored before the column existed) is left
    out, and its label is listed in the axes' title."""
    if ax is None:
        _, ax = plt.subplots(figsize=(5, 3.5))
    missing = []
    for label, runs in results.items():
        series = [r.rounds.set_index("round")[metric].dropna().rename(i) for i, r in enumerate(runs)
                  if metric in r.rounds.columns]
        if not any(len(x) for x in series):
            missing.append(label)
            continue
        curves = pd.concat(series, axis=1)
        m, s = scale * curves.mean(axis=1), scale * curves.std(axis=1).fillna(0.0)
        ax.plot(m.index, m.values, label=label)
        ax.fill_between(m.index, (m - s).values, (m + s).values, alpha=0.2)
    ax.set_xlabel("round")
    ax.set_ylabel(ylabel)
    if missing:
        title = f"{title or ''}\n(no {metric} logged: {', '.join(missing)})".strip()
    if title:
        ax.set_title(title, fontsize=9 if missing else None)
    ax.grid(alpha=0.3)
    if len(results) > len(missing):
        ax.legend(fontsize=8)
    return ax


def plot_bars(table: pd.DataFrame, x: str, hue: str, value: str = "best", ax=None, title: str | None = None,
              xlabel: str | None = None):
    """Grouped bars of mean ± std over seeds (``table`` is the tidy per-run table of ``run_grid``)."""
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 3.5))
    g = table.groupby([x, hue], sort=False)[value].agg(["mean", "std"]).fillna(0.0)
    xs = list(dict.fromkeys(table[x]))
    hues = list(dict.fromkeys(table[hue]))
    width = 0.8 / len(hues)
    for j, h in enumerate(hues):
        means = [100 * g.loc[(xv, h), "mean"] if (xv, h) in g.index else float("nan") for xv in xs]
        stds = [100 * g.loc[(xv, h), "std"] if (xv, h) in g.index else 0.0 for xv in xs]
        ax.bar([i + j * width for i in range(len(xs))], means, width, yerr=stds, label=str(h), capsize=2)
    ax.set_xticks([i + width * (len(hues) - 1) / 2 for i in range(len(xs))])
    ax.set_xticklabels([str(v) for v in xs])
    ax.set_xlabel(xlabel or x)
    ax.set_ylabel(f"{value} mean client accuracy (%)")
    if title:
        ax.set_title(title)
    ax.legend(fontsize=8, loc="lower center", ncol=len(hues), framealpha=0.9)
    ax.grid(axis="y", alpha=0.3)
    return ax


def plot_verdicts(verdicts: pd.DataFrame, ax=None, title: str | None = None):
    """A claims × rounds grid of verdicts (:func:`fedrepro.analysis.by_round.verdicts_by_round`):
    green PASS, amber INCONCLUSIVE, red FAIL, grey NOT RUN."""
    from matplotlib.colors import ListedColormap

    code = {"FAIL": 0, "NOT RUN": 1, "INCONCLUSIVE": 2, "PASS": 3}
    grid = verdicts.assign(v=verdicts["verdict"].map(code)).pivot(index="claim_id", columns="round", values="v")
    grid = grid.loc[list(dict.fromkeys(verdicts["claim_id"]))]
    if ax is None:
        _, ax = plt.subplots(figsize=(min(14, 2 + 0.35 * grid.shape[1]), 0.5 + 0.45 * len(grid)))
    ax.imshow(grid.to_numpy(dtype=float), cmap=ListedColormap(["#e8a0a6", "#dddddd", "#f5d58a", "#9fd8ad"]), vmin=0, vmax=3,
              aspect="auto", interpolation="nearest")
    ax.set_yticks(range(len(grid)))
    ax.set_yticklabels(grid.index, fontsize=8)
    ax.set_xticks(range(grid.shape[1]))
    ax.set_xticklabels(grid.columns, fontsize=7)
    ax.set_xlabel("runs cut after round")
    ax.set_title(title or "verdict by round (green PASS, amber INCONCLUSIVE, red FAIL, grey NOT RUN)")
    return ax


def plot_lr_search(search: pd.DataFrame, ax=None, title: str | None = None):
    """A learning-rate search (:meth:`fedrepro.papers.tables.TableDef.search_table`) as a heatmap:
    rows × rates, each cell the validation score (%), the chosen rate boxed."""
    import matplotlib.pyplot as plt
    import numpy as np

    rates = [c for c in search.columns if c.startswith("lr=")]
    values = 100 * search[rates].to_numpy(dtype=float)
    if ax is None:
        _, ax = plt.subplots(figsize=(1.2 * len(rates) + 2.5, 0.32 * len(search) + 1.2))
    shown = np.where(np.isfinite(values), values, np.nan)  # a diverged rate (−inf) shows blank
    im = ax.imshow(shown, aspect="auto", cmap="viridis")
    ax.set_xticks(range(len(rates)), [r.removeprefix("lr=") for r in rates])
    ax.set_yticks(range(len(search)), list(search.index), fontsize=8)
    ax.set_xlabel("learning rate")
    for i, (name, row) in enumerate(search.iterrows()):
        for j, r in enumerate(rates):
            v = values[i, j]
            ax.text(j, i, f"{v:.0f}" if np.isfinite(v) else "div.", ha="center", va="center", fontsize=7,
                    color="white" if not np.isfinite(v) or v < np.nanmean(shown) else "black")
        j = next(k for k, r in enumerate(rates) if float(r.removeprefix("lr=")) == row["chosen lr"])
        ax.add_patch(plt.Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, edgecolor="red", linewidth=1.5))
    ax.figure.colorbar(im, ax=ax, label="validation accuracy (%)")
    ax.set_title(title or "learning-rate search (validation data; chosen rate boxed)")
    return ax
