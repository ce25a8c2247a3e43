"""The figure check (fedrepro.env.figure_check): each rule fails on a figure that breaks it and passes a
figure that keeps it; the shared plotting functions pass it; savefig enforces it under strict."""
from __future__ import annotations

from dataclasses import replace

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from fedrepro.env import figure_check, style  # noqa: E402
from fedrepro.env.figure_check import FigureCheckError, assert_clean, check, keyed_by  # noqa: E402


@pytest.fixture(autouse=True)
def _close():
    style.apply()
    yield
    plt.close("all")


def rules_of(fig, **kw):
    return {p.rule for p in check(fig, **kw)}


# ------------------------------------------------------------------------------------------ legend
def test_legend_rule_fails_on_an_unlabelled_line():
    fig, ax = plt.subplots()
    ax.plot([0, 1, 2], [1, 2, 3], label="fedavg")
    ax.plot([0, 1, 2], [3, 2, 1])  # no label
    ax.legend()
    assert "legend" in rules_of(fig)


def test_legend_rule_fails_on_a_panel_without_legend():
    fig, axes = plt.subplots(1, 2)
    axes[0].plot([0, 1], [0, 1], label="a")
    axes[1].plot([0, 1], [1, 0], label="b")
    axes[1].legend()  # names b only
    assert [p.message for p in check(fig, rules=["legend"])] == ["a line (a) has no legend entry"]


def test_legend_rule_fails_on_an_entry_with_nothing_drawn():
    fig, ax = plt.subplots()
    ax.scatter([1, 2], [1, 2], label="fedavg")
    ax.scatter([np.nan], [np.nan], label="lgfed")  # all missing: a legend entry and no point
    ax.legend()
    msgs = [p.message for p in check(fig, rules=["legend"])]
    assert msgs == ["entry 'lgfed' names nothing drawn"]


def test_legend_rule_passes_a_keyed_line_and_a_figure_legend():
    fig, axes = plt.subplots(1, 2)
    for ax in axes:
        ax.plot([0, 1], [0, 1], label="fedavg ¹")
        ax.bar([0, 1], [1, 2], label="fedpft")
        keyed_by(ax.plot([0, 1], [0.5, 0.5], ":", color="C0")[0], "paper (CIFAR-10)")
        ax.plot([], [], ":", color="k", label="paper (CIFAR-10)")  # the proxy entry
    style.figure_legend(fig, axes)
    assert check(fig, rules=["legend"]) == []


# -------------------------------------------------------------------------------------------- font
def test_font_rule_fails_on_7pt_text():
    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1], label="a")
    ax.legend()
    ax.set_title("tiny", fontsize=7)
    assert [p.rule for p in check(fig, rules=["font"])] == ["font"]


def test_font_rule_fails_on_small_tick_labels():
    fig, ax = plt.subplots()
    ax.tick_params(labelsize=6)
    assert "font" in rules_of(fig)


def test_font_rule_passes_the_shared_style():
    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1], label="a")
    ax.legend()
    ax.set_title("fine")
    assert check(fig, rules=["font"]) == []


# ------------------------------------------------------------------------------------------ colour
def test_colour_rule_fails_on_near_identical_colours():
    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1], color="#ff7f0e", label="a")
    ax.plot([0, 1], [1, 0], color="#ff8410", label="b")
    ax.legend()
    assert [p.rule for p in check(fig, rules=["colour"])] == ["colour"]


def test_colour_rule_fails_on_one_colour_with_different_hatches():
    fig, ax = plt.subplots()
    ax.bar([0], [1], color="#b2df8a", hatch="", label="pfedcspc")
    ax.bar([1], [1], color="#b2df8a", hatch="///", label="fedala")
    ax.legend()
    assert "colour" in rules_of(fig)


def test_colour_rule_passes_the_palette_and_ignores_keyed_lines():
    fig, ax = plt.subplots()
    for i, c in enumerate(style.PALETTE):
        ax.plot([0, 1], [i, i], color=c, label=f"s{i}")
    keyed_by(ax.plot([0, 1], [0.2, 0.2], ":", color=style.PALETTE[0])[0], "s1")  # same colour, another entry
    ax.legend()
    assert check(fig, rules=["colour"]) == []


def test_colour_distance_orders_colours():
    assert figure_check.colour_distance("red", "red") == pytest.approx(0.0, abs=1e-9)
    assert figure_check.colour_distance("black", "white") == pytest.approx(100.0, abs=0.1)


# -------------------------------------------------------------------------------------------- band
def test_band_rule_fails_on_an_unexplained_band():
    fig, ax = plt.subplots()
    ax.plot([0, 1, 2], [1, 2, 3], label="fedavg")
    ax.fill_between([0, 1, 2], [0, 1, 2], [2, 3, 4], alpha=0.2)
    ax.legend()
    assert [p.rule for p in check(fig, rules=["band"])] == ["band"]


