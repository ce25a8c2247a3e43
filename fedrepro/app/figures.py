"""Where figures go, and the plots every notebook shares (learning curves, bar charts of results).

Figures go under the output root (:mod:`fedrepro.env.settings`): the ``laptop`` profile's to
``figures/`` (in the repository, where ``make reproduce`` writes, the committed ones shown in the
README), ``paper``'s to ``figures/paper/``, every other profile's to ``output/<profile>/figures/``,
so that a CI or nbval run never overwrites them. ``FEDREPRO_FIGURES`` moves the folder alone.

In a notebook kernel each saved figure is also shown inline (:mod:`fedrepro.env.inline`), whatever
``MPLBACKEND`` says, so that an executed notebook carries its plots.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

import matplotlib

matplotlib.use(os.environ.get("MPLBACKEND", "Agg"), force=False)
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from ..env import figure_check, inline, style, trace  # noqa: E402
from ..env.host import repo_root  # noqa: F401,E402  (part of this module's API)
from ..env.settings import output_path, output_root, source, under_output_root  # noqa: E402
from ..runs.store import RunResult  # noqa: E402

inline.activate()
style.apply()


def figures_dir(profile: str) -> Path:
    """The folder of ``profile``'s figures (created; a ConfigError naming the setting when it
    cannot be written)."""
    return output_path("figures", profile, create=True)


# Whether this process has said where the output root is (savefig says it once).
_ROOT_SHOWN: list[bool] = []


def savefig(fig, name: str, profile: str, caption: str | None = None) -> Path:
    """Save ``fig`` as ``<figures_dir>/<name>.png`` (written to a temporary file, then renamed) and
    return the path (printed by notebooks); in a notebook kernel, also show it inline.

    First the figure check (:mod:`fedrepro.env.figure_check`; ``caption``: the text printed with the
    figure, which may name its bands and notes) prints its problems; under
    ``FEDREPRO_FIGURE_CHECK=strict`` a figure with problems raises ``FigureCheckError`` and is not
    written, unless ``figure_check.EXEMPT`` names it (then its problems are printed, with the reason)."""
    mode = figure_check.mode()
    try:
        problems = figure_check.check(fig, caption) if mode != "off" else []
    except Exception as e:  # noqa: BLE001  a figure the check cannot read must not cost the run its figure
        if mode == "strict":
            raise
        problems = [figure_check.Problem("check", "figure", f"could not run: {type(e).__name__}: {e}")]
    if problems:
        if mode == "strict" and name not in figure_check.EXEMPT:
            raise figure_check.FigureCheckError(f"{name}: figure check failed:\n  " + "\n  ".join(map(str, problems)))
        why = f" (exempt: {figure_check.EXEMPT[name]})" if mode == "strict" else ""
        print(f"figure check, {name}: {len(problems)} problem(s){why}\n  " + "\n  ".join(map(str, problems)))
    path = figures_dir(profile) / f"{name}.png"
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        fig.savefig(tmp, dpi=110, bbox_inches="tight", format="png")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    trace.record("figure", path=str(path))
    # Relative to the output root, so an executed notebook (and the site built from it) does not
    # carry the absolute paths of the machine that ran it.
    rel = under_output_root(path)
    # Once per process, where "the output root" is, for a notebook run by hand from another folder; a
    # render by `fedrepro reproduce` (traced) keeps this machine's paths out of the pages it makes.
    if rel and not _ROOT_SHOWN and not trace.active():
        _ROOT_SHOWN.append(True)
        print(f"output root: {output_root()} ({source()})")
    print(f"figure saved: {f'{rel} (under the output root)' if rel else path}")
    inline.show(fig)
    return path


def plot_curves(results: dict[str, Sequence[RunResult]], ax=None, metric: str = "acc_mean", title: str | None = None,
                scale: float = 100.0, ylabel: str = "mean client test accuracy (%)", legend: str | None = "right"):
    """Mean learning curve over seeds (band = ± std across seeds, none for one seed) for each
    labelled group of runs, each in its fixed :mod:`fedrepro.env.style`; values × ``scale`` (100:
    accuracies in %; 1 for a loss). A group whose runs never logged ``metric`` (a loss part its
    method has not, or a run stored before the column existed) is left out, and its label is listed
    in the axes' title. ``legend``: ``"right"`` or ``"below"`` the axes, or None (a panel of a
    figure whose legend sits elsewhere, :func:`fedrepro.env.style.figure_legend`)."""
    if ax is None:
        _, ax = plt.subplots(figsize=(5, 3.5))
    missing = []
    styles = style.styles_for(results)
    for label, runs in results.items():
        series = [r.rounds.set_index("round")[metric].dropna().rename(i) for i, r in enumerate(runs)
                  if metric in r.rounds.columns]
        if not any(len(x) for x in series):
            missing.append(label)
            continue
        curves = pd.concat(series, axis=1)
        # A run that stopped when flat (train.stop_when_flat) holds its final value from its stop on,
        # as its claims read it: without that the mean after a stop would be the still-moving runs'.
        for i, r in enumerate(runs):
            if r.summary.get("stopped_early") and i in curves.columns:
                last = curves[i].last_valid_index()
                curves.loc[curves.index > last, i] = curves.at[last, i]
        m = scale * curves.mean(axis=1)
        st = styles[label]
        many = curves.shape[1] > 1
        name = style.display_label(label)
        ax.plot(m.index, m.values, label=name if many else f"{name}{style.SINGLE_SEED_MARK}", color=st.color,
                linestyle=st.linestyle, linewidth=st.linewidth, marker=st.marker, markersize=3,
                markevery=max(1, len(m) // 8))
        if many:
            s = scale * curves.std(axis=1).fillna(0.0)
            style.mark_spread(ax.fill_between(m.index, (m - s).values, (m + s).values, alpha=0.15, color=st.color,
                                              linewidth=0))
    ax.set_xlabel("round")
    ax.set_ylabel(ylabel)
    if missing:
        title = f"{title or ''}\n(no {metric} logged: {', '.join(map(str, missing))})".strip()
    if title:
        ax.set_title(title, fontsize=9 if missing else None)
    ax.grid(alpha=0.3)
    if legend and len(results) > len(missing):
        style.legend_outside(ax, legend)
    return ax


def our_datasets(table: pd.DataFrame) -> list[str]:
    """The dataset ids of the runs of ``table`` (a ``run_grid`` table: read from each run's stored
    config by its ``path``), in first-seen order; none for a table without paths."""
    if "path" not in table.columns:
        return []
    return list(dict.fromkeys(RunResult(p).config.data.dataset for p in dict.fromkeys(table["path"].dropna())))


def _paper_entry(paper_label: str, table: pd.DataFrame, dataset: str | Iterable[str] | None) -> str:
    """``paper_label`` with the note that the paper's numbers come from another dataset than ours
    (:func:`fedrepro.env.style.with_setting_note`) where its setting names none of ours: ``dataset``,
    else the datasets of ``table``'s runs."""
    return style.with_setting_note(paper_label, our_datasets(table) if dataset is None else dataset)


