"""Rendered glyphs: an offline pretraining source with 62 named classes, in 22 fonts.

PEP-FedPT and FedOTP tune prompts on a backbone pretrained on data that differs from the federated
data (IN-21k vs CIFAR-100). With no network, this module is that pretraining source: the digits and
letters 0-9, A-Z, a-z drawn from the TrueType faces inside matplotlib's wheel (so nothing is
downloaded), each with a random size, offset, rotation, stroke width, ink level and pixel noise.
None of its classes overlap Fashion-MNIST's clothing classes.

**Font split.** :data:`HELDOUT_FONTS` (6 faces) are never used for pretraining; federated experiments
on glyphs use them as unseen styles. Every family (DejaVu Sans, Sans Mono, Serif, STIX, Computer
Modern) keeps members on both sides, so the held-out faces are new styles, not a new script.

Every sample's parameters are drawn, vectorised, from one ``numpy.random.Generator``; PIL rendering
itself is deterministic, so images depend only on the seed, the fonts and the sizes asked for.
"""
from __future__ import annotations

import string
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np
import torch

from ..errors import ConfigError
from ..params import check_value
from .base import ImageDataset
from .registry import DATASETS

GLYPH_CHARS = string.digits + string.ascii_uppercase + string.ascii_lowercase


def _class_name(ch: str) -> str:
    # open_clip's tokenizer lowercases text, so "K" and "k" must differ in words, not case.
    if ch.isdigit():
        return f"digit {ch}"
    return f"capital letter {ch}" if ch.isupper() else f"small letter {ch}"


GLYPH_CLASSES: tuple[str, ...] = tuple(_class_name(c) for c in GLYPH_CHARS)


@dataclass(frozen=True)
class GlyphFont:
    """One face: its file stem in matplotlib's ``fonts/ttf`` and a style phrase for captions."""

    name: str
    style: str


# The text faces of matplotlib's wheel that draw all 62 characters (its symbol, size-variant,
# non-Unicode and "Display" faces do not). Order fixes the font ids; never reorder.
GLYPH_FONTS: tuple[GlyphFont, ...] = (
    GlyphFont("DejaVuSans", "sans-serif"),
    GlyphFont("DejaVuSans-Bold", "bold sans-serif"),
    GlyphFont("DejaVuSans-Oblique", "oblique sans-serif"),
    GlyphFont("DejaVuSans-BoldOblique", "bold oblique sans-serif"),
    GlyphFont("DejaVuSansMono", "monospace"),
    GlyphFont("DejaVuSansMono-Bold", "bold monospace"),
    GlyphFont("DejaVuSansMono-Oblique", "oblique monospace"),
    GlyphFont("DejaVuSansMono-BoldOblique", "bold oblique monospace"),
    GlyphFont("DejaVuSerif", "serif"),
    GlyphFont("DejaVuSerif-Bold", "bold serif"),
    GlyphFont("DejaVuSerif-Italic", "italic serif"),
    GlyphFont("DejaVuSerif-BoldItalic", "bold italic serif"),
    GlyphFont("STIXGeneral", "times-like serif"),
    GlyphFont("STIXGeneralBol", "bold times-like serif"),
    GlyphFont("STIXGeneralItalic", "italic times-like serif"),
    GlyphFont("STIXGeneralBolIta", "bold italic times-like serif"),
    GlyphFont("cmr10", "computer modern roman"),
    GlyphFont("cmb10", "bold computer modern"),
    GlyphFont("cmti10", "computer modern text italic"),
    GlyphFont("cmmi10", "computer modern math italic"),
    GlyphFont("cmss10", "computer modern sans-serif"),
    GlyphFont("cmtt10", "computer modern typewriter"),
)
FONT_NAMES: tuple[str, ...] = tuple(f.name for f in GLYPH_FONTS)

# Our choice: one face per family (plus cmss10/cmtt10, styles no other pretraining face has in CM),
# so each family stays represented in pretraining while unseen styles remain for federated tests.
HELDOUT_FONTS: tuple[str, ...] = (
    "DejaVuSans-BoldOblique",
    "DejaVuSansMono-Oblique",
    "DejaVuSerif-Italic",
    "STIXGeneralBol",
    "cmss10",
    "cmtt10",
)
PRETRAIN_FONTS: tuple[str, ...] = tuple(n for n in FONT_NAMES if n not in HELDOUT_FONTS)

