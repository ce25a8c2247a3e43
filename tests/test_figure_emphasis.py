"""What a reader needs from a figure alone (issue 58): the paper's own method stands out beside the
others, codes on an axis are spelled out in a key on the figure, and the paper's numbers from another
dataset than ours say so in their legend entry. Each is checked on the matplotlib objects."""
from __future__ import annotations

import io

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from matplotlib.colors import to_hex  # noqa: E402

from fedrepro.app import figures  # noqa: E402
from fedrepro.app.figures import plot_bars, plot_curves, plot_lines, plot_points  # noqa: E402
from fedrepro.env import figure_check, style  # noqa: E402


@pytest.fixture(autouse=True)
def _close():
    style.apply()
    yield
    plt.close("all")


def _methods_table(methods=("fedavg", "fedpft", "local")) -> pd.DataFrame:
    return pd.DataFrame([{"alpha": a, "method": m, "seed": s, "best": 0.5 + 0.05 * i + 0.01 * s}
                         for a in (0.1, 0.5) for i, m in enumerate(methods) for s in (0, 1)])


def _bars(ax) -> dict:
    return {c.get_label(): c.patches for c in ax.containers if hasattr(c, "patches")}


def _legend_weights(legend) -> dict:
    return {t.get_text(): t.get_fontweight() for t in legend.get_texts()}


# ------------------------------------------------------------------------------- the own methods
def test_every_paper_declares_its_own_registered_methods():
    from fedrepro.methods import METHODS
    from fedrepro.papers import PAPERS

    assert set(style.OWN_METHODS) == set(PAPERS) - {"tour"}  # the tour proposes no method
    for paper, names in style.OWN_METHODS.items():
        assert names[0] == paper and names[0] in METHODS.names()
    assert style.own_method("fedpft_con") == "fedpft"


@pytest.mark.parametrize("label, paper", [
    ("FedPFT+Con ¹", "fedpft"), ("FedPFT (paper's schedule)", "fedpft"), ("PEP-FedPT", "pep_fedpt"),
    ("FedCSPC+FT_CE", "pfedcspc"), ("fedotp, own rate", "fedotp"), ("FedPFT (prompts p_κ + FTM)", "fedpft"),
    # another method, or an ablation arm or variant of the paper's: not the method itself
    ("FedAvg+PMI+FT_CE", None), ("fedotp_kl_uot (ours)", None), ("ccmp first", None), ("fedpft_two_stage", None),
    ("FedPFT with a personal classifier head", None), ("paper (CIFAR-10)", None), (0.1, None),
])
def test_own_method_reads_the_labels_figures_print(label, paper):
    assert style.own_method(label) == paper


def test_emphasis_needs_something_else_to_stand_out_from():
    assert style.emphasised(["fedavg", "fedpft", "fedpft_con"]) == {"fedpft", "fedpft_con"}
    assert style.emphasised(["pep_fedpt", "paper (CIFAR-100)"]) == set()  # the method alone, with its quote
    assert style.emphasised(["ccmp first", "ccmp middle"]) == set()  # an ablation of the method
    assert style.emphasised(["α = 0.1", "α = 0.5"]) == set()


def test_bars_of_the_own_method_are_edged_and_bold_in_the_legend_in_their_own_colour():
    fig, ax = plt.subplots()
    plot_bars(_methods_table(), x="alpha", hue="method", ax=ax)
    bars = _bars(ax)
    own, other = bars["fedpft"][0], bars["fedavg"][0]
    assert own.get_linewidth() >= 3 * other.get_linewidth()
    assert to_hex(own.get_edgecolor()) == style.EMPHASIS_EDGE
    assert to_hex(own.get_facecolor()) == style.method_style("fedpft").color  # colours as they were
    assert _legend_weights(ax.get_legend()) == {"fedavg": "normal", "fedpft": "bold", "local": "normal"}
    # The legend's key shows the heavier edge too.
    handles = {t.get_text(): h for t, h in zip(ax.get_legend().get_texts(), ax.get_legend().legend_handles)}
    assert handles["fedpft"].get_linewidth() > handles["fedavg"].get_linewidth()


def test_an_ablation_of_the_method_alone_emphasises_nothing():
    fig, ax = plt.subplots()
    plot_bars(_methods_table(("fedpft",)), x="alpha", hue="method", ax=ax)
    assert _bars(ax)["fedpft"][0].get_linewidth() == style.method_style("fedpft").bar()["linewidth"]
    assert set(_legend_weights(ax.get_legend()).values()) == {"normal"}