def _bold_ticks(ticks, names: Sequence[str]) -> None:
    """The tick labels whose name (the label, or what a key says it means) is a paper's own method
    beside others (:func:`fedrepro.env.style.emphasised`) in bold."""
    strong = style.emphasised(names)
    for t, name in zip(ticks, names):
        if name in strong:
            t.set_fontweight("bold")


def plot_bars(table: pd.DataFrame, x: str, hue: str, value: str = "best", ax=None, title: str | None = None,
              xlabel: str | None = None, paper: Callable[[Any, Any], float | None] | None = None,
              paper_label: str | None = None, legend: str | None = "right", scale: float = 100.0,
              ylabel: str | None = None, hue_format: Callable[[Any], str] = str,
              key: Mapping[Any, str] | None = None, dataset: str | Iterable[str] | None = None):
    """Grouped bars of the mean over seeds (``table`` is the tidy per-run table of ``run_grid``), each
    hue in its fixed :mod:`fedrepro.env.style` (a paper's own method beside others emphasised). The
    error bar is ± std over seeds; a bar of one seed has none, and its hue is marked ¹ in the legend.

    ``paper(x_value, hue_value)`` gives the paper's number (in %, None where it quotes none), drawn
    as a white diamond on the bar; ``paper_label`` names it with the paper's setting, e.g.
    ``fedrepro.env.style.paper_label("CIFAR-10")``. Where that setting names none of our runs'
    datasets (``dataset``, default read from ``table``'s runs), the legend entry says the paper's
    numbers come from another dataset. ``legend``: ``"right"``, ``"below"`` or None; ``hue_format``
    writes a hue's legend label (e.g. ``lambda a: f"α = {a}"``). ``key``: what each x value means,
    where the values are codes (``{"III": "FedPFT (...)"}``), written under the axes
    (:func:`fedrepro.env.style.add_key`); a code's tick label is bold where the key names a paper's
    own method."""
    if paper is not None and not paper_label:
        raise ValueError("plot_bars(paper=...) needs paper_label naming the paper's setting, "
                         "e.g. fedrepro.env.style.paper_label('CIFAR-10')")
    if paper is not None:
        paper_label = _paper_entry(paper_label, table, dataset)
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 3.5))
    g = table.groupby([x, hue], sort=False)[value].agg(["mean", "std", "count"])
    xs = list(dict.fromkeys(table[x]))
    hues = list(dict.fromkeys(table[hue]))
    styles = style.styles_for(hues)
    width = 0.8 / len(hues)
    px, py = [], []
    single_any = False
    for j, h in enumerate(hues):
        pos = [i + j * width for i in range(len(xs))]
        cells = [g.loc[(xv, h)] if (xv, h) in g.index else None for xv in xs]
        means = [scale * c["mean"] if c is not None else float("nan") for c in cells]
        single = [c is not None and c["count"] == 1 for c in cells]
        present = [c is not None and pd.notna(c["mean"]) for c in cells]  # a run that logged no value: no bar
        all_single = any(present) and all(s for s, p in zip(single, present) if p)
        single_any |= any(single)
        name = style.display_label(hue_format(h))
        ax.bar(pos, means, width, label=f"{name}{style.SINGLE_SEED_MARK}" if all_single else name, **styles[h].bar())
        err = [(p, m, scale * c["std"]) for p, m, c, s, pr in zip(pos, means, cells, single, present) if pr and not s]
        if err:
            ex, ey, es = zip(*err)
            style.mark_spread(ax.errorbar(ex, ey, yerr=es, fmt="none", ecolor="black", elinewidth=0.8, capsize=2))
        for p, m, s, pr in zip(pos, means, single, present):
            if s and not all_single and pr:  # a hue with one seed here and several elsewhere
                ax.annotate("¹", (p, m), ha="center", va="bottom", fontsize=8)
        if paper is not None:
            for p, xv, pr in zip(pos, xs, present):
                v = paper(xv, h) if pr else None  # beside our bar only: a lone diamond reads as ours missing
                if v is not None and v == v:
                    px.append(p)
                    py.append(float(v))
    if px:
        ax.plot(px, py, label=paper_label, **style.PAPER_MARKER)
    ax.set_xticks([i + width * (len(hues) - 1) / 2 for i in range(len(xs))])
    ticks = ax.set_xticklabels([style.display_label(v) for v in xs])
    key = {v: key[v] for v in xs if v in key} if key else {}
    _bold_ticks(ticks, [key.get(v, style.display_label(v)) for v in xs])
    ax.set_xlabel(xlabel if xlabel is not None else x)
    ax.set_ylabel(ylabel if ylabel is not None else f"{value} mean client accuracy (%)")
    if title:
        ax.set_title(title)
    if legend:
        style.legend_outside(ax, legend, title=style.SINGLE_SEED_NOTE if single_any else None)
    ax.grid(axis="y", alpha=0.3)
    if key:
        style.add_key(ax, {style.display_label(v): text for v, text in key.items()})
    return ax


