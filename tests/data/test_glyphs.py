"""Rendered glyphs: determinism, shapes, the documented font split, the registered dataset."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from fedrepro.data import load_dataset
from fedrepro.data.glyphs import (
    FONT_NAMES,
    GLYPH_CLASSES,
    caption,
    fonts_dir,
    heldout_fonts,
    pretrain_fonts,
    render_glyphs,
)
from fedrepro.errors import ConfigError


def test_deterministic_for_a_seed() -> None:
    a = render_glyphs(64, seed=3)
    b = render_glyphs(64, seed=3)
    c = render_glyphs(64, seed=4)
    assert all(torch.equal(u, v) for u, v in zip(a, b))
    assert not torch.equal(a[0], c[0])
    # A passed-in Generator is the same stream as its seed.
    d = render_glyphs(64, np.random.default_rng(3))
    assert all(torch.equal(u, v) for u, v in zip(a, d))


def test_shapes_dtypes_and_balance() -> None:
    x, y, f = render_glyphs(124, seed=0)
    assert x.shape == (124, 28, 28) and x.dtype == torch.uint8
    assert y.shape == f.shape == (124,) and y.dtype == f.dtype == torch.int64
    assert torch.bincount(y, minlength=62).tolist() == [2] * 62
    assert set(f.tolist()) <= {FONT_NAMES.index(n) for n in pretrain_fonts()}
    assert x.float().mean() > 5  # ink was drawn
    x, y, _ = render_glyphs(10, seed=0, classes=[7, 20])
    assert set(y.tolist()) == {7, 20}
    assert render_glyphs(0, seed=0)[0].shape == (0, 28, 28)


def test_font_split_is_disjoint_and_complete() -> None:
    pre, held = set(pretrain_fonts()), set(heldout_fonts())
    assert not pre & held and pre | held == set(FONT_NAMES)
    assert len(held) >= 4 and len(pre) >= 12
    assert all((fonts_dir() / f"{n}.ttf").is_file() for n in FONT_NAMES)
    _, _, f = render_glyphs(200, seed=1, fonts="heldout")
    assert {FONT_NAMES[i] for i in f.tolist()} <= held


def test_every_font_draws_all_62_classes_distinctly() -> None:
    # A face lacking a glyph draws the same ".notdef" box for every missing character.
    for name in FONT_NAMES:
        x, _, _ = render_glyphs(62, seed=0, fonts=[name], noise=0.0)
        assert len({x[i].numpy().tobytes() for i in range(62)}) == 62, name


def test_class_names_and_captions_survive_lowercasing() -> None:
    assert len(GLYPH_CLASSES) == 62 == len({c.lower() for c in GLYPH_CLASSES})
    assert caption(7) == "the digit 7"
    assert caption(GLYPH_CLASSES.index("small letter k")) == "the small letter k"
    assert caption(10, font="cmr10") == "the capital letter A in computer modern roman"


def test_bad_arguments_name_the_parameter() -> None:
    with pytest.raises(ConfigError, match="fonts"):
        render_glyphs(4, seed=0, fonts="comic")
    with pytest.raises(ConfigError, match="Arial"):
        render_glyphs(4, seed=0, fonts=["Arial"])
    with pytest.raises(ConfigError, match=r"^invalid label=62; valid: an integer in \[0, 62\)$"):
        caption(62)
    with pytest.raises(ConfigError, match="^invalid n=-1; valid: an integer >= 0$"):
        render_glyphs(-1, seed=0)


def test_registered_dataset_uses_fonts_as_domains() -> None:
    ds = load_dataset("glyphs", train_size=124, test_size=62)
    assert ds.train_x.shape == (124, 1, 28, 28) and ds.num_classes == 62
    assert ds.domains == list(heldout_fonts())
    assert int(ds.train_domain.max()) < len(ds.domains)