FONT_SETS = {"pretrain": PRETRAIN_FONTS, "heldout": HELDOUT_FONTS, "all": FONT_NAMES}

IMAGE_SIZE = 28
_SUPERSAMPLE = 2  # draw at 2x and downsample with a box filter: anti-aliased strokes, cheaply
# Sampling ranges (our choice): glyph height in output pixels, offset of its centre, rotation std,
# stroke widths at the 2x canvas, ink level.
SIZE_RANGE = (16, 26)
MAX_OFFSET = 3
ROTATION_STD_DEG = 10.0
STROKES = (0, 1, 2)
INK_RANGE = (0.6, 1.0)
NOISE_STD = 0.05


def pretrain_fonts() -> tuple[str, ...]:
    """Fonts the backbones are pretrained on (16 of 22)."""
    return PRETRAIN_FONTS


def heldout_fonts() -> tuple[str, ...]:
    """Fonts kept out of pretraining, for federated experiments on unseen styles (6 of 22)."""
    return HELDOUT_FONTS


def font_style(font: str | int) -> str:
    """Caption phrase of a font given by name or id, e.g. ``"bold serif"``."""
    return GLYPH_FONTS[font_id(font)].style


def font_id(font: str | int) -> int:
    """Index of ``font`` in :data:`GLYPH_FONTS` (the ids :func:`render_glyphs` returns)."""
    if isinstance(font, (int, np.integer)) and not isinstance(font, bool):
        if not 0 <= int(font) < len(FONT_NAMES):
            raise ConfigError(f"font id must be in [0, {len(FONT_NAMES)}), got {font!r}")
        return int(font)
    if font not in FONT_NAMES:
        raise ConfigError(f"unknown glyph font {font!r}; valid fonts: {', '.join(FONT_NAMES)}")
    return FONT_NAMES.index(font)


def caption(label: int, font: str | int | None = None) -> str:
    """Text for class ``label``: ``"the digit 7"``, ``"the small letter k"``; with a font,
    ``"the small letter k in bold serif"``."""
    check_value("label", label, int, ge=0, lt=len(GLYPH_CLASSES))
    text = f"the {GLYPH_CLASSES[int(label)]}"
    return text if font is None else f"{text} in {font_style(font)}"


def fonts_dir() -> Path:
    import matplotlib

    return Path(matplotlib.get_data_path()) / "fonts" / "ttf"


@cache
def _font(fid: int, px: int):
    from PIL import ImageFont

    path = fonts_dir() / f"{FONT_NAMES[fid]}.ttf"
    if not path.is_file():
        raise ConfigError(f"glyph font {FONT_NAMES[fid]!r} not found at {path}; is matplotlib installed?")
    return ImageFont.truetype(str(path), px)


def _draw(char: str, fid: int, size: int, dx: int, dy: int, angle: float, stroke: int) -> np.ndarray:
    """One glyph, white on black, float32 [28, 28] in [0, 1]."""
    from PIL import Image, ImageDraw

    big = IMAGE_SIZE * _SUPERSAMPLE
    canvas = Image.new("L", (big, big))
    # The "mm" anchor centres the glyph's ink box vertically on the ascender/descender midline.
    ImageDraw.Draw(canvas).text(
        (big / 2 + dx * _SUPERSAMPLE, big / 2 + dy * _SUPERSAMPLE), char,
        font=_font(fid, size * _SUPERSAMPLE), fill=255, anchor="mm", stroke_width=stroke, stroke_fill=255,
    )
    canvas = canvas.rotate(angle, resample=Image.BILINEAR)
    small = canvas.resize((IMAGE_SIZE, IMAGE_SIZE), resample=Image.BOX)
    return np.asarray(small, dtype=np.float32) / 255.0


def _resolve_fonts(fonts: str | Sequence[str | int] | None) -> np.ndarray:
    if fonts is None:
        fonts = "pretrain"
    if isinstance(fonts, str):
        if fonts not in FONT_SETS:
            raise ConfigError(f"fonts must be one of {', '.join(FONT_SETS)} or a list of font names, got {fonts!r}")
        fonts = FONT_SETS[fonts]
    ids = np.array([font_id(f) for f in fonts], dtype=np.int64)
    if len(ids) == 0:
        raise ConfigError("fonts must name at least one font")
    return ids


