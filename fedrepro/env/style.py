"""One look for every figure: a fixed style per method, fonts and sizes, and legends kept off the data.

Each registered method owns a :class:`Style` (colour, bar hatch, line marker) given by its slot in
:data:`METHOD_ORDER`, so FedAvg is the same blue in every figure and every process: the mapping
never reads set or dict iteration order, hash seeds or the order a figure lists its methods in.
Sixteen colours cover the first sixteen slots; later slots reuse a colour with another hatch and
another marker, so no two methods share both. The order keeps each paper's main-table rows
together, so that the 13 rows of FedPFT's main table have 13 different colours.

Labels that are not method names (settings, probe points, α) take the palette's colours in the
order the figure lists them, after the colours its methods took (:func:`styles_for`).

Each paper's own method (:data:`OWN_METHODS`) stands out wherever a figure draws it beside other
labels: a thick dark edge on its bars and points, a thicker line, its legend entry and tick label
in bold (:func:`emphasised`). Codes on an axis (Table 4's "III") are spelled out in a key under the
axes (:func:`add_key`), and the paper's numbers from another dataset than ours say so in their
legend entry (:func:`paper_label`, :func:`with_setting_note`).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Iterable, Mapping, Sequence

import matplotlib as mpl
from matplotlib.text import Text
from matplotlib.transforms import IdentityTransform

from .figure_check import KEY_GID, MIN_COLOUR_DISTANCE, colour_distance

# Well separated on white: matplotlib's tab10, near-black, then the light members of ColorBrewer's
# "Paired" (readable beside their dark tab10 relatives because bars carry a dark edge).
PALETTE: tuple[str, ...] = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
    "#bcbd22", "#17becf", "#1a1a1a", "#a6cee3", "#fb9a99", "#b2df8a", "#cab2d6", "#fdbf6f",
)
# Colours for a method whose fixed colour is too near another's in one figure (styles_for): each
# at least 20 ΔE from every palette colour and from each other.
EXTRA_COLOURS: tuple[str, ...] = ("#952e8f", "#0a5f38", "#b2996e", "#65ab7c")
HATCHES: tuple[str, ...] = ("", "///", "\\\\\\", "...", "xxx")
MARKERS: tuple[str, ...] = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "*")
LINESTYLES: tuple[str, ...] = ("-", "--", "-.", ":", (0, (5, 1, 1, 1)))
EDGE = "#333333"  # bar edges and hatch lines
# The paper's own method (emphasised): a black edge this many points wide on bars and markers (others:
# EDGE, 0.5 points), and lines this wide (matplotlib's default is 1.5).
EMPHASIS_EDGE = "#000000"
EMPHASIS_BAR_WIDTH = 1.8
EMPHASIS_LINE_WIDTH = 2.8

# Every registered method, each paper's main-table rows together (FedPFT, then pFedCSPC, FedOTP,
# PEP-FedPT, then the variants). A new method goes at the end: inserting one would restyle every
# method after it. tests/test_style.py fails while a registered method is missing here.
METHOD_ORDER: tuple[str, ...] = (
    # FedPFT Table 2 / T-C10 (13 rows)
    "fedavg", "fedpft", "fedpft_con", "local", "fedper", "fedbn", "fedcac", "fedrep", "fedamp", "fedrod",
    "pfedsd", "pfedgate", "pfedpt",
    # pFedCSPC Tables II, III, VI, VII
    "pfedcspc", "fedavg_ft", "fedetf", "moon", "feddc", "fedntd", "fedasam", "fedproc", "feddecorr", "ccvr",
    "fedsoup", "grace", "lgfed", "fedperpp", "ditto", "fedfomo", "fedala", "fedprox",
    # FedOTP Tables 1-3
    "fedotp", "zeroshot_clip", "coop", "promptfl", "promptfl_ft", "promptfl_fedprox", "promptfl_fedper",
    "promptfl_fedamp", "pfedprompt",
    # PEP-FedPT Tables 1-3
    "pep_fedpt", "head_tuning", "fedvpt", "fedvpt_d", "fedpr", "sgpt", "pfedpg", "p_pt",
    # variants plotted beside their parents
    "fedavg_linear", "fedpft_two_stage",
)
_SLOT = {name: i for i, name in enumerate(METHOD_ORDER)}

# Sizes in points; one place, so that every figure reads alike.
RC = {
    "font.size": 9,
    "axes.titlesize": 10,
    "axes.labelsize": 9,
    "xtick.labelsize": 8,
    "ytick.labelsize": 8,
    "legend.fontsize": 8,
    "legend.title_fontsize": 8,
    "figure.titlesize": 11,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.prop_cycle": mpl.cycler(color=list(PALETTE)),
    "hatch.linewidth": 0.6,
    "hatch.color": EDGE,
    "savefig.dpi": 110,
}


@dataclass(frozen=True)
class Style:
    color: str
    hatch: str
    marker: str
    linestyle: str | tuple
    # The paper's own method beside others (styles_for): drawn heavier, its colour unchanged.
    emphasis: bool = False

    @property
    def linewidth(self) -> float:
        """The width of a line in this style (points)."""
        return EMPHASIS_LINE_WIDTH if self.emphasis else mpl.rcParams["lines.linewidth"]

    def bar(self) -> dict:
        """Keyword arguments for ``ax.bar`` / ``ax.barh``."""
        return {"color": self.color, "hatch": self.hatch, "edgecolor": EMPHASIS_EDGE if self.emphasis else EDGE,
                "linewidth": EMPHASIS_BAR_WIDTH if self.emphasis else 0.5}

    def line(self) -> dict:
        """Keyword arguments for ``ax.plot`` (a width only where emphasised, so that a caller may
        still pass its own ``lw`` for a plain style)."""
        heavy = {"linewidth": self.linewidth, "markersize": 5.5} if self.emphasis else {"markersize": 4}
        return {"color": self.color, "marker": self.marker, "linestyle": self.linestyle, **heavy}

    def point(self) -> dict:
        """Keyword arguments for ``ax.scatter``."""
        return {"color": self.color, "marker": self.marker, "edgecolors": EMPHASIS_EDGE if self.emphasis else EDGE,
                "linewidths": EMPHASIS_BAR_WIDTH if self.emphasis else 0.5}


def _slot_style(i: int) -> Style:
    n = len(PALETTE)
    cycle = i // n
    # The marker shifts by one per colour cycle, so two slots with one colour never share a marker.
    return Style(PALETTE[i % n], HATCHES[cycle % len(HATCHES)], MARKERS[(i + cycle) % len(MARKERS)],
                 LINESTYLES[cycle % len(LINESTYLES)])


# Methods we rebuilt from a paper's text alone (no official code to check against): every table and
# figure names them with OUR_READING, so that no reader takes our numbers for the method's own.
# pFedPrompt (Guo et al., WWW 2023): fedrepro.methods.pfedprompt says where we had to choose.
RECONSTRUCTED = frozenset({"pfedprompt"})
OUR_READING = " (our reading)"

# How figures and tables write a dataset's id.
DATASET_LABELS = {"fashion_mnist": "Fashion-MNIST", "cifar10": "CIFAR-10", "cifar100": "CIFAR-100",
                  "tiny_imagenet": "Tiny-ImageNet", "domainnet": "DomainNet", "mnist": "MNIST",
                  "fashion_mnist_federated": "Fashion-MNIST (the stand-in's unseen half)",
                  "fashion_mnist_domains": "Fashion-MNIST styles", "inaturalist": "iNaturalist"}


def method_key(label: object) -> str | None:
    """The registered method a figure label names (``"FedAvg-FT"`` -> ``"fedavg_ft"``), or None."""
    text = str(label).strip().removesuffix(SINGLE_SEED_MARK.strip()).strip().removesuffix(OUR_READING.strip())
    key = re.sub(r"[\s\-+]+", "_", text.strip().lower())
    return key if key in _SLOT else None


def display_label(label: object) -> str:
    """A method's label in a figure or table: ``label`` itself, with OUR_READING for a method of
    RECONSTRUCTED (``"pfedprompt"`` -> ``"pfedprompt (our reading)"``). Display only: registry
    names and config values never change (they feed run hashes)."""
    text = str(label)
    return text + OUR_READING if method_key(text) in RECONSTRUCTED and OUR_READING not in text else text


def dataset_label(name: object) -> str:
    """A dataset id as a reader writes it (``"fashion_mnist"`` -> ``"Fashion-MNIST"``)."""
    return DATASET_LABELS.get(str(name), str(name))


# Each paper's own method(s): the registered names, and the names its tables and figures print for
# them (lower case; "-" "+" and spaces read as "_"). FedPFT proposes FedPFT and FedPFT+Con (ICLR §3;
# Table 4's III and V); pFedCSPC's global model is FedCSPC (its Table V rows "FedCSPC+..."); PEP-FedPT's
# module is CCMP. A variant of one (an ablation arm, our OT variants of FedOTP) is not the method.
OWN_METHODS: dict[str, tuple[str, ...]] = {
    "fedpft": ("fedpft", "fedpft_con"),
    "pfedcspc": ("pfedcspc", "fedcspc"),
    "pep_fedpt": ("pep_fedpt", "ccmp"),
    "fedotp": ("fedotp",),
}
_OWN = {name: paper for paper, names in OWN_METHODS.items() for name in names}
# Where a label's leading name ends: "FedPFT (paper's schedule)", "fedotp, own rate", "FedCSPC+FT_CE",
# "FedPFT: p_κ + FTM" all lead with their method.
_LEAD_END = re.compile(r"\s*\(|[:,+]")


def _name_key(text: str) -> str:
    return re.sub(r"[\s\-+]+", "_", text.strip().lower())


def _names(label: object) -> tuple[str, str]:
    """A label's whole name and its leading name, each as :func:`_name_key` writes it."""
    text = str(label).strip().removesuffix(SINGLE_SEED_MARK.strip()).strip().replace(OUR_READING, "")
    return _name_key(text), _name_key(_LEAD_END.split(text, maxsplit=1)[0])