def test_band_rule_fails_on_unexplained_error_bars():
    fig, ax = plt.subplots()
    ax.bar([0, 1], [1, 2], label="fedavg")
    ax.errorbar([0, 1], [1, 2], yerr=[0.1, 0.2], fmt="none")
    ax.legend()
    assert "band" in rules_of(fig)


def test_band_rule_passes_a_band_named_in_the_legend_title_or_caption():
    fig, ax = plt.subplots()
    ax.plot([0, 1, 2], [1, 2, 3], label="fedavg")
    ax.fill_between([0, 1, 2], [0, 1, 2], [2, 3, 4], alpha=0.2)
    ax.legend(title="band: ± std over seeds")
    assert check(fig, rules=["band"]) == []
    ax.get_legend().remove()
    ax.legend()
    assert check(fig, rules=["band"]) != []
    assert check(fig, caption="Shaded: one std over 3 seeds.", rules=["band"]) == []


# ----------------------------------------------------------------------------------------- outlier
def _cluster_with_outlier(ax):
    xs = [71, 73, 75, 77, 79, 80, 20]
    ys = [74, 76, 75, 78, 80, 81, 49]
    for i, (x, y) in enumerate(zip(xs, ys)):
        ax.scatter([x], [y], label=f"m{i}", color=style.PALETTE[i])


def test_outlier_rule_fails_on_one_point_stretching_the_axes():
    fig, ax = plt.subplots()
    _cluster_with_outlier(ax)
    ax.legend()
    assert {p.rule for p in check(fig, rules=["outlier"])} == {"outlier"}


def test_outlier_rule_fails_on_a_point_hidden_outside_the_limits():
    fig, ax = plt.subplots()
    _cluster_with_outlier(ax)
    ax.set_xlim(70, 82)
    ax.set_ylim(72, 83)
    ax.legend()
    assert any("outside" in p.message for p in check(fig, rules=["outlier"]))


def test_outlier_rule_passes_with_a_note_or_no_outlier():
    fig, ax = plt.subplots()
    _cluster_with_outlier(ax)
    ax.set_xlim(70, 82)
    ax.set_ylim(72, 83)
    ax.annotate("m6 (20, 49) off the axes ↙", (0.02, 0.02), xycoords="axes fraction")
    ax.legend()
    assert check(fig, rules=["outlier"]) == []
    fig2, ax2 = plt.subplots()
    ax2.scatter([1, 2, 3, 4, 5], [1, 2, 3, 4, 5], label="even")
    # A connected curve's first rounds may span the axis: a curve is not judged.
    ax2.plot(range(10), [2.3] + [0.3] * 9, label="loss")
    ax2.legend()
    assert check(fig2, rules=["outlier"]) == []


# ------------------------------------------------------------------- shared plots and the save hook
def _runs_table():
    rows = [{"alpha": a, "method": m, "seed": s, "best": b + 0.01 * s}
            for a in (0.1, 0.5) for m, b in (("fedavg", 0.6), ("fedpft", 0.7)) for s in (0, 1)]
    return pd.DataFrame(rows)


def test_shared_plot_bars_and_lines_pass():
    from fedrepro.app.figures import plot_bars, plot_lines

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.5))
    plot_bars(_runs_table(), x="alpha", hue="method", ax=axes[0], paper=lambda a, m: 65.0,
              paper_label=style.paper_label("CIFAR-10"))
    plot_lines(_runs_table(), x="alpha", hue="method", value="best", ax=axes[1], paper=lambda a, m: 60.0,
               paper_label=style.paper_label("CIFAR-10"))
    assert_clean(fig)


def test_shared_plot_curves_pass(tmp_path):
    from fedrepro.app.figures import plot_curves

    class Run:
        def __init__(self, seed):
            self.rounds = pd.DataFrame({"round": range(1, 6), "acc_mean": np.linspace(0.5, 0.8, 5) + 0.01 * seed})
            self.summary = {}

    fig, ax = plt.subplots()
    plot_curves({"fedavg": [Run(0), Run(1)], "fedpft": [Run(2)]}, ax=ax)
    assert_clean(fig)


def test_shared_plot_boxes_pass():
    from fedrepro.app.figures import plot_boxes

    fig, axes = plt.subplots(1, 2, sharey=True)
    for ax, last in zip(axes, (False, True)):
        # A far client: a flier, keyed to its method and named an outlier by the x label.
        plot_boxes({"fedavg": [50, 52, 55, 58, 60, 5], "fedpft": [60, 62, 64, 66, 70, 71]}, ax=ax,
                   legend="right" if last else None)
    assert check(fig) == []


