"""A check of a matplotlib Figure before it is written: what a reader needs to trust it at a glance.

:func:`fedrepro.app.figures.savefig` runs :func:`check` on every figure it saves and prints what it
finds; with ``FEDREPRO_FIGURE_CHECK=strict`` (``make test-notebooks``, ``make smoke``) a figure that
fails is not written and the notebook stops, unless :data:`EXEMPT` names it with a reason. The rules:

``legend``
    Every drawn line, bar group and set of points has a legend entry, and no legend entry names
    something that is not drawn (a method whose values are all missing). An artist drawn in the
    style of another entry (the paper's dotted line in its method's colour) names that entry with
    :func:`keyed_by`; one explained by several entries (a t-SNE set whose colours are classes and
    whose marker is its client) names them all.
``font``
    Every visible text is at least :data:`MIN_FONT_PT` points. ``savefig`` writes the figure at its
    own size (``bbox_inches="tight"`` crops, it never scales), so points here are points on the page.
``colour``
    Within one axes, the colours of two legend entries are at least :data:`MIN_COLOUR_DISTANCE`
    apart (CIE76 ΔE in CIELAB, each colour composited over white at its alpha).
``band``
    Shaded bands (``fill_between``) and error bars are named: a legend entry, legend title, title
    or caption says what they show (see :data:`BAND_WORDS`).
``outlier``
    No axis is stretched by one value: where dropping the most extreme point (a marker or a bar top;
    a connected curve is its own context and is not judged) shrinks the span of the rest at least
    :data:`OUTLIER_FACTOR` times, or a point lies outside the axis' limits, the axes needs a note (see
    :data:`NOTE_WORDS`) in its texts, title or the caption.
``key``
    A tick label that is a code (a roman numeral, perhaps with a prefix or suffix: "III", "arXiv-VI",
    "I-ftm"; see :data:`CODE`) is spelled out on the figure: a text whose gid is :data:`KEY_GID` and
    the code (:func:`fedrepro.env.style.add_key`). A reader of the figure alone cannot decode it.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Iterable

from ..errors import ConfigError

MIN_FONT_PT = 8.0
# CIE76 ΔE: about 2 is a just-noticeable difference side by side; categories read from a legend
# need far more. The shared palette's closest pair is 24 apart.
MIN_COLOUR_DISTANCE = 20.0
OUTLIER_FACTOR = 3.0
BAND_WORDS = re.compile(r"band|shad|error bar|errorbar|whisker|±|\bstd\b|standard deviation|interval|spread",
                        re.IGNORECASE)
NOTE_WORDS = re.compile(r"outlier|off (?:the )?(?:axes|axis|scale|chart)|not shown|outside|clipped|beyond",
                        re.IGNORECASE)
# A tick label that means nothing without the paper's table: Table 4's "III", arXiv's "arXiv-VI".
CODE = re.compile(r"^(?:[A-Za-z]+-)?[IVX]+(?:-[A-Za-z]+)?$")
# The gid of a text that spells out a code ("key:III"), set by fedrepro.env.style.add_key.
KEY_GID = "key:"
RULES = ("legend", "font", "colour", "band", "outlier", "key")
ENV = "FEDREPRO_FIGURE_CHECK"
# Figures that FEDREPRO_FIGURE_CHECK=strict only warns about: name -> why the rules cannot hold for it.
# Every figure passes today; an entry needs a reason a reviewer accepts, not a figure left unfixed.
EXEMPT: dict[str, str] = {}
_KEY_PREFIX = "legend:"
# Between the labels of an artist keyed to several entries; no legend label contains it.
_KEY_SEP = "\x1f"
# The one-seed mark of fedrepro.env.style: "fedavg ¹" and "fedavg" are one entry.
_SEED_MARK = " ¹"


class FigureCheckError(ValueError):
    """A figure broke the figure check's rules (:func:`check`)."""


@dataclass(frozen=True)
class Problem:
    rule: str
    where: str
    message: str

    def __str__(self) -> str:
        return f"[{self.rule}] {self.where}: {self.message}"


def keyed_by(artist, *labels: str):
    """Mark ``artist`` as drawn under the legend entries ``labels`` (their styles stand for it: one
    entry, or several where each explains one of its properties, e.g. a class legend its colours
    and a client legend its marker); returns the artist."""
    if not labels:
        raise ValueError("keyed_by needs at least one legend label")
    gid = _KEY_PREFIX + _KEY_SEP.join(map(str, labels))
    for a in getattr(artist, "patches", None) or [artist]:  # a bar container: its bars
        a.set_gid(gid)
    return artist