def own_method(label: object) -> str | None:
    """The paper whose own method ``label`` names (:data:`OWN_METHODS`; ``"FedPFT+Con ¹"`` ->
    ``"fedpft"``), or None."""
    whole, lead = _names(label)
    return _OWN.get(whole) or _OWN.get(lead)


def emphasised(labels: Iterable[object]) -> set:
    """The labels of one figure (or legend) to draw emphasised: those naming a paper's own method,
    where the figure also draws something else to set them apart from (an ablation of the method
    alone, or the method alone, emphasises nothing). The paper's own entries ("paper (...)") do not
    count as something else: they are the same method's numbers."""
    labels = list(labels)
    own = {lab for lab in labels if own_method(lab) is not None}
    rest = [lab for lab in labels if lab not in own and not str(lab).startswith("paper")]
    return own if own and rest else set()


def method_style(name: str) -> Style:
    """The fixed style of a method (by its registered name or a display form of it). Never
    emphasised: whether a method stands out depends on what else its figure draws
    (:func:`styles_for`)."""
    key = method_key(name)
    if key is None:
        raise KeyError(f"no fixed style for method {name!r}: add it to the end of fedrepro.env.style.METHOD_ORDER "
                       f"(known: {len(METHOD_ORDER)} methods)")
    return _slot_style(_SLOT[key])