def plot_lines(table: pd.DataFrame, x: str, hue: str | None, value: str = "final", ax=None, title: str | None = None,
               xlabel: str | None = None, ylabel: str | None = None, scale: float = 100.0,
               paper: Callable[[Any, Any], float | None] | None = None, paper_x: Sequence | None = None,
               paper_label: str | None = None, legend: str | None = "right", mark_single: bool = True,
               dataset: str | Iterable[str] | None = None):
    """Mean over seeds against ``x`` for each ``hue`` (one line without), in the hue's fixed
    :mod:`fedrepro.env.style` (a paper's own method beside others drawn thicker); error bars ± std
    where a point has several seeds, none (and ¹ in the legend) where the line has one.
    ``paper(x_value, hue_value)`` at ``paper_x`` (the paper's own grid, default ours) draws the
    paper's numbers (%) in the same colour, hollow and dotted; ``paper_label`` names their setting,
    and says where it is another dataset than ours (``dataset``, default read from ``table``'s
    runs; as :func:`plot_bars`). ``mark_single=False``: rows that are not seeds (a quoted table's
    means) carry no ¹."""
    if paper is not None and not paper_label:
        raise ValueError("plot_lines(paper=...) needs paper_label naming the paper's setting, "
                         "e.g. fedrepro.env.style.paper_label('CIFAR-100')")
    if paper is not None:
        paper_label = _paper_entry(paper_label, table, dataset)
    if ax is None:
        _, ax = plt.subplots(figsize=(5.5, 3.5))
    groups = [(None, table)] if hue is None else list(table.groupby(hue, sort=False))
    styles = style.styles_for([h for h, _ in groups if h is not None])
    drew_paper = False
    for h, g in groups:
        st = styles.get(h, style.styles_for(["_"])["_"])
        m = g.groupby(x)[value].agg(["mean", "std", "count"])
        single = mark_single and bool((m["count"] == 1).all())
        label = None if h is None else style.display_label(h) + (style.SINGLE_SEED_MARK if single else "")
        ax.plot(m.index, scale * m["mean"], label=label, **st.line())
        several = m[m["count"] > 1]
        if len(several):
            style.mark_spread(ax.errorbar(several.index, scale * several["mean"], yerr=scale * several["std"],
                                          fmt="none", ecolor=st.color, elinewidth=0.8, capsize=2))
        if paper is not None:
            px = [v for v in (paper_x if paper_x is not None else m.index)]
            pv = [paper(v, h) for v in px]
            pts = [(a, b) for a, b in zip(px, pv) if b is not None and b == b]
            if pts:
                # In its method's colour, named by the one "paper" entry below.
                figure_check.keyed_by(ax.plot(*zip(*pts), color=st.color, linestyle=":", marker=st.marker,
                                              markerfacecolor="white", markersize=4.5, linewidth=1)[0], paper_label)
                drew_paper = True
    if drew_paper:
        ax.plot([], [], color="black", linestyle=":", marker="o", markerfacecolor="white", label=paper_label)
    ax.set_xlabel(xlabel if xlabel is not None else x)
    ax.set_ylabel(ylabel if ylabel is not None else f"{value} mean client accuracy (%)")
    return _finish(ax, title, legend)