def mode() -> str:
    """``FEDREPRO_FIGURE_CHECK``: ``"strict"`` (raise, but for :data:`EXEMPT` figures), ``"warn"``
    (the default: print the problems) or ``"off"``."""
    value = os.environ.get(ENV, "warn").strip().lower() or "warn"
    if value not in ("strict", "warn", "off"):
        raise ConfigError(f"{ENV}={value!r}; valid: strict, warn, off")
    return value


def _norm(label) -> str:
    return str(label).strip().removesuffix(_SEED_MARK.strip()).strip()


def _where(ax) -> str:
    title = ax.get_title() or ax.get_ylabel() or ""
    return f"axes {title!r}" if title else f"axes #{ax.figure.axes.index(ax)}"


def _finite(values) -> list[float]:
    import numpy as np

    try:
        a = np.asarray(values, dtype=float).ravel() if len(values) else np.zeros(0)
    except (TypeError, ValueError):  # categorical or date values: not judged here
        return []
    return [float(v) for v in a[np.isfinite(a)]]


def _errorbar_parts(ax) -> tuple[set, set]:
    """The Line2D and LineCollection ids that make up the axes' error bars."""
    from matplotlib.container import ErrorbarContainer

    lines, collections = set(), set()
    for c in ax.containers:
        if isinstance(c, ErrorbarContainer):
            data, caps, bars = c.lines
            lines.update(id(x) for x in [data, *caps] if x is not None)
            collections.update(id(x) for x in bars)
    return lines, collections


@dataclass
class _Item:
    kind: str        # "line", "bars", "points"
    artist: object
    label: str | None  # its own label (None: unlabelled)
    alias: tuple[str, ...]  # keyed_by's labels
    colour: tuple | None
    xs: list
    ys: list
    connected: bool


def _is_band(coll) -> bool:
    from matplotlib.collections import PolyCollection
    from matplotlib.contour import ContourSet

    return isinstance(coll, PolyCollection) and not isinstance(coll, ContourSet)


def _over_white(rgba) -> tuple:
    r, g, b, a = rgba
    return (1 - a + a * r, 1 - a + a * g, 1 - a + a * b)


def bar_ends(container) -> list[float]:
    """Both ends of each visible bar of a BarContainer, along its value axis, as the outlier rule
    reads them: a bar's base (0) is on the axis anyway, so a low bar stretches nothing, and a bar far
    above the rest does."""
    vertical = container.orientation == "vertical"
    return [v for p in container.patches if p.get_visible()
            for v in ((p.get_y(), p.get_y() + p.get_height()) if vertical else (p.get_x(), p.get_x() + p.get_width()))]


def _items(ax) -> list[_Item]:
    """What the axes draws that a legend should name."""
    import numpy as np
    from matplotlib.collections import PathCollection
    from matplotlib.colors import to_rgba
    from matplotlib.container import BarContainer

    err_lines, _ = _errorbar_parts(ax)
    out = []

    def names(artist):
        label = artist.get_label()
        label = None if not label or str(label).startswith("_") else str(label)
        first = artist.patches[0] if hasattr(artist, "patches") and artist.patches else artist
        gid = (first.get_gid() or "") if hasattr(first, "get_gid") else ""
        return label, (tuple(gid[len(_KEY_PREFIX):].split(_KEY_SEP)) if gid.startswith(_KEY_PREFIX) else ())

    for line in ax.lines:
        if not line.get_visible() or id(line) in err_lines:
            continue
        xs, ys = _finite(line.get_xdata(orig=False)), _finite(line.get_ydata(orig=False))
        if not xs or not ys:
            continue  # a legend proxy
        ls = line.get_linestyle()
        connected = ls not in ("None", "none", "", " ") and len(line.get_xdata()) > 1
        colour = line.get_color() if connected or line.get_marker() in (None, "", "None", "none") \
            else line.get_markerfacecolor()
        if isinstance(colour, str) and colour.lower() == "none":  # a hollow marker shows its edge
            colour = line.get_markeredgecolor()
        out.append(_Item("line", line, *names(line), _over_white(to_rgba(colour, line.get_alpha())), xs, ys, connected))
    for c in ax.containers:
        if not isinstance(c, BarContainer):
            continue
        patches = [p for p in c.patches if p.get_visible()]
        heights = _finite([p.get_height() for p in patches]) if c.orientation == "vertical" \
            else _finite([p.get_width() for p in patches])
        if not heights:
            continue
        label, alias = names(c)
        ref = patches[0]
        colour = _over_white(ref.get_facecolor())
        pos = [p.get_x() + p.get_width() / 2 for p in patches] if c.orientation == "vertical" \
            else [p.get_y() + p.get_height() / 2 for p in patches]
        ends = bar_ends(c)
        xs, ys = (pos, ends) if c.orientation == "vertical" else (ends, pos)
        out.append(_Item("bars", c, label, alias, colour, _finite(xs), _finite(ys), False))
    for coll in ax.collections:
        if not isinstance(coll, PathCollection) or not coll.get_visible():
            continue
        off = np.asarray(coll.get_offsets(), dtype=float).reshape(-1, 2)
        off = off[np.isfinite(off).all(1)]
        if not len(off):
            continue
        face = coll.get_facecolor()
        rgba = face[0] if len(face) else coll.get_edgecolor()[0]
        out.append(_Item("points", coll, *names(coll), _over_white(tuple(rgba)), list(off[:, 0]), list(off[:, 1]),
                         False))
    return out