def styles_for(labels: Iterable[object]) -> dict[object, Style]:
    """A style per label of one figure: method names their fixed style, any other label the next
    palette colour its methods left free (then cycling hatches and markers), in the given order.
    A paper's own method beside other labels is emphasised (:func:`emphasised`)."""
    labels = list(dict.fromkeys(labels))
    out: dict[object, Style] = {lab: method_style(str(lab)) for lab in labels if method_key(lab) is not None}
    # Two methods of one figure whose fixed colours a reader cannot tell apart (a slot past the
    # palette reuses a colour, told apart by hatch alone): the later slot takes a colour no other
    # label of the figure is near, so the figure check's colour rule holds. Decided by slot, never
    # by the order the figure lists its labels in.
    kept: list[str] = []
    for lab in sorted(out, key=lambda lab: _SLOT[method_key(lab)]):
        st = out[lab]
        if any(colour_distance(st.color, c) < MIN_COLOUR_DISTANCE for c in kept):
            others = {o.color for o in out.values()} | set(kept)
            free = [c for c in (*PALETTE, *EXTRA_COLOURS)
                    if all(colour_distance(c, o) >= MIN_COLOUR_DISTANCE for o in others)]
            if free:
                out[lab] = Style(free[0], st.hatch, st.marker, st.linestyle)
        kept.append(out[lab].color)
    taken = {(s.color, s.hatch) for s in out.values()}
    for lab in labels:
        if lab in out:
            continue
        colours = {c for c, _ in taken}
        # A colour no other label of the figure has, while one is left; then a free colour + hatch.
        free = [i for i in range(len(PALETTE)) if PALETTE[i] not in colours]
        i = free[0] if free else next((i for i in range(len(PALETTE) * len(HATCHES))
                                       if (_slot_style(i).color, _slot_style(i).hatch) not in taken), len(taken))
        out[lab] = _slot_style(i)
        taken.add((out[lab].color, out[lab].hatch))
    # The paper's own method beside the rest: heavier, in its own colour (the legend puts it in bold).
    strong = emphasised(labels)
    return {lab: replace(out[lab], emphasis=True) if lab in strong else out[lab] for lab in labels}


