"""One look for every figure: a fixed style per method, fonts and sizes, and legends kept off the data.

Each registered method owns a :class:`Style` (colour, bar hatch, line marker) given by its slot in
:data:`METHOD_ORDER`, so FedAvg is the same blue in every figure and every process: the mapping
never reads set or dict iteration order, hash seeds or the order a figure lists its methods in.
Sixteen colours cover the first sixteen slots; later slots reuse a colour with another hatch and
another marker, so no two methods share both. The order keeps each paper's main-table rows
together, so that the 13 rows of FedPFT's main table have 13 different colours.

Labels that are not method names (settings, probe points, α) take the palette's colours in the
order the figure lists them, after the colours its methods took (:func:`styles_for`).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Sequence

import matplotlib as mpl

from .figure_check import MIN_COLOUR_DISTANCE, colour_distance

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

    def bar(self) -> dict:
        """Keyword arguments for ``ax.bar`` / ``ax.barh``."""
        return {"color": self.color, "hatch": self.hatch, "edgecolor": EDGE, "linewidth": 0.5}

    def line(self) -> dict:
        """Keyword arguments for ``ax.plot``."""
        return {"color": self.color, "marker": self.marker, "linestyle": self.linestyle, "markersize": 4}

    def point(self) -> dict:
        """Keyword arguments for ``ax.scatter``."""
        return {"color": self.color, "marker": self.marker, "edgecolors": EDGE, "linewidths": 0.5}


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


def method_style(name: str) -> Style:
    """The fixed style of a method (by its registered name or a display form of it)."""
    key = method_key(name)
    if key is None:
        raise KeyError(f"no fixed style for method {name!r}: add it to the end of fedrepro.env.style.METHOD_ORDER "
                       f"(known: {len(METHOD_ORDER)} methods)")
    return _slot_style(_SLOT[key])


def styles_for(labels: Iterable[object]) -> dict[object, Style]:
    """A style per label of one figure: method names their fixed style, any other label the next
    palette colour its methods left free (then cycling hatches and markers), in the given order."""
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
    return {lab: out[lab] for lab in labels}


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
    return ax.legend(handles, labels, frameon=False, title=title, **{**place, **kw})


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
    return fig.legend(handles, labels, frameon=False, title=title, **{**place, **kw})


def paper_label(setting: str | None) -> str:
    """The legend label of the paper's quoted values, naming its setting (dataset, model) so that a
    reader never takes it for the same setting as ours: ``"paper (CIFAR-10)"``."""
    return f"paper ({setting})" if setting else "paper"


PAPER_MARKER = {"marker": "D", "markersize": 4.5, "markerfacecolor": "white", "markeredgecolor": "black",
                "markeredgewidth": 1.0, "linestyle": "none", "zorder": 5}