def test_lines_curves_and_points_of_the_own_method_are_heavier():
    fig, axes = plt.subplots(1, 3)
    plot_lines(_methods_table(), x="alpha", hue="method", value="best", ax=axes[0])
    widths = {ln.get_label(): ln.get_linewidth() for ln in axes[0].lines if not ln.get_label().startswith("_")}
    assert widths["fedpft"] > widths["fedavg"] == widths["local"]

    class Run:
        def __init__(self, v):
            self.rounds = pd.DataFrame({"round": [1, 2, 3], "acc_mean": [v, v + 0.1, v + 0.2]})
            self.summary = {}

    plot_curves({"fedavg": [Run(0.3), Run(0.35)], "pfedcspc": [Run(0.4), Run(0.45)]}, ax=axes[1])
    widths = {ln.get_label(): ln.get_linewidth() for ln in axes[1].lines}
    assert widths["pfedcspc"] > widths["fedavg"]
    assert _legend_weights(axes[1].get_legend())["pfedcspc"] == "bold"

    pts = pd.DataFrame({"g": [0.5, 0.6, 0.55], "l": [0.4, 0.7, 0.5]}, index=["fedavg", "pfedcspc", "moon"])
    plot_points(pts, "g", "l", ax=axes[2])
    edges = {c.get_label(): c.get_linewidths()[0] for c in axes[2].collections}
    assert edges["pfedcspc"] > edges["fedavg"] == edges["moon"]


def test_a_figure_legend_and_tick_labels_put_the_own_method_in_bold():
    fig, axes = plt.subplots(1, 2)
    for ax in axes:
        plot_bars(_methods_table(("fedavg", "fedotp")), x="method", hue="alpha", ax=ax, legend=None,
                  hue_format=lambda a: f"α = {a}")
    leg = style.figure_legend(fig, axes)
    assert set(_legend_weights(leg).values()) == {"normal"}  # its entries are α, no method
    fig.draw_without_rendering()
    ticks = {t.get_text(): t.get_fontweight() for t in axes[0].get_xticklabels()}
    assert ticks == {"fedavg": "normal", "fedotp": "bold"}
    fig2, ax2 = plt.subplots()
    plot_bars(_methods_table(("fedavg", "fedotp")), x="alpha", hue="method", ax=ax2, legend=None)
    assert _legend_weights(style.figure_legend(fig2, [ax2])) == {"fedavg": "normal", "fedotp": "bold"}


# ------------------------------------------------------------------------------------ the key
def _ablation_table() -> pd.DataFrame:
    settings = ["I", "II", "III", "V", "arXiv-VI", "PerClassifier"]
    return pd.DataFrame([{"setting": k, "alpha": 0.1, "seed": s, "best": 0.6 + 0.02 * i + 0.01 * s}
                         for i, k in enumerate(settings) for s in (0, 1)])


def _key_lines(fig) -> dict:
    return {str(t.get_gid())[len(figure_check.KEY_GID):]: t for t in fig.artists
            if str(t.get_gid() or "").startswith(figure_check.KEY_GID)}


def test_coded_ticks_without_a_key_fail_the_figure_check():
    fig, ax = plt.subplots()
    plot_bars(_ablation_table(), x="setting", hue="alpha", ax=ax)
    problems = [p for p in figure_check.check(fig) if p.rule == "key"]
    assert len(problems) == 1
    assert "I, II, III, V, arXiv-VI" in problems[0].message  # PerClassifier is a word, not a code
    assert figure_check.CODE.match("I-ftm") and not figure_check.CODE.match("Base")


def test_a_key_spells_out_each_drawn_code_under_the_axes_and_bolds_the_own_methods():
    from fedrepro.papers import fedpft

    fig, ax = plt.subplots(figsize=(7, 3.6))
    plot_bars(_ablation_table(), x="setting", hue="alpha", ax=ax, key=fedpft.ABLATION_DESCRIPTIONS,
              hue_format=lambda a: f"α = {a}")
    assert figure_check.check(fig) == []
    lines = _key_lines(fig)
    assert list(lines) == ["I", "II", "III", "V", "arXiv-VI", "PerClassifier"]  # only what is drawn, in order
    assert lines["III"].get_text() == f"III: {fedpft.ABLATION_DESCRIPTIONS['III']}"
    assert {k for k, t in lines.items() if t.get_fontweight() == "bold"} == {"III", "V"}
    ticks = {t.get_text(): t.get_fontweight() for t in ax.get_xticklabels()}
    assert {k for k, w in ticks.items() if w == "bold"} == {"III", "V"}
    # Under the tick labels and the x label, inside what savefig(bbox_inches="tight") keeps.
    renderer = fig.canvas.get_renderer()
    floor = min(t.get_window_extent(renderer).y0 for t in [*ax.get_xticklabels(), ax.xaxis.label])
    boxes = [t.get_window_extent(renderer) for t in lines.values()]
    assert all(b.y1 <= floor for b in boxes)
    assert [b.y0 for b in boxes] == sorted((b.y0 for b in boxes), reverse=True)  # one line each, in order
    kept = fig.get_tightbbox(renderer)
    assert all(kept.y0 <= b.y0 / fig.dpi and b.x1 / fig.dpi <= kept.x1 for b in boxes)
    # The key makes the figure taller, never wider: each line ends before the legend beside the axes does.
    assert max(b.x1 for b in boxes) <= ax.get_legend().get_window_extent(renderer).x1
    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight")  # draws without error at another dpi