def categorical(n: int) -> list:
    """``n`` colours for unordered categories that are not methods (classes, clients, groups): the
    palette while it lasts, then tab20, then evenly spaced turbo colours (past 20 no palette keeps
    every pair apart)."""
    if n <= len(PALETTE):
        return list(PALETTE[:n])
    if n <= 20:
        return [mpl.colormaps["tab20"](i) for i in range(n)]
    return [mpl.colormaps["turbo"](i / max(n - 1, 1)) for i in range(n)]


def apply() -> None:
    """Set the shared fonts and sizes (``RC``) for figures made from here on."""
    mpl.rcParams.update(RC)


# A series of one seed carries this mark in its label (no error bar, no band); a legend that shows one
# explains it in its title.
SINGLE_SEED_MARK = " ¹"
SINGLE_SEED_NOTE = "¹ one seed: no error bar"


# A band or error bar of ± one std over seeds carries this gid (mark_spread); a legend over its axes
# then says what the band or bar is (the figure check asks that every band be named).
SPREAD_GID = "seed_std"
SPREAD_NOTES = {"band": "band: ± 1 std over seeds", "bar": "error bar: ± 1 std over seeds"}


def _note(labels) -> str | None:
    return SINGLE_SEED_NOTE if any(str(lab).endswith(SINGLE_SEED_MARK) for lab in labels) else None


def mark_spread(artist):
    """Mark a band (``fill_between``'s collection) or an ``errorbar`` container as ± 1 std over
    seeds, so that the legend over its axes names it; returns the artist."""
    from matplotlib.container import ErrorbarContainer

    for part in artist.lines[2] if isinstance(artist, ErrorbarContainer) else [artist]:
        part.set_gid(SPREAD_GID)
    return artist


def _spread_notes(axes) -> list[str]:
    from matplotlib.collections import LineCollection

    kinds = {("bar" if isinstance(c, LineCollection) else "band") for ax in axes for c in ax.collections
             if c.get_gid() == SPREAD_GID}
    return [SPREAD_NOTES[k] for k in ("band", "bar") if k in kinds]