def test_savefig_strict_refuses_any_figure_that_fails(tmp_path, monkeypatch, capsys):
    from fedrepro.app.figures import savefig

    monkeypatch.setenv("FEDREPRO_FIGURES", str(tmp_path))
    monkeypatch.setenv(figure_check.ENV, "strict")
    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1])  # no legend
    with pytest.raises(FigureCheckError, match="legend"):
        savefig(fig, "any_figure", "smoke")
    assert not (tmp_path / "any_figure.png").exists()
    # An exemption (with its reason) prints the problems and writes the figure.
    monkeypatch.setitem(figure_check.EXEMPT, "exempt_figure", "a reason")
    savefig(fig, "exempt_figure", "smoke")
    assert (tmp_path / "exempt_figure.png").exists()
    assert "exempt: a reason" in capsys.readouterr().out
    fig2, ax2 = plt.subplots()
    ax2.plot([0, 1], [0, 1], label="a")
    ax2.legend()
    assert savefig(fig2, "any_figure", "smoke").exists()


def test_no_figure_is_exempt_without_a_reason():
    assert all(isinstance(why, str) and why.strip() for why in figure_check.EXEMPT.values())


def test_keyed_by_several_entries_needs_each_of_them():
    # A t-SNE set: colour = class, marker = client; a class legend and a client legend explain it.
    # The class legend is the axes' second (ax.add_artist): it counts as much as the axes' own.
    from matplotlib.lines import Line2D

    fig, ax = plt.subplots()
    keyed_by(ax.scatter([0, 1, 2, 3], [0, 1, 0, 1], c=["C0", "C1", "C0", "C1"], marker="s"), "cat", "dog", "client 1")
    classes = ax.legend(handles=[Line2D([], [], ls="", marker="o", color=c, label=n) for c, n in (("C0", "cat"),
                                                                                                  ("C1", "dog"))])
    ax.add_artist(classes)
    ax.legend(handles=[Line2D([], [], ls="", marker="s", color="grey", label="client 1")], loc="lower right")
    assert check(fig, rules=["legend"]) == []
    ax.get_legend().remove()  # the client legend gone: the marker is unexplained
    problems = check(fig, rules=["legend"])
    assert any("has no legend entry" in p.message for p in problems)
    with pytest.raises(ValueError):
        keyed_by(ax.lines, *[])


def test_mode_rejects_an_unknown_value(monkeypatch):
    from fedrepro.errors import ConfigError

    monkeypatch.setenv(figure_check.ENV, "loud")
    with pytest.raises(ConfigError, match="strict"):
        figure_check.mode()


def test_styles_for_parts_methods_whose_colours_clash_in_one_figure():
    # pFedCSPC and FedALA share a palette colour (slots 13 and 29, told apart by hatch alone).
    assert style.method_style("pfedcspc").color == style.method_style("fedala").color
    s = style.styles_for(["fedala", "pfedcspc", "fedavg"])
    # the lower slot keeps its colour (pFedCSPC, the paper's own method beside others, is emphasised)
    assert s["pfedcspc"] == replace(style.method_style("pfedcspc"), emphasis=True)
    assert figure_check.colour_distance(s["fedala"].color, s["pfedcspc"].color) >= figure_check.MIN_COLOUR_DISTANCE
    assert style.styles_for(["fedala"])["fedala"] == style.method_style("fedala")  # alone: its own colour
    colours = [*style.PALETTE, *style.EXTRA_COLOURS]
    assert min(figure_check.colour_distance(a, b) for i, a in enumerate(colours) for b in colours[i + 1:]) \
        >= figure_check.MIN_COLOUR_DISTANCE


def test_display_label_marks_reconstructed_methods_only():
    assert style.display_label("pfedprompt") == "pfedprompt (our reading)"
    assert style.display_label("pfedprompt (our reading)") == "pfedprompt (our reading)"
    assert style.display_label("fedotp") == "fedotp"
    assert style.method_key("pfedprompt (our reading) ¹") == "pfedprompt"
    assert style.dataset_label("fashion_mnist") == "Fashion-MNIST"


def test_plot_points_zooms_past_an_outlier_names_it_and_drops_missing_rows():
    from fedrepro.app.figures import plot_points

    pts = pd.DataFrame({"g": [0.71, 0.73, 0.75, 0.77, 0.79, 0.80, 0.20, np.nan],
                        "l": [0.74, 0.76, 0.75, 0.78, 0.80, 0.81, 0.49, 0.70]},
                       index=["fedetf", "ccvr", "fedala", "pfedcspc", "moon", "fedproc", "feddecorr", "lgfed"])
    fig, ax = plt.subplots()
    plot_points(pts, "g", "l", ax=ax, zoom=True, highlight="pfedcspc")
    assert_clean(fig)
    assert ax.get_xlim()[0] > 60 and ax.get_ylim()[0] > 60
    assert any("feddecorr (20.0, 49.0)" in t.get_text() for t in ax.texts)
    assert "lgfed" not in [t.get_text() for t in ax.get_legend().get_texts()]
    fig2, ax2 = plt.subplots()
    plot_points(pts, "g", "l", ax=ax2)  # not zoomed: the check sees the stretch
    assert "outlier" in {p.rule for p in check(fig2)}


