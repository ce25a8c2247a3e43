"""(image, caption) pairs for pretraining the CLIP stand-in, and the split that keeps them apart
from the federated data.

Pretraining data must differ from the federated data, as CLIP's web pairs differ from the
benchmarks it is evaluated on. The split:

- glyphs in the pretraining fonts (:func:`fedrepro.data.glyphs.pretrain_fonts`), captioned
  "the small letter k", sometimes "the small letter k in bold serif"; the held-out fonts are never
  rendered here;
- the first :data:`FASHION_PRETRAIN_COUNT` Fashion-MNIST *training* images, captioned
  "a photo of a {class}". The last :data:`FASHION_VAL_COUNT` of them are the validation split for
  retrieval and are not trained on. Training images from index 30,000 on, and the whole test set,
  are never seen: the downstream tasks use them.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np
import torch

from ..data import glyphs
from ..data.splits import FASHION_MNIST_PRETRAIN

# The half both stand-ins are pretrained on (fedrepro.data.splits); downstream tasks take training
# images from index FASHION_PRETRAIN_COUNT on.
FASHION_PRETRAIN_COUNT = len(FASHION_MNIST_PRETRAIN)
assert FASHION_MNIST_PRETRAIN.start == 0 and FASHION_MNIST_PRETRAIN.step == 1  # a prefix, as sliced below
FASHION_VAL_COUNT = 1_000
FASHION_TEMPLATE = "a photo of a {}"
GLYPH_TEMPLATE = "the {}"
# Words kept in the reduced vocabulary although no caption uses them, so that prompts over other
# small benchmarks can still be tokenised (CIFAR-10 names, the style-domain names, common templates).
EXTRA_WORDS = (
    "a photo of a {}.", "a picture of a {}.", "an image of a {}.", "a drawing of a {}.", "this is a {}.",
    "airplane automobile bird cat deer dog frog horse ship truck",
    "original inverted rotated tinted noisy edges style domain",
    "letter digit character font photo clothing item object background",
)


def fashion_names(classes: list[str]) -> list[str]:
    """Fashion-MNIST class names as the captions and prompts spell them (the tokenizer lowercases)."""
    return [c.lower() for c in classes]


def glyph_names() -> list[str]:
    return list(glyphs.GLYPH_CLASSES)


@dataclass(frozen=True)
class CaptionedImages:
    """``images`` uint8 [N, 1, 28, 28]; ``caption_ids`` int64 [N] index ``captions``; ``source`` 0 glyph, 1 fashion."""

    images: torch.Tensor
    caption_ids: torch.Tensor
    captions: list[str]
    labels: torch.Tensor
    source: torch.Tensor

    def __len__(self) -> int:
        return len(self.caption_ids)


def _caption_table(fashion_classes: list[str]) -> tuple[list[str], dict[tuple, int]]:
    """Every caption that can occur, and its id: (glyph label,) / (glyph label, font) / ("fashion", label)."""
    keys: list[tuple] = [(g,) for g in range(len(glyphs.GLYPH_CLASSES))]
    keys += [(g, f) for g in range(len(glyphs.GLYPH_CLASSES)) for f in glyphs.pretrain_fonts()]
    keys += [("fashion", c) for c in range(len(fashion_classes))]
    names = fashion_names(fashion_classes)
    texts = [
        FASHION_TEMPLATE.format(names[k[1]]) if k[0] == "fashion" else glyphs.caption(k[0], *k[1:])
        for k in keys
    ]
    return texts, {k: i for i, k in enumerate(keys)}


def build_pairs(
    rng: np.random.Generator, n_glyphs: int, font_caption_fraction: float,
    fashion_x: torch.Tensor | None, fashion_y: torch.Tensor | None, fashion_classes: list[str],
) -> CaptionedImages:
    """Render ``n_glyphs`` glyphs in the pretraining fonts and caption them, plus the given Fashion images."""
    texts, index = _caption_table(fashion_classes)
    g_x, g_y, g_font = glyphs.render_glyphs(n_glyphs, rng, fonts="pretrain")
    with_font = rng.random(n_glyphs) < font_caption_fraction
    fonts = [glyphs.FONT_NAMES[f] for f in g_font.tolist()]
    g_cap = [index[(y, fonts[i]) if with_font[i] else (y,)] for i, y in enumerate(g_y.tolist())]
    images, caps, labels, source = [g_x.unsqueeze(1)], [torch.tensor(g_cap, dtype=torch.long)], [g_y], [
        torch.zeros(n_glyphs, dtype=torch.long)]
    if fashion_x is not None and len(fashion_x):
        images.append(fashion_x)
        caps.append(torch.tensor([index[("fashion", int(y))] for y in fashion_y.tolist()], dtype=torch.long))
        labels.append(fashion_y)
        source.append(torch.ones(len(fashion_y), dtype=torch.long))
    return CaptionedImages(torch.cat(images), torch.cat(caps), texts, torch.cat(labels), torch.cat(source))


def data_hash(*parts: CaptionedImages) -> str:
    """sha256 over the images and caption texts, in order: what the checkpoint was trained and validated on."""
    h = hashlib.sha256()
    for part in parts:
        h.update(part.images.numpy().tobytes())
        h.update("\n".join(part.captions[i] for i in part.caption_ids.tolist()).encode())
    return h.hexdigest()


__all__ = [
    "EXTRA_WORDS", "FASHION_PRETRAIN_COUNT", "FASHION_TEMPLATE", "FASHION_VAL_COUNT", "GLYPH_TEMPLATE",
    "CaptionedImages", "build_pairs", "data_hash", "fashion_names", "glyph_names",
]