def _legend_title(title: str | None, labels, axes) -> str | None:
    """The legend's title: ``title``, then the one-seed note where a label carries ¹ and a line
    naming each kind of spread drawn in ``axes`` (each unless ``title`` says it already)."""
    lines = [title] if title else []
    lines += [n for n in (_note(labels), *_spread_notes(axes)) if n and n not in (title or "")]
    return "\n".join(lines) or None


def _paper_last(handles, labels):
    """The paper's entries after ours (matplotlib lists an axes' lines before its bars)."""
    order = sorted(range(len(labels)), key=lambda i: str(labels[i]).startswith("paper"))
    return [handles[i] for i in order], [labels[i] for i in order]


def legend_outside(ax, where: str = "right", handles: Sequence | None = None, labels: Sequence[str] | None = None,
                   ncol: int | None = None, title: str | None = None, **kw):
    """A legend beside the axes (``where="right"``) or under them (``"below"``), never over the data;
    ``savefig(bbox_inches="tight")`` widens the figure to hold it. Without handles, the axes' own."""
    if where not in ("right", "below"):
        raise ValueError(f"legend_outside(where={where!r}); valid: 'right', 'below'")
    if handles is None:
        handles, labels = ax.get_legend_handles_labels()
    if not handles:
        return None
    handles, labels = _paper_last(handles, labels)
    title = _legend_title(title, labels, [ax])
    n = len(handles)
    if where == "right":
        place = {"loc": "upper left", "bbox_to_anchor": (1.01, 1.0), "ncol": ncol or (1 if n <= 16 else 2)}
    else:
        # Few columns: a panel in a row is narrow, and a wider legend would run under its neighbour.
        place = {"loc": "upper center", "bbox_to_anchor": (0.5, -0.16), "ncol": ncol or min(n, 3)}
    return _bold_own(ax.legend(handles, labels, frameon=False, title=title, **{**place, **kw}))


def figure_legend(fig, axes, where: str = "right", ncol: int | None = None, title: str | None = None, **kw):
    """One legend for several panels (their handles, each label once), outside all of them."""
    if where not in ("right", "below"):
        raise ValueError(f"figure_legend(where={where!r}); valid: 'right', 'below'")
    seen: dict[str, tuple[str, object]] = {}  # a label once, "fedavg ¹" and "fedavg" too (one style)
    for ax in axes:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            seen.setdefault(lab.removesuffix(SINGLE_SEED_MARK), (lab, h))
    if not seen:
        return None
    handles, labels = _paper_last([h for _, h in seen.values()], [lab for lab, _ in seen.values()])
    title = _legend_title(title, labels, axes)
    n = len(seen)
    if where == "right":
        place = {"loc": "upper left", "bbox_to_anchor": (1.0, 0.95), "ncol": ncol or (1 if n <= 16 else 2)}
    else:
        place = {"loc": "upper center", "bbox_to_anchor": (0.5, 0.0), "ncol": ncol or min(n, 6)}
    return _bold_own(fig.legend(handles, labels, frameon=False, title=title, **{**place, **kw}))


def _bold_own(legend):
    """The entries of the paper's own method in bold (:func:`emphasised`), as its bars are edged."""
    texts = legend.get_texts()
    strong = emphasised(t.get_text() for t in texts)
    for t in texts:
        if t.get_text() in strong:
            t.set_fontweight("bold")
    return legend


def paper_label(setting: str | None, ours: Iterable[str] | str | None = None) -> str:
    """The legend label of the paper's quoted values, naming its setting (dataset, model) so that a
    reader never takes it for the same setting as ours: ``"paper (CIFAR-10)"``. With ``ours`` (our
    runs' dataset ids), a setting that names none of them also says so (:func:`with_setting_note`);
    :func:`fedrepro.app.figures.plot_bars` and ``plot_lines`` add that note themselves."""
    label = f"paper ({setting})" if setting else "paper"
    return label if ours is None else with_setting_note(label, ours)


# The paper's numbers from another dataset than ours sit at another level (CIFAR-100 at 30-60 % where
# Fashion-MNIST is at 80-95 %): what carries over is which method or setting is ahead, not by how much.
# Two short lines under the paper's entry, so that a legend beside the axes grows no wider than its
# "paper (CIFAR-10, ResNet-8)" entry made it.
OTHER_DATASET_NOTE = "another dataset than ours:\ncompare order, not level"