def render_glyphs(
    n: int,
    seed: int | np.random.Generator,
    fonts: str | Sequence[str | int] | None = None,
    *,
    classes: Sequence[int] | None = None,
    noise: float = NOISE_STD,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Render ``n`` random glyphs: (images uint8 [n, 28, 28], labels int64 [n], font ids int64 [n]).

    ``seed`` is an int or a ``numpy.random.Generator`` (advanced by the call). ``fonts`` is
    ``"pretrain"`` (default), ``"heldout"``, ``"all"`` or a list of names/ids; the returned font ids
    index :data:`GLYPH_FONTS`. ``classes`` restricts the labels (indices into :data:`GLYPH_CLASSES`).
    Labels are balanced: every class appears ``n // len(classes)`` or one more times, shuffled.
    """
    check_value("n", n, int, ge=0)
    check_value("noise", noise, float, ge=0)
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(check_value("seed", seed, int, ge=0))
    font_ids = _resolve_fonts(fonts)
    cls = np.arange(len(GLYPH_CLASSES)) if classes is None else np.asarray(classes, dtype=np.int64)
    if cls.ndim != 1 or len(cls) == 0 or cls.min() < 0 or cls.max() >= len(GLYPH_CLASSES):
        raise ConfigError(f"classes must be a non-empty list of ints in [0, {len(GLYPH_CLASSES)}), got {classes!r}")
    n = int(n)
    labels = rng.permutation(np.resize(cls, n))
    fid = font_ids[rng.integers(0, len(font_ids), n)]
    size = rng.integers(SIZE_RANGE[0], SIZE_RANGE[1] + 1, n)
    dx, dy = rng.integers(-MAX_OFFSET, MAX_OFFSET + 1, (2, n))
    angle = rng.normal(0.0, ROTATION_STD_DEG, n)
    stroke = rng.choice(np.array(STROKES), n)
    ink = rng.uniform(INK_RANGE[0], INK_RANGE[1], n).astype(np.float32)
    eps = rng.standard_normal((n, IMAGE_SIZE, IMAGE_SIZE), dtype=np.float32)

    out = np.empty((n, IMAGE_SIZE, IMAGE_SIZE), dtype=np.float32)
    for i in range(n):
        out[i] = _draw(GLYPH_CHARS[labels[i]], int(fid[i]), int(size[i]), int(dx[i]), int(dy[i]),
                       float(angle[i]), int(stroke[i]))
    out = out * ink[:, None, None] + np.float32(noise) * eps
    images = np.clip(np.rint(out * 255.0), 0, 255).astype(np.uint8)
    return torch.from_numpy(images), torch.from_numpy(labels.astype(np.int64)), torch.from_numpy(fid)


@DATASETS.register("glyphs")
def load_glyphs(
    root: object,
    download: bool,
    fonts: str | Sequence[str] = "heldout",
    train_size: int = 6200,
    test_size: int = 1240,
    seed: int = 0,
) -> ImageDataset:
    """Glyphs as a federated dataset: 62 classes, fonts as domains; needs no files.

    Defaults to the held-out fonts, the ones no committed backbone saw. ``root``/``download`` are
    ignored. Train and test come from independent streams of ``seed``.
    """
    check_value("train_size", train_size, int, ge=0)
    check_value("test_size", test_size, int, ge=0)
    ids = _resolve_fonts(fonts)
    seed = check_value("seed", seed, int, ge=0)
    tr_rng, te_rng = (np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(2))
    tr_x, tr_y, tr_f = render_glyphs(train_size, tr_rng, ids.tolist())
    te_x, te_y, te_f = render_glyphs(test_size, te_rng, ids.tolist())
    # Domain ids index the chosen fonts, as ImageDataset.domains requires.
    to_domain = {int(f): d for d, f in enumerate(ids.tolist())}

    def dom(f: torch.Tensor) -> torch.Tensor:
        return torch.tensor([to_domain[int(v)] for v in f.tolist()], dtype=torch.int64)

    return ImageDataset(
        "glyphs", tr_x.unsqueeze(1), tr_y, te_x.unsqueeze(1), te_y, list(GLYPH_CLASSES),
        train_domain=dom(tr_f), test_domain=dom(te_f), domains=[FONT_NAMES[f] for f in ids.tolist()],
    )


__all__ = [
    "FONT_NAMES", "GLYPH_CHARS", "GLYPH_CLASSES", "GLYPH_FONTS", "HELDOUT_FONTS", "PRETRAIN_FONTS",
    "caption", "font_id", "font_style", "heldout_fonts", "load_glyphs", "pretrain_fonts", "render_glyphs",
]