def _legend_entries(fig) -> list[tuple[object, str]]:
    from matplotlib.legend import Legend

    # Every legend in the figure: an axes' own, those added beside it (``ax.add_artist``, matplotlib's
    # way to give one axes two legends) and the figure's.
    legends = list(dict.fromkeys(x for x in fig.findobj(Legend) if x.get_visible()))
    return [(leg, t.get_text()) for leg in legends for t in leg.get_texts() if t.get_text().strip()]


def _all_text(fig, caption: str | None) -> str:
    from matplotlib.text import Text

    texts = [t.get_text() for t in fig.findobj(Text) if t.get_visible()]
    return "\n".join([*texts, caption or ""])


def lab(colour) -> tuple[float, float, float]:
    """CIELAB (D65) of a matplotlib colour (its alpha ignored)."""
    from matplotlib.colors import to_rgb

    def lin(c):
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (lin(c) for c in to_rgb(colour))
    x = (0.4124 * r + 0.3576 * g + 0.1805 * b) / 0.95047
    y = 0.2126 * r + 0.7152 * g + 0.0722 * b
    z = (0.0193 * r + 0.1192 * g + 0.9505 * b) / 1.08883

    def f(t):
        return t ** (1 / 3) if t > (6 / 29) ** 3 else t / (3 * (6 / 29) ** 2) + 4 / 29

    return 116 * f(y) - 16, 500 * (f(x) - f(y)), 200 * (f(y) - f(z))


def colour_distance(a, b) -> float:
    """CIE76 ΔE between two matplotlib colours (alpha ignored: composite first)."""
    la, lb = lab(a), lab(b)
    return sum((p - q) ** 2 for p, q in zip(la, lb)) ** 0.5


def _legend_rule(fig, per_axes) -> list[Problem]:
    problems = []
    entries = _legend_entries(fig)
    named = {_norm(t) for _, t in entries}
    drawn = set()
    for ax, items in per_axes:
        for it in items:
            keys = {_norm(n) for n in it.alias if n}
            drawn.update(keys | ({_norm(it.label)} if it.label else set()))
            # Named by its own entry, or by every entry it is keyed to (each explains a part of it).
            if not ((it.label and _norm(it.label) in named) or (keys and keys <= named)):
                what = {"line": "a line", "bars": "a bar group", "points": "a set of points"}[it.kind]
                problems.append(Problem("legend", _where(ax),
                                        f"{what} ({it.label or 'unlabelled'}) has no legend entry"))
    for _, text in entries:
        if _norm(text) not in drawn:
            problems.append(Problem("legend", "legend", f"entry {text!r} names nothing drawn"))
    return problems


def _font_rule(fig) -> list[Problem]:
    from matplotlib.text import Text

    small = {}
    for t in fig.findobj(Text):
        s = t.get_text().strip()
        if t.get_visible() and s and t.get_fontsize() < MIN_FONT_PT - 1e-9:
            small.setdefault(round(t.get_fontsize(), 1), []).append(s)
    return [Problem("font", "figure", f"{len(v)} text(s) at {size} pt < {MIN_FONT_PT:g} pt, e.g. {v[0][:40]!r}")
            for size, v in sorted(small.items())]


def _colour_rule(per_axes) -> list[Problem]:
    problems = []
    for ax, items in per_axes:
        colours: dict[str, tuple] = {}
        for it in items:
            if it.label and not it.alias and it.colour is not None:
                colours.setdefault(_norm(it.label), it.colour)
        names = list(colours)
        for i, a in enumerate(names):
            for b in names[i + 1:]:
                d = colour_distance(colours[a], colours[b])
                if d < MIN_COLOUR_DISTANCE:
                    problems.append(Problem("colour", _where(ax), f"{a!r} and {b!r} are ΔE {d:.0f} apart "
                                                                  f"(< {MIN_COLOUR_DISTANCE:g})"))
    return problems