def _short_dataset(name: str) -> str:
    """A dataset's label without the label's own explanation (``"fashion_mnist_federated"`` ->
    ``"Fashion-MNIST"``)."""
    return dataset_label(name).split(" (", 1)[0]


def _token(text: str) -> str:
    return re.sub(r"[^0-9a-z]", "", text.lower())


def names_dataset(text: str, dataset: str) -> bool:
    """Whether ``text`` (a paper's setting, ``"CIFAR-100 Dir(0.3), ViT-B/16"``) names ``dataset`` (an
    id): one of its words is the dataset's id, label or short label, compared without case or
    punctuation, so that "CIFAR-10" is not found in "CIFAR-100"."""
    words = {_token(w) for w in re.split(r"[\s,;:()/]+", str(text)) if w}
    return bool(words & {_token(str(dataset)), _token(dataset_label(dataset)), _token(_short_dataset(dataset))})


def with_setting_note(label: str, ours: Iterable[str] | str) -> str:
    """``label`` (a :func:`paper_label`) with :data:`OTHER_DATASET_NOTE` under it where its setting
    names none of ``ours`` (our runs' dataset ids); unchanged where it names one, where ``ours`` is
    empty or where the note is there already."""
    ours = [ours] if isinstance(ours, str) else [str(d) for d in dict.fromkeys(ours) if d]
    if not ours or OTHER_DATASET_NOTE in label or any(names_dataset(label, d) for d in ours):
        return label
    return f"{label}\n{OTHER_DATASET_NOTE}"


class KeyLine(Text):
    """A line of a key (:func:`add_key`), placed at draw time under its axes' tight box, which
    moves as the figure is laid out and saved."""

    def __init__(self, ax, row: int, text: str, **kw):
        super().__init__(0, 0, text, transform=IdentityTransform(), ha="left", va="top",
                         fontsize=mpl.rcParams["legend.fontsize"], **kw)
        self._key_axes, self._row = ax, row

    def _place(self, renderer) -> None:
        ax = self._key_axes
        below = ax.get_tightbbox(renderer)
        step = 1.35 * renderer.points_to_pixels(self.get_fontsize())
        self.set_position((ax.get_window_extent(renderer).x0, below.y0 - 0.5 * step - self._row * step))

    def get_window_extent(self, renderer=None, dpi=None):
        renderer = renderer or getattr(self._key_axes.figure.canvas, "get_renderer", lambda: None)()
        if renderer is not None:
            self._place(renderer)
        return super().get_window_extent(renderer, dpi)

    def draw(self, renderer):
        self._place(renderer)
        super().draw(renderer)


def add_key(ax, key: Mapping[object, str], title: str | None = None) -> list[KeyLine]:
    """Spell out the codes of ``ax``'s tick labels (``{"III": "FedPFT (p_κ + FTM, alternating)"}``)
    in a key under the axes, one line per code, below everything the axes draws under itself (tick
    labels, x label, a legend below); ``savefig(bbox_inches="tight")`` makes room for it. The line of
    a paper's own method is bold (:func:`emphasised`). Returns the key's lines."""
    if not key:
        return []
    strong = emphasised(key.values())
    lines = [KeyLine(ax, 0, title)] if title else []
    for code, text in key.items():
        line = KeyLine(ax, len(lines), f"{code}: {text}", fontweight="bold" if text in strong else "normal")
        line.set_gid(f"{KEY_GID}{code}")  # the figure check's key rule finds the code's line by it
        lines.append(line)
    for line in lines:
        ax.figure.add_artist(line)
    return lines


PAPER_MARKER = {"marker": "D", "markersize": 4.5, "markerfacecolor": "white", "markeredgecolor": "black",
                "markeredgewidth": 1.0, "linestyle": "none", "zorder": 5}
