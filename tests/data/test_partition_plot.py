"""Partition statistics and plots."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from support import domain_data  # noqa: E402

from fedrepro.data.partition import (  # noqa: E402
    make_partition,
)
from fedrepro.data.partition_plot import (  # noqa: E402
    partition_stats,
    plot_partition,
    plot_partition_grid,
    stats_summary,
)


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def labels(n: int, c: int, seed: int) -> np.ndarray:
    return np.random.default_rng(10_000 + seed).integers(0, c, n)


def test_stats_one_row_per_client():
    y_tr, y_te, d_tr, d_te = domain_data()
    p = make_partition("domain_dirichlet", y_tr, y_te, 6, rng(0), train_domains=d_tr,
                       test_domains=d_te, clients_per_domain=2, alpha=0.5, holdout_clients=1)
    s = partition_stats(p, y_tr, y_te)
    assert isinstance(s, pd.DataFrame) and len(s) == p.num_clients
    assert {"client", "n_train", "n_test", "n_classes", "dominant_class_share", "held_out",
            "domain"} <= set(s.columns)
    assert s.held_out.sum() == 1 and s.n_train.sum() == y_tr.size
    summ = stats_summary(s)
    assert list(summ.index) == ["mean", "std", "min", "max"]
    assert summ.loc["min", "n_train"] == s.n_train.min()


def test_plots_run_with_agg():
    y_tr, y_te = labels(2000, 10, 0), labels(400, 10, 1)
    parts = {f"alpha={a}": make_partition("dirichlet", y_tr, y_te, 20, rng(0), alpha=a,
                                          min_size=1, holdout_clients=2)
             for a in (0.1, 0.5, 10)}
    ax = plot_partition(parts["alpha=0.1"], y_tr, max_clients=10)
    assert isinstance(ax, matplotlib.axes.Axes)
    assert ax.get_ylim()[0] == pytest.approx(9.5)
    fig = plot_partition_grid(parts, y_tr)
    assert isinstance(fig, matplotlib.figure.Figure)
    assert sum(a.get_visible() for a in fig.axes) == 3
    fig2, ax2 = plt.subplots()
    assert plot_partition(parts["alpha=10"], y_tr, ax=ax2, title="t") is ax2
    assert ax2.get_title() == "t"
    plt.close("all")


def test_partition_plots_pass_the_figure_check():
    """With held-out clients and without, every bubble set has its legend entry, in legible type."""
    from fedrepro.env.figure_check import check

    y_tr, y_te = labels(600, 5, 0), labels(200, 5, 1)
    for held in (0, 2):
        part = make_partition("dirichlet", y_tr, y_te, 8, rng(0), alpha=0.5, min_size=1, holdout_clients=held)
        fig = plot_partition_grid({"a": part, "b": part}, y_tr)
        assert check(fig) == [], held
    plt.close("all")