def _band_rule(fig, caption) -> list[Problem]:
    text = _all_text(fig, caption)
    problems = []
    for ax in fig.axes:
        _, err_colls = _errorbar_parts(ax)
        bands = [c for c in ax.collections if _is_band(c) and c.get_visible() and id(c) not in err_colls]
        from matplotlib.container import ErrorbarContainer

        errs = [c for c in ax.containers if isinstance(c, ErrorbarContainer)]
        if (bands or errs) and not BAND_WORDS.search(text):
            what = " and ".join(w for w, x in (("shaded bands", bands), ("error bars", errs)) if x)
            problems.append(Problem("band", _where(ax), f"{what} not named in a legend, title or caption"))
    return problems


def stretch(values: list[float]) -> float:
    """How many times the span of ``values`` exceeds it without its most extreme value."""
    v = sorted(values)
    span = v[-1] - v[0]
    rest = min(v[-2] - v[0], v[-1] - v[1])
    if span <= 0:
        return 1.0
    return span / rest if rest > 0 else float("inf")


def _outlier_rule(fig, per_axes, caption) -> list[Problem]:
    import math

    from matplotlib.text import Text

    problems = []
    for ax, items in per_axes:
        local = "\n".join([*(t.get_text() for t in ax.findobj(Text) if t.get_visible()),
                           *(fig.texts[i].get_text() for i in range(len(fig.texts))),
                           fig.get_suptitle(), caption or ""])
        if NOTE_WORDS.search(local):
            continue
        for axis, lim, scale in (("x", ax.get_xlim(), ax.get_xscale()), ("y", ax.get_ylim(), ax.get_yscale())):
            values = []
            for it in items:
                if it.connected:
                    continue
                values += it.xs if axis == "x" else it.ys
            if scale == "log":
                values = [math.log10(v) for v in values if v > 0]
                lim = tuple(math.log10(v) for v in lim if v > 0) or lim
            lo, hi = min(lim), max(lim)
            pad = 1e-9 * max(1.0, abs(hi - lo))
            outside = [v for v in values if v < lo - pad or v > hi + pad]
            if outside:
                problems.append(Problem("outlier", _where(ax), f"{len(outside)} point(s) outside the {axis} limits "
                                                               f"and no note says so"))
            elif len(values) >= 4 and stretch(values) >= OUTLIER_FACTOR:
                problems.append(Problem("outlier", _where(ax), f"one value stretches the {axis} axis "
                                                               f"{stretch(values):.1f}× and no note says so"))
    return problems


def _key_rule(fig) -> list[Problem]:
    from matplotlib.text import Text

    keyed = {str(t.get_gid())[len(KEY_GID):] for t in fig.findobj(Text)
             if t.get_visible() and str(t.get_gid() or "").startswith(KEY_GID)}
    problems = []
    for ax in fig.axes:
        ticks = [t.get_text().strip() for t in [*ax.get_xticklabels(), *ax.get_yticklabels()] if t.get_visible()]
        codes = [c for c in dict.fromkeys(ticks) if CODE.match(c) and c not in keyed]
        if codes:
            problems.append(Problem("key", _where(ax), f"tick label(s) {', '.join(codes)} are codes no key on the "
                                                       "figure spells out (fedrepro.env.style.add_key)"))
    return problems


def check(fig, caption: str | None = None, rules: Iterable[str] = RULES) -> list[Problem]:
    """The problems of ``fig`` under ``rules`` (all by default); ``caption``: text printed with the
    figure (it may name bands and notes). Draws the figure (without rendering) so that tick labels
    exist."""
    rules = tuple(rules)
    bad = [r for r in rules if r not in RULES]
    if bad:
        raise ValueError(f"rules {bad}; valid: {', '.join(RULES)}")
    fig.draw_without_rendering()
    per_axes = [(ax, _items(ax)) for ax in fig.axes]
    out: list[Problem] = []
    if "legend" in rules:
        out += _legend_rule(fig, per_axes)
    if "font" in rules:
        out += _font_rule(fig)
    if "colour" in rules:
        out += _colour_rule(per_axes)
    if "band" in rules:
        out += _band_rule(fig, caption)
    if "outlier" in rules:
        out += _outlier_rule(fig, per_axes, caption)
    if "key" in rules:
        out += _key_rule(fig)
    return out


def assert_clean(fig, caption: str | None = None, rules: Iterable[str] = RULES) -> None:
    """Raise :class:`FigureCheckError` listing the problems of ``fig``, if any."""
    problems = check(fig, caption, rules)
    if problems:
        raise FigureCheckError("figure check failed:\n  " + "\n  ".join(map(str, problems)))


__all__ = ["BAND_WORDS", "CODE", "ENV", "EXEMPT", "FigureCheckError", "KEY_GID", "MIN_COLOUR_DISTANCE", "MIN_FONT_PT",
           "NOTE_WORDS", "OUTLIER_FACTOR", "Problem", "RULES", "assert_clean", "check", "colour_distance", "keyed_by",
           "lab", "mode", "stretch"]