def _finish(ax, title: str | None, legend: str | None, grid: str = "both"):
    """The common end of a panel: its title, a light grid, the legend outside the data."""
    if title:
        ax.set_title(title)
    ax.grid(axis=grid, alpha=0.3)
    if legend:
        style.legend_outside(ax, legend)
    return ax


def plot_boxes(values: dict[Any, Sequence[float]], ax=None, title: str | None = None, ylabel: str | None = None,
               legend: str | None = "right"):
    """One box per label of ``values`` (e.g. each client's final accuracy under a method), in the
    label's fixed :mod:`fedrepro.env.style`: the box spans the quartiles, the black line is the
    median, the whiskers reach the furthest value within 1.5 IQR and each value beyond is a hollow
    marker (an outlier, as the x label then says). Every part of a box is keyed to its label's legend entry
    (:func:`fedrepro.env.figure_check.keyed_by`)."""
    if ax is None:
        _, ax = plt.subplots(figsize=(5, 3.5))
    labels = list(values)
    styles = style.styles_for(labels)
    names = [style.display_label(lab) for lab in labels]
    parts = ax.boxplot([list(values[lab]) for lab in labels], tick_labels=names, patch_artist=True,
                       medianprops={"color": "black"})
    _bold_ticks(ax.get_xticklabels(), names)
    for i, (lab, name) in enumerate(zip(labels, names)):
        box = parts["boxes"][i]
        box.set(**styles[lab].bar(), alpha=0.7, label=name)
        parts["fliers"][i].set(markeredgecolor=styles[lab].color)
        for a in [*parts["whiskers"][2 * i:2 * i + 2], *parts["caps"][2 * i:2 * i + 2], parts["medians"][i],
                  parts["fliers"][i]]:
            figure_check.keyed_by(a, name)
    if any(len(f.get_xdata()) for f in parts["fliers"]):
        ax.set_xlabel("○: a value beyond the whiskers (outlier)")
    if ylabel:
        ax.set_ylabel(ylabel)
    return _finish(ax, title, legend, grid="y")


