"""pFedPrompt (our reading, fedrepro.methods.pfedprompt): the cache's weight is Tip-Adapter's α set against
CLIP's logit scale of 100, so on the stand-in (scale about 15) it is α·scale/100 by default; the unscaled
reading stays an option, and at scale 100 the two agree (issue 55, finding 3)."""
from __future__ import annotations

import pytest
import torch
from support import setup

from .test_clip_prompt_methods import cfg

from fedrepro.errors import ConfigError


def test_the_cache_weighs_alpha_times_the_logit_scale_over_100_by_default(tiny):
    scaled, clients, st = setup(cfg(tiny, "pfedprompt"))
    unscaled, _, _ = setup(cfg(tiny, "pfedprompt", {"cache_scale": "none"}))
    s = float(scaled.clip.logit_scale())
    assert s < 50  # the stand-in's learned scale, far from CLIP's 100
    assert scaled.cache_weight == pytest.approx(s / 100) and unscaled.cache_weight == 1.0
    c = clients[0]
    feats = scaled.features(c, "test")
    cache = scaled.cache(c)
    assert torch.allclose(scaled.cache_logits(cache, feats), unscaled.cache_logits(cache, feats) * s / 100)
    # Against the text logits (scale · cos, at most the scale) the cache now weighs what it does on CLIP.
    ctx = scaled.assemble(st.shared, st.client_states[c.cid])
    text = scaled.score(ctx, feats).abs().max()
    assert scaled.cache_logits(cache, feats).max() / text < unscaled.cache_logits(cache, feats).max() / text
    # A named option: the two readings are stored apart.
    assert cfg(tiny, "pfedprompt").hash() != cfg(tiny, "pfedprompt", {"cache_scale": "none"}).hash()
    with pytest.raises(ConfigError, match="cache_scale"):
        setup(cfg(tiny, "pfedprompt", {"cache_scale": "half"}))


def test_at_clips_scale_both_readings_are_tip_adapters(tiny):
    at_100, _, _ = setup(cfg(tiny, "pfedprompt", {"logit_scale": 100.0}))
    unscaled, _, _ = setup(cfg(tiny, "pfedprompt", {"logit_scale": 100.0, "cache_scale": "none"}))
    assert at_100.cache_weight == unscaled.cache_weight == 1.0
    half, _, _ = setup(cfg(tiny, "pfedprompt", {"logit_scale": 100.0, "alpha": 0.5}))
    assert half.cache_weight == 0.5