def test_fedpft_describes_every_ablation_setting_its_table_draws():
    from fedrepro.papers import fedpft

    drawn = {v for profile in ("smoke", "laptop", "paper")
             for rows in fedpft.TABLES["ablation"].row_groups(profile) for v in (rows.variants or {})}
    assert drawn and drawn | set(fedpft.ABLATION_SETTINGS) <= set(fedpft.ABLATION_DESCRIPTIONS)
    described = fedpft.ABLATION_DESCRIPTIONS
    assert {k for k, v in described.items() if style.own_method(v)} == {"III", "V"}
    assert style.own_method(described["I"]) is None and style.method_key(described["I"]) == "fedavg"


# ------------------------------------------------------------------ the paper's other dataset
def test_names_dataset_tells_cifar_10_from_cifar_100():
    assert style.names_dataset("paper (CIFAR-100, ResNet-10)", "cifar100")
    assert not style.names_dataset("paper (CIFAR-100, ResNet-10)", "cifar10")
    assert style.names_dataset("paper (CIFAR-10 C=1.0)", "cifar10")
    assert not style.names_dataset("paper (CIFAR-10)", "fashion_mnist_federated")
    assert style.names_dataset("paper (Fashion-MNIST, stand-in)", "fashion_mnist_federated")


def test_the_papers_entry_says_when_its_dataset_is_not_ours():
    label = style.paper_label("CIFAR-100, ResNet-10")
    fig, axes = plt.subplots(1, 3)
    plot_bars(_methods_table(), x="alpha", hue="method", ax=axes[0], paper=lambda a, m: 40.0, paper_label=label,
              dataset="fashion_mnist")
    plot_bars(_methods_table(), x="alpha", hue="method", ax=axes[1], paper=lambda a, m: 40.0, paper_label=label,
              dataset="cifar100")
    plot_lines(_methods_table(), x="alpha", hue="method", value="best", ax=axes[2], paper=lambda a, m: 40.0,
               paper_label=label, dataset=["fashion_mnist"])
    entries = [[t.get_text() for t in ax.get_legend().get_texts() if t.get_text().startswith("paper")] for ax in axes]
    assert entries == [[f"{label}\n{style.OTHER_DATASET_NOTE}"], [label], [f"{label}\n{style.OTHER_DATASET_NOTE}"]]
    assert figure_check.check(fig, rules=["legend"]) == []  # the entry still names the diamonds
    # A hand-drawn figure asks for it by paper_label's ``ours``; the note is added once.
    noted = style.paper_label("CIFAR-10", ours="fashion_mnist")
    assert noted.endswith(style.OTHER_DATASET_NOTE) and style.with_setting_note(noted, ["mnist"]) == noted
    assert style.paper_label("CIFAR-10", ours=["cifar10"]) == "paper (CIFAR-10)"


def test_our_dataset_is_read_from_the_runs_of_the_table(monkeypatch):
    class Stored:
        def __init__(self, path):
            self.config = type("C", (), {"data": type("D", (), {"dataset": f"ds_{str(path)[-1]}"})})

    monkeypatch.setattr(figures, "RunResult", Stored)
    table = _methods_table().assign(path=lambda t: [f"/runs/r{i % 2}" for i in range(len(t))])
    assert figures.our_datasets(table) == ["ds_0", "ds_1"]
    assert figures.our_datasets(table.drop(columns="path")) == []
    fig, ax = plt.subplots()
    plot_bars(table, x="alpha", hue="method", ax=ax, paper=lambda a, m: 40.0, paper_label="paper (ds_1)")
    assert "paper (ds_1)" in [t.get_text() for t in ax.get_legend().get_texts()]  # ours: no note


def test_the_note_keeps_a_legend_beside_the_axes_no_wider_than_a_long_setting():
    widths = []
    for label in ("paper (CIFAR-10, ResNet-8)", style.paper_label("CIFAR-10", ours="fashion_mnist")):
        fig, ax = plt.subplots()
        plot_bars(_methods_table(), x="alpha", hue="method", ax=ax, paper=lambda a, m: 40.0, paper_label=label,
                  dataset=[])
        fig.canvas.draw()
        widths.append(ax.get_legend().get_window_extent().width)
    assert widths[1] <= widths[0]


def test_a_plain_line_style_leaves_the_width_to_its_caller():
    fig, ax = plt.subplots()
    look = style.styles_for(["fedavg", "pfedcspc"])
    (plain,) = ax.plot([0, 1], [0, 1], lw=2, **look["fedavg"].line())  # as notebooks pass their own width
    assert plain.get_linewidth() == 2
    assert look["pfedcspc"].line()["linewidth"] == style.EMPHASIS_LINE_WIDTH
