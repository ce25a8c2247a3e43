"""The frozen CLIP's image tokens, cached on disk, give exactly what computing them gives."""
from __future__ import annotations

import pytest
import torch

pytest.importorskip("open_clip")

from fedrepro.errors import ConfigError
from fedrepro.models.clip import StandinArch, build_standin
from fedrepro.models.clip_cache import image_tokens

ARCH = StandinArch(vision_width=32, vision_layers=2, vision_head_width=16, text_width=32, text_layers=1, embed_dim=32)


@pytest.fixture(scope="module")
def clip():
    return build_standin(ARCH, None, seed=0)


def _images(n=12, seed=0):
    return torch.randint(0, 256, (n, 1, 28, 28), dtype=torch.uint8, generator=torch.Generator().manual_seed(seed))


def _flip(x):
    return x.flip(-1)


def _predictions(clip, tokens):
    # a downstream result: nearest class prompt to the mean normalised patch token
    text = torch.nn.functional.normalize(clip.encode_text(["the digit 1", "the digit 2", "the digit 3"]), dim=-1)
    patches = torch.nn.functional.normalize(tokens[:, 1:], dim=-1).mean(1)
    return patches @ text.T


def test_cached_tokens_equal_computed(tmp_path, clip):
    x = _images()
    direct = image_tokens(clip, x, cache_dir=None)
    first = image_tokens(clip, x, cache_dir=tmp_path, batch_size=5)  # computes and stores
    assert len(list(tmp_path.iterdir())) == 1
    second = image_tokens(clip, x, cache_dir=tmp_path)  # reads
    assert torch.equal(direct, first) and torch.equal(direct, second)
    with torch.no_grad():
        assert torch.equal(_predictions(clip, direct), _predictions(clip, second))


def test_key_covers_data_augmentation_and_weights(tmp_path, clip):
    x = _images()
    image_tokens(clip, x, cache_dir=tmp_path)
    flipped = image_tokens(clip, x, cache_dir=tmp_path, augment=_flip, augment_tag="hflip")
    assert torch.equal(flipped, image_tokens(clip, _flip(x), cache_dir=None))
    image_tokens(clip, _images(seed=1), cache_dir=tmp_path)
    other = build_standin(ARCH, None, seed=1)
    image_tokens(other, x, cache_dir=tmp_path)
    assert len(list(tmp_path.iterdir())) == 4


def test_augmentation_needs_a_tag(tmp_path, clip):
    with pytest.raises(ConfigError, match="augment_tag"):
        image_tokens(clip, _images(), cache_dir=tmp_path, augment=_flip)


@pytest.mark.parametrize("damage", ["altered", "short"])
def test_a_damaged_token_cache_is_computed_again(tmp_path, clip, damage):
    # The cache sits in a data root others may share: it is checked against its own digest and must hold
    # one token set per image (issue 53, class 5); a bad one is recomputed with a warning naming it.
    from fedrepro.data.verified_cache import DIGEST, content_digest

    x = _images()
    first = image_tokens(clip, x, cache_dir=tmp_path)
    (path,) = tmp_path.iterdir()
    entry = torch.load(path, weights_only=True)
    if damage == "altered":
        entry["tokens"][0, 0, 0] += 1.0
    else:
        entry = {k: v for k, v in entry.items() if k != DIGEST}
        entry["tokens"] = entry["tokens"][:3]
        entry[DIGEST] = content_digest(entry)
    torch.save(entry, path)
    with pytest.warns(UserWarning, match="rebuilding it"):
        again = image_tokens(clip, x, cache_dir=tmp_path)
    assert torch.equal(again, first)