def test_toy_mismatch_figure_has_a_key():
    from fedrepro.analysis import ProbeConfig
    from fedrepro.analysis.toy_mismatch import ToyConfig, plot_toy_mismatch, toy_mismatch

    toy = toy_mismatch(ToyConfig(rounds=2, per_client=60, test_per_client=40, noise=1.0), ProbeConfig(epochs=5))
    fig = plot_toy_mismatch(toy)
    assert fig.legends and any(t.get_text().startswith("class ") for t in fig.legends[0].get_texts())
    assert_clean(fig)


def test_lr_search_heatmap_text_is_readable():
    from fedrepro.app.figures import plot_lr_search

    search = pd.DataFrame({"lr=0.1": [0.5, 0.6], "lr=0.01": [0.7, float("-inf")], "chosen lr": [0.01, 0.1]},
                          index=["fedavg", "fedpft"])
    ax = plot_lr_search(search)
    assert check(ax.figure, rules=["font"]) == []


def test_savefig_warn_mode_still_writes_when_the_check_cannot_run(tmp_path, monkeypatch, capsys):
    from fedrepro.app.figures import savefig

    def broken(fig, caption=None):
        raise RuntimeError("odd figure")

    monkeypatch.setenv("FEDREPRO_FIGURES", str(tmp_path))
    monkeypatch.setenv(figure_check.ENV, "warn")
    monkeypatch.setattr(figure_check, "check", broken)
    fig, ax = plt.subplots()
    assert savefig(fig, "odd", "smoke").exists()
    assert "could not run: RuntimeError: odd figure" in capsys.readouterr().out
    monkeypatch.setenv(figure_check.ENV, "strict")
    with pytest.raises(RuntimeError, match="odd figure"):
        savefig(fig, "odd", "smoke")


def test_outlier_rule_on_bars_judges_a_tall_bar_not_a_low_one():
    fig, ax = plt.subplots()
    ax.bar(range(6), [80, 82, 85, 90, 84, 20], label="low one")  # the axis starts at 0 anyway
    ax.legend()
    assert check(fig, rules=["outlier"]) == []
    fig2, ax2 = plt.subplots()
    ax2.bar(range(6), [8, 8.2, 8.5, 9, 8.4, 95], label="tall one")
    ax2.legend()
    assert [p.rule for p in check(fig2, rules=["outlier"])] == ["outlier"]


def test_cap_tall_bar_caps_the_axis_names_the_bar_and_leaves_even_bars_alone():
    from fedrepro.app.figures import cap_tall_bar

    ratios = pd.Series([1.0, 4.2, 1.05, 1.02, 1.1, 1.04], index=["fedavg", "fedpft", "fedper", "fedbn", "fedrod",
                                                                 "fedcac"])
    fig, ax = plt.subplots()
    ax.bar(range(6), ratios, 0.4, label="ours")
    ax.bar([i + 0.4 for i in range(6)], [1.0, 1.03, 1.1, 1.05, 1.2, 1.3], 0.4, label="paper")
    ax.legend()
    assert [p.rule for p in check(fig, rules=["outlier"])] == ["outlier"]
    cap_tall_bar(ax, ratios, unit="×")
    assert check(fig, rules=["outlier"]) == []
    assert ax.get_ylim()[1] < 4.2
    assert [t.get_text() for t in ax.texts] == ["off the scale (outlier): fedpft at 4.20×"]
    fig2, ax2 = plt.subplots()
    ax2.bar(range(6), [1.0, 1.3, 1.05, 1.02, 1.1, 1.04], label="ours")
    ylim = ax2.get_ylim()
    cap_tall_bar(ax2, pd.Series([1.0, 1.3, 1.05, 1.02, 1.1, 1.04]))
    assert len(ax2.texts) == 0 and ax2.get_ylim() == ylim


def test_tables_show_pfedprompt_as_our_reading_and_leave_other_rows_alone():
    from fedrepro.papers import fedotp

    table = fedotp.TABLES["label_shift"]
    runs = pd.DataFrame({"row": ["pfedprompt", "fedotp"], "seed": [0, 0], "final": [0.5, 0.6]})
    shown = table.show(runs)
    assert "pfedprompt (our reading)" in shown.index and "pfedprompt" not in shown.index
    assert "fedotp" in shown.index
