"""The shared figure style: one fixed, distinct look per method; bars honest about seeds; the
paper's numbers drawn beside ours."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from matplotlib.collections import LineCollection  # noqa: E402

from fedrepro.env import style  # noqa: E402
from fedrepro.app.figures import plot_bars, plot_curves  # noqa: E402
from fedrepro.methods import METHODS  # noqa: E402


def test_every_registered_method_has_a_fixed_style():
    missing = [m for m in METHODS.names() if style.method_key(m) is None]
    assert not missing, f"add to fedrepro.env.style.METHOD_ORDER: {missing}"


def test_method_styles_are_unique_for_bars_and_for_lines():
    names = METHODS.names()
    bars = {(style.method_style(m).color, style.method_style(m).hatch) for m in names}
    lines = {(style.method_style(m).color, style.method_style(m).marker) for m in names}
    assert len(bars) == len(names)
    assert len(lines) == len(names)


def test_fedpft_main_table_rows_have_distinct_colours():
    from fedrepro.papers.reference import paper_table

    rows = list(paper_table("fedpft", "T-C10").index)
    assert len(rows) == 13
    assert len({style.method_style(m).color for m in rows}) == 13


def test_styles_for_keeps_method_styles_and_gives_other_labels_free_colours():
    s = style.styles_for(["Origin", "fedavg", "Match"])
    assert s["fedavg"] == style.method_style("fedavg")
    assert len({(v.color, v.hatch) for v in s.values()}) == 3
    # A display form of a method name resolves to the method.
    assert style.styles_for(["FedAvg-FT"])["FedAvg-FT"] == style.method_style("fedavg_ft")
    # The order a figure lists methods in does not change their styles (FedPFT, the paper's own method
    # beside FedAvg, is emphasised in either order).
    expected = {"fedpft": replace(style.method_style("fedpft"), emphasis=True), "fedavg": style.method_style("fedavg")}
    assert style.styles_for(["fedpft", "fedavg"]) == expected
    assert style.styles_for(["fedavg", "fedpft"]) == expected


def test_unknown_method_style_names_the_fix():
    with pytest.raises(KeyError, match="METHOD_ORDER"):
        style.method_style("no_such_method")


def test_method_styles_are_the_same_in_another_process():
    code = ("import json; from fedrepro.env import style; from fedrepro.methods import METHODS; "
            "print(json.dumps({m: [style.method_style(m).color, style.method_style(m).hatch, "
            "style.method_style(m).marker] for m in METHODS.names()}))")
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    other = json.loads(out.stdout)
    here = {m: [style.method_style(m).color, style.method_style(m).hatch, style.method_style(m).marker]
            for m in METHODS.names()}
    assert other == here


def _table(seeds_per_method: dict[str, int]) -> pd.DataFrame:
    rows = []
    for m, n in seeds_per_method.items():
        for alpha in (0.1, 0.5):
            for seed in range(n):
                rows.append({"alpha": alpha, "method": m, "seed": seed, "best": 0.5 + 0.1 * seed + 0.01 * alpha})
    return pd.DataFrame(rows)


def _error_bars(ax) -> list:
    return [c for c in ax.collections if isinstance(c, LineCollection)]


def test_single_seed_bars_have_no_error_bars_and_are_marked():
    fig, ax = plt.subplots()
    plot_bars(_table({"fedavg": 1, "fedpft": 1}), x="alpha", hue="method", ax=ax)
    assert _error_bars(ax) == []
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["fedavg ¹", "fedpft ¹"]
    assert "one seed" in ax.get_legend().get_title().get_text()
    plt.close(fig)


def test_several_seeds_draw_error_bars_only_where_there_are_several():
    fig, ax = plt.subplots()
    plot_bars(_table({"fedavg": 3, "fedpft": 1}), x="alpha", hue="method", ax=ax)
    (bars,) = _error_bars(ax)
    assert len(bars.get_segments()) == 2  # fedavg at both α; fedpft (one seed) has none
    plt.close(fig)


def test_bars_take_the_methods_fixed_colours():
    fig, ax = plt.subplots()
    plot_bars(_table({"fedpft": 2, "fedavg": 2}), x="alpha", hue="method", ax=ax)
    colours = {c.get_label(): matplotlib.colors.to_hex(c.patches[0].get_facecolor()) for c in ax.containers
               if hasattr(c, "patches")}
    assert colours == {"fedpft": style.method_style("fedpft").color, "fedavg": style.method_style("fedavg").color}
    plt.close(fig)


def test_legend_sits_outside_the_axes():
    fig, ax = plt.subplots()
    plot_bars(_table({m: 1 for m in ("fedavg", "fedpft", "local", "fedper")}), x="alpha", hue="method", ax=ax)
    fig.canvas.draw()
    legend_box = ax.get_legend().get_window_extent()
    assert legend_box.x0 >= ax.get_window_extent().x1
    plt.close(fig)


def test_a_table_figure_carries_the_papers_numbers():
    from fedrepro.papers import fedpft

    main = fedpft.TABLES["main_default"]
    lookup = main.paper_lookup()
    fig, ax = plt.subplots()
    table = _table({"fedavg": 1, "fedpft": 1})
    plot_bars(table, x="alpha", hue="method", ax=ax, paper=lambda a, m: lookup(m, a),
              paper_label=style.paper_label("CIFAR-10"))
    (paper,) = [ln for ln in ax.lines if ln.get_label() == "paper (CIFAR-10)"]
    ref = main.paper_numbers()
    assert sorted(paper.get_ydata()) == sorted([ref.at[m, f"α={a}"] for m in ("fedavg", "fedpft") for a in (0.1, 0.5)])
    assert "paper (CIFAR-10)" in [t.get_text() for t in ax.get_legend().get_texts()]
    plt.close(fig)


def test_paper_values_need_a_label_naming_their_setting():
    with pytest.raises(ValueError, match="paper_label"):
        plot_bars(_table({"fedavg": 1}), x="alpha", hue="method", paper=lambda a, m: 50.0)


def test_paper_lookup_follows_the_tables_layout():
    from fedrepro.errors import ConfigError
    from fedrepro.papers import fedpft

    # Table 11 is laid out as the paper's: α as rows, methods as columns.
    t11 = fedpft.TABLES["100_clients"]
    assert t11.paper_lookup()(0.5, "fedper") == t11.paper_numbers().at["α=0.5", "fedper"]
    assert fedpft.TABLES["main_default"].paper_lookup()("no_such_method", 0.1) is None
    with pytest.raises(ConfigError, match="valid"):
        fedpft.TABLES["pathological"].paper_lookup(column="MNIST")


class _Run:
    def __init__(self, values, stopped_early=False):
        self.rounds = pd.DataFrame({"round": range(1, len(values) + 1), "acc_mean": values})
        self.summary = {"stopped_early": True} if stopped_early else {}


def test_curves_of_one_seed_have_no_band_and_are_marked():
    fig, ax = plt.subplots()
    plot_curves({"fedavg": [_Run([0.1, 0.2, 0.3])], "fedpft": [_Run([0.1, 0.2, 0.3]), _Run([0.2, 0.3, 0.4])]}, ax=ax)
    bands = [c for c in ax.collections if c.__class__.__name__ in ("PolyCollection", "FillBetweenPolyCollection")]
    assert len(bands) == 1
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["fedavg ¹", "fedpft"]
    assert matplotlib.colors.to_hex(ax.lines[0].get_color()) == style.method_style("fedavg").color
    plt.close(fig)


def test_a_run_that_stopped_when_flat_holds_its_final_value_in_the_mean_curve():
    fig, ax = plt.subplots()
    # Seed 0 stopped flat at round 2 (0.5); seed 1 trained on to round 4. The mean at rounds 3-4 is
    # over both seeds, with seed 0 at its final value, not seed 1's alone.
    plot_curves({"pep_fedpt": [_Run([0.5, 0.5], stopped_early=True), _Run([0.3, 0.4, 0.5, 0.7])]}, ax=ax)
    assert list(ax.lines[0].get_ydata()) == pytest.approx([40.0, 45.0, 50.0, 60.0])
    # A run that did not stop (a shorter budget) is not extended.
    fig2, ax2 = plt.subplots()
    plot_curves({"pep_fedpt": [_Run([0.5, 0.5]), _Run([0.3, 0.4, 0.5, 0.7])]}, ax=ax2)
    assert list(ax2.lines[0].get_ydata()) == pytest.approx([40.0, 45.0, 50.0, 70.0])
    plt.close(fig)
    plt.close(fig2)


def test_lines_of_one_seed_have_no_error_bars_and_the_paper_in_the_same_colour():
    from fedrepro.app.figures import plot_lines

    fig, ax = plt.subplots()
    plot_lines(_table({"fedavg": 1}), x="alpha", hue="method", value="best", ax=ax,
               paper=lambda a, m: {0.1: 60.0, 0.3: 61.0}.get(a), paper_x=[0.1, 0.3], paper_label="paper (CIFAR-100)")
    assert _error_bars(ax) == []
    paper = [ln for ln in ax.lines if ln.get_linestyle() == ":" and len(ln.get_xdata())]
    assert [list(ln.get_ydata()) for ln in paper] == [[60.0, 61.0]]
    assert matplotlib.colors.to_hex(paper[0].get_color()) == style.method_style("fedavg").color
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["fedavg ¹", "paper (CIFAR-100)"]
    plt.close(fig)


def test_a_figure_legend_names_each_method_once():
    from fedrepro.app.figures import plot_points

    fig, axes = plt.subplots(1, 2)
    pts = pd.DataFrame({"g": [0.5, 0.6], "l": [0.4, 0.7]}, index=["fedavg", "pfedcspc"])
    plot_points(pts, "g", "l", ax=axes[0], legend=None)
    plot_points(pts, "g", "l", ax=axes[1], legend=None, hollow=True)
    leg = style.figure_legend(fig, axes)
    assert [t.get_text() for t in leg.get_texts()] == ["fedavg", "pfedcspc"]
    plt.close(fig)
