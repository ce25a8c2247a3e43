"""The on-disk token cache: cached and uncached prompt forwards are bitwise identical."""
from __future__ import annotations

import torch

from fedrepro.data.base import to_float
from fedrepro.models import create_model
from fedrepro.models.backbones import prompt_hook
from fedrepro.models.token_cache import TokenCache

MEAN, STD = (0.2,), (0.3,)


def backbone(seed: int = 0):
    return create_model("tiny_vit", 10, in_channels=1, image_size=28, seed=seed, depth=4, dim=48, heads=3).features


def test_cached_and_uncached_results_are_identical(tmp_path):
    vit = backbone().eval()
    images = torch.randint(0, 256, (12, 1, 28, 28), dtype=torch.uint8, generator=torch.Generator().manual_seed(0))
    ccmp = torch.randn(2, vit.feature_dim, generator=torch.Generator().manual_seed(1))
    deep = prompt_hook({2: ccmp, 3: ccmp}, "insert")  # prompts first act at block 2
    with torch.no_grad():
        plain = vit.pool(vit.forward_tokens(vit.embed(to_float(images, MEAN, STD)), block_hook=deep))
    cache = TokenCache(tmp_path)
    for _ in range(2):  # computed and stored, then read back from disk
        tokens = cache.tokens(vit, images, MEAN, STD, block=2)
        with torch.no_grad():
            cached = vit.pool(vit.forward_tokens(tokens, block_hook=deep, start_block=2))
        assert torch.equal(plain, cached)
    assert len(list(tmp_path.glob("vit-tokens-*.pt"))) == 1


def test_key_changes_with_weights_data_and_block(tmp_path):
    cache = TokenCache(tmp_path)
    images = torch.zeros(2, 1, 28, 28, dtype=torch.uint8)
    a, b = backbone(0), backbone(1)
    keys = {
        cache.key(a, images, MEAN, STD, 2),
        cache.key(b, images, MEAN, STD, 2),
        cache.key(a, images + 1, MEAN, STD, 2),
        cache.key(a, images, MEAN, STD, 3),
        cache.key(a, images, (0.5,), STD, 2),
    }
    assert len(keys) == 5
    assert cache.key(a, images, MEAN, STD, 2) == TokenCache(tmp_path).key(backbone(0), images.clone(), MEAN, STD, 2)


def test_an_altered_token_cache_is_computed_again(tmp_path):
    # Checked against its own digest (issue 53, class 5): an edited cache is recomputed with a warning.
    import pytest

    vit = backbone().eval()
    images = torch.randint(0, 256, (6, 1, 28, 28), dtype=torch.uint8, generator=torch.Generator().manual_seed(0))
    cache = TokenCache(tmp_path)
    first = cache.tokens(vit, images, MEAN, STD, block=1)
    (path,) = tmp_path.glob("vit-tokens-*.pt")
    entry = torch.load(path, weights_only=True)
    entry["tokens"][0, 0, 0] += 1.0
    torch.save(entry, path)
    with pytest.warns(UserWarning, match="altered.*rebuilding it"):
        again = cache.tokens(vit, images, MEAN, STD, block=1)
    assert torch.equal(again, first)
