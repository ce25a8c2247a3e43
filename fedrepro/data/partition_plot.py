"""Statistics tables and client × class bubble plots for a :class:`Partition`.

The bubble plot is the one of FedPFT (ICLR) Fig. 8 / (arXiv) Fig. 4 (App. D.1 / B.1: x = class
index, y = client id, dot size = sample count). Only matplotlib's object-oriented API is used,
apart from creating a figure when none is given, so everything works under the Agg backend.
"""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np
import pandas as pd
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator

from ..env.style import PALETTE
from .partition import Partition

__all__ = ["partition_stats", "stats_summary", "plot_partition", "plot_partition_grid"]

# Largest bubble, in points². Scaling by each panel's own maximum keeps the densest client
# readable whatever the dataset size.
_MAX_AREA = 250.0


def partition_stats(
    partition: Partition, train_labels: Any, test_labels: Any | None = None
) -> pd.DataFrame:
    """One row per client: sizes, number of classes present, dominant-class share, held-out flag
    and (for domain schemes) domain.

    ``dominant_class_share`` is the largest class's fraction of the client's train samples
    (1.0 = single-class client, 1/C = perfectly balanced); it is NaN for an empty client.
    """
    train_c, test_c = partition.counts(train_labels, test_labels)
    n_train = train_c.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        dominant = np.where(n_train > 0, train_c.max(axis=1) / np.maximum(n_train, 1), np.nan)
    held = set(partition.held_out)
    df = pd.DataFrame({
        "client": np.arange(partition.num_clients),
        "n_train": n_train,
        "n_test": np.array([a.size for a in partition.test], dtype=np.int64),
        "n_classes": (train_c > 0).sum(axis=1),
        "dominant_class_share": dominant,
        "held_out": [k in held for k in range(partition.num_clients)],
    })
    if test_c is not None:
        df["n_test_classes"] = (test_c > 0).sum(axis=1)
    if "client_domain" in partition.meta:
        df["domain"] = list(partition.meta["client_domain"])
    return df


def stats_summary(stats: pd.DataFrame, columns: tuple[str, ...] = ("n_train", "n_test",
                  "n_classes", "dominant_class_share")) -> pd.DataFrame:
    """mean / std / min / max over clients of the main columns of :func:`partition_stats`."""
    cols = [c for c in columns if c in stats.columns]
    return stats[cols].agg(["mean", "std", "min", "max"])


def _new_axes(figsize: tuple[float, float]):
    import matplotlib.pyplot as plt  # only to create a figure the caller can display

    _, ax = plt.subplots(figsize=figsize)
    return ax


def plot_partition(
    partition: Partition,
    train_labels: Any,
    ax: Any = None,
    title: str | None = None,
    max_clients: int | None = None,
    size_scale: float | None = None,
):
    """Client × class bubble plot (FedPFT (ICLR) Fig. 8); returns the Axes.

    Dot area is proportional to the client's train count of that class; held-out clients are
    drawn in a second colour. ``max_clients`` shows only the first clients, which keeps plots
    for 100+ clients legible. ``size_scale`` is the count drawn at the largest dot size
    (default: this plot's largest count); pass a shared value to compare panels.
    """
    counts, _ = partition.counts(train_labels)
    n_show = partition.num_clients if max_clients is None else min(max_clients,
                                                                    partition.num_clients)
    counts = counts[:n_show]
    if ax is None:
        ax = _new_axes((max(4.0, 0.35 * partition.num_classes + 2), max(3.0, 0.25 * n_show + 1)))
    client, cls = np.nonzero(counts)
    scale = float(size_scale) if size_scale else max(int(counts.max()), 1)
    size = counts[client, cls] / scale * _MAX_AREA
    held = np.isin(client, partition.held_out)
    ax.scatter(cls[~held], client[~held], s=size[~held], color=PALETTE[0], alpha=0.7,
               linewidths=0, label="participating")
    kinds = [(PALETTE[0], "participating")]
    if held.any():
        ax.scatter(cls[held], client[held], s=size[held], color=PALETTE[1], alpha=0.7,
                   linewidths=0, label="held out")
        kinds.append((PALETTE[1], "held out"))
    # Fixed-size legend markers (bubble sizes vary) placed under the axes so they never hide data;
    # the title says what a bubble's size is. At the shared legend size: smaller falls under 8 pt.
    handles = [Line2D([], [], ls="", marker="o", color=c, alpha=0.7, label=lab) for c, lab in kinds]
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=len(kinds),
              frameon=False, title="clients (dot area ∝ train samples of the class)")
    ax.set_xlim(-0.5, partition.num_classes - 0.5)
    ax.set_ylim(n_show - 0.5, -0.5)  # client 0 at the top, like a table
    # Class and client ids are integers; fractional ticks (2.5) would be misleading.
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("class")
    ax.set_ylabel("client")
    if title is None:
        scheme = partition.meta.get("scheme", "partition")
        params = {k: v for k, v in partition.meta.get("params", {}).items() if v is not None}
        title = scheme + (" " + ", ".join(f"{k}={v}" for k, v in params.items()) if params else "")
    ax.set_title(title, fontsize="medium")
    return ax


def plot_partition_grid(
    partitions: Mapping[str, Partition],
    train_labels: Any,
    max_clients: int | None = None,
    ncols: int | None = None,
):
    """One bubble panel per partition (e.g. α = 0.1 / 0.5 / 10 side by side); returns the Figure.

    All panels share one dot-size scale so the skew of different partitions is comparable.
    """
    import matplotlib.pyplot as plt  # only to create the figure

    n = len(partitions)
    if n == 0:
        raise ValueError("partitions is empty; pass at least one {title: Partition}")
    ncols = min(n, ncols or n)
    nrows = -(-n // ncols)
    first = next(iter(partitions.values()))
    shown = first.num_clients if max_clients is None else min(max_clients, first.num_clients)
    fig, axes = plt.subplots(
        nrows, ncols, squeeze=False,
        figsize=(ncols * max(3.5, 0.3 * first.num_classes + 1.5),
                 nrows * max(3.0, 0.22 * shown + 1)),
    )
    flat = axes.ravel()
    scale = max(int(p.counts(train_labels)[0].max()) for p in partitions.values())
    for ax, (name, part) in zip(flat, partitions.items()):
        plot_partition(part, train_labels, ax=ax, title=name, max_clients=max_clients,
                       size_scale=scale)
    for ax in flat[n:]:
        ax.set_visible(False)
    fig.tight_layout()
    return fig