def plot_paper_table(ref: pd.DataFrame, ax=None, rows: Sequence | None = None, columns: Sequence | None = None,
                     title: str | None = None, legend: str | None = "right", ylabel: str = "paper's accuracy (%)"):
    """A quoted table (:func:`fedrepro.papers.reference.paper_table`, values in %) as grouped bars, one
    group per column and one bar per row in the row's fixed style: the panel beside ours when the
    paper's columns (its datasets) are not ours, so that no marker could sit on a bar of ours. The
    bars are pale and carry no error bar (the quote's spread is in its table)."""
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 3.5))
    rows = [r for r in (rows if rows is not None else ref.index) if r in ref.index]
    columns = [c for c in (columns if columns is not None else ref.columns) if c in ref.columns]
    styles = style.styles_for(rows)
    width = 0.8 / max(len(rows), 1)
    for j, r in enumerate(rows):
        ax.bar([i + j * width for i in range(len(columns))], [ref.at[r, c] for c in columns], width,
               label=style.display_label(r),
               alpha=0.6, **styles[r].bar())
    ax.set_xticks([i + width * (len(rows) - 1) / 2 for i in range(len(columns))])
    ax.set_xticklabels([style.display_label(c) for c in columns])
    ax.set_ylabel(ylabel)
    return _finish(ax, title, legend, grid="y")


def plot_points(points: pd.DataFrame, x: str, y: str, ax=None, title: str | None = None, scale: float = 100.0,
                legend: str | None = "right", hollow: bool = False, highlight: object = None, zoom: bool = False):
    """One marker per row of ``points`` (its index the label: a method or a setting), in the
    label's fixed :mod:`fedrepro.env.style`; a legend names them instead of text beside each point,
    which overlaps once points crowd. ``hollow``: unfilled markers (the paper's numbers). A row
    without both values is left out (no legend entry for a point not drawn). ``highlight``: the
    label drawn larger and named beside its point. ``zoom``: the axes fit the bulk of the points; a
    point that alone would stretch an axis (:func:`fedrepro.env.figure_check.stretch`) is left
    outside and named, with its values, in a note in the corner."""
    if ax is None:
        _, ax = plt.subplots(figsize=(5, 4))
    points = points.dropna(subset=[x, y])
    styles = style.styles_for(points.index)
    for label, row in points.iterrows():
        st = styles[label]
        kw = st.point() if not hollow else {"marker": st.marker, "facecolors": "none", "edgecolors": st.color,
                                            "linewidths": 2.4 if st.emphasis else 1.4}
        big = highlight is not None and label == highlight
        ax.scatter(scale * row[x], scale * row[y], s=110 if big else 42, label=style.display_label(label),
                   zorder=4 if big else 3, **kw)
        if big:
            # Left of the point: the best method sits top right, where a label would leave the axes.
            ax.annotate(style.display_label(label), (scale * row[x], scale * row[y]), xytext=(-9, 6),
                        textcoords="offset points", ha="right", fontsize=9, fontweight="bold")
    if zoom:
        _zoom_to_bulk(ax, scale * points[x], scale * points[y])
    return _finish(ax, title, legend)


def _zoom_to_bulk(ax, xs: pd.Series, ys: pd.Series, pad: float = 0.08) -> None:
    """Axes limits round the points that remain once each point stretching an axis alone is
    dropped (at most a third of them); the dropped ones are named in a note."""
    keep = pd.Series(True, index=range(len(xs)))
    xv, yv = xs.to_numpy(dtype=float), ys.to_numpy(dtype=float)
    for _ in range(max(len(xv) // 3, 0)):
        dropped = False
        for v in (xv, yv):
            rest = v[keep.to_numpy()]
            if len(rest) >= 4 and figure_check.stretch(list(rest)) >= figure_check.OUTLIER_FACTOR:
                lo, hi = rest.min(), rest.max()
                srt = sorted(rest)
                extreme = lo if (srt[-1] - srt[1]) < (srt[-2] - srt[0]) else hi
                keep[(v == extreme) & keep.to_numpy()] = False
                dropped = True
        if not dropped:
            break
    if keep.all():
        return
    k = keep.to_numpy()
    for v, setter in ((xv, ax.set_xlim), (yv, ax.set_ylim)):
        lo, hi = v[k].min(), v[k].max()
        span = (hi - lo) or 1.0
        setter(lo - pad * span, hi + pad * span)
    off = [f"{style.display_label(lab)} ({a:.1f}, {b:.1f})" for lab, a, b, kk in zip(xs.index, xv, yv, k) if not kk]
    ax.text(0.02, 0.02, "off the axes (outlier): " + "; ".join(off), transform=ax.transAxes, fontsize=8,
            va="bottom", ha="left", color="#333333")


def cap_tall_bar(ax, heights: pd.Series, unit: str = "") -> None:
    """Where one bar of ``heights`` (a label per bar) alone stretches the y axis by figure_check's
    rule, with every bar on ``ax`` rising from 0, cap the axis just above the other bars and name
    the tall bar's value in a note. One-round timings at the smoke profile are dominated by fixed
    costs, so one method's ratio can stand far above the rest; the note keeps it readable."""
    from matplotlib.container import BarContainer

    v = pd.Series(heights, dtype=float).dropna()
    values = [e for c in ax.containers if isinstance(c, BarContainer) for e in figure_check.bar_ends(c) if pd.notna(e)]
    if v.empty or len(values) < 4 or figure_check.stretch(values) < figure_check.OUTLIER_FACTOR:
        return
    tall = v.idxmax()
    rest = max([t for t in values if t < v[tall]] or [v[tall]])
    if v[tall] < max(values) or rest <= 0:
        return  # the stretching bar is not one of ``heights``
    ax.set_ylim(top=1.3 * rest)
    ax.text(0.02, 0.97, f"off the scale (outlier): {style.display_label(tall)} at {v[tall]:.2f}{unit}",
            transform=ax.transAxes, fontsize=8, va="top", ha="left", color="#333333")


def plot_verdicts(verdicts: pd.DataFrame, ax=None, title: str | None = None):
    """A claims × rounds grid of verdicts (:func:`fedrepro.papers.verdicts.verdicts_by_round`):
    green PASS, amber INCONCLUSIVE, red FAIL, grey NOT RUN, blue REHEARSAL, violet UNTESTABLE."""
    from matplotlib.colors import ListedColormap

    code = {"FAIL": 0, "NOT RUN": 1, "INCONCLUSIVE": 2, "PASS": 3, "REHEARSAL": 4, "UNTESTABLE": 5}
    grid = verdicts.assign(v=verdicts["verdict"].map(code)).pivot(index="claim_id", columns="round", values="v")
    grid = grid.loc[list(dict.fromkeys(verdicts["claim_id"]))]
    if ax is None:
        _, ax = plt.subplots(figsize=(min(14, 2 + 0.35 * grid.shape[1]), 0.5 + 0.45 * len(grid)))
    ax.imshow(grid.to_numpy(dtype=float),
              cmap=ListedColormap(["#e8a0a6", "#dddddd", "#f5d58a", "#9fd8ad", "#b9cbea", "#cdb8e0"]), vmin=0, vmax=5,
              aspect="auto", interpolation="nearest")
    ax.set_yticks(range(len(grid)))
    ax.set_yticklabels(grid.index, fontsize=8)
    ax.set_xticks(range(grid.shape[1]))
    ax.set_xticklabels(grid.columns, fontsize=8)
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
            ax.text(j, i, f"{v:.0f}" if np.isfinite(v) else "div.", ha="center", va="center", fontsize=8,
                    color="white" if not np.isfinite(v) or v < np.nanmean(shown) else "black")
        j = next(k for k, r in enumerate(rates) if float(r.removeprefix("lr=")) == row["chosen lr"])
        ax.add_patch(plt.Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, edgecolor="red", linewidth=1.5))
    ax.figure.colorbar(im, ax=ax, label="validation accuracy (%)")
    ax.set_title(title or "learning-rate search (validation data; chosen rate boxed)")
    return ax
