"""The planted-patch task (our ground truth for FedOTP §4.3's "plans focus on the object"): masks,
determinism, class and style signal."""
from __future__ import annotations

import pytest
import torch

from fedrepro.data.planted import PlantedConfig, make_planted
from fedrepro.errors import ConfigError

CFG = PlantedConfig(num_classes=8, num_clients=4, num_patches=49, dim=32, object_fraction=0.3,
                    train_per_client=40, test_per_client=10, seed=3)


@pytest.fixture(scope="module")
def task():
    return make_planted(CFG)


def test_shapes(task):
    tr = task.train
    assert tr.tokens.shape == (4 * 40, 49, 32) and tr.tokens.dtype == torch.float32
    assert tr.object_mask.shape == (160, 49) and tr.object_mask.dtype == torch.bool
    assert len(task.test) == 40
    assert torch.equal(tr.clients.bincount(), torch.full((4,), 40))


def test_mask_fraction_is_rho(task):
    per_image = task.train.object_mask.sum(1)
    assert torch.all(per_image == CFG.num_objects)
    assert CFG.num_objects / CFG.num_patches == pytest.approx(CFG.object_fraction, abs=0.5 / CFG.num_patches)
    # positions vary between images, so no patch index is "always the object"
    assert task.train.object_mask.float().mean(0).max() < 0.7


def test_deterministic_in_seed(task):
    again = make_planted(CFG)
    assert torch.equal(again.train.tokens, task.train.tokens)
    assert torch.equal(again.test.object_mask, task.test.object_mask)
    other = make_planted(PlantedConfig(**{**CFG.__dict__, "seed": 4}))
    assert not torch.equal(other.train.tokens, task.train.tokens)


def _nearest_prototype(task, tokens, clients):
    # remove the client's style first, as a prompt aligned to that client would
    x = tokens - task.styles[clients][:, None, :]
    return torch.einsum("nmd,cd->nmc", x, task.prototypes).argmax(-1)


def test_object_patches_carry_the_class_and_clutter_does_not(task):
    tr = task.train
    pred = _nearest_prototype(task, tr.tokens, tr.clients)
    hit = pred == tr.labels[:, None]
    assert hit[tr.object_mask].float().mean() > 0.95
    assert hit[~tr.object_mask].float().mean() < 2.0 / CFG.num_classes


def test_client_styles_differ(task):
    s = task.styles
    assert torch.linalg.norm(s, dim=1) == pytest.approx(torch.full((4,), CFG.style_scale), abs=1e-5)
    dists = torch.cdist(s, s) + torch.eye(len(s)) * 10
    assert dists.min() > 0.3 * CFG.style_scale
    # the offset is visible in the data: object patches minus their prototype average to the style
    tr = task.train
    for k in range(CFG.num_clients):
        sel = tr.clients == k
        resid = tr.tokens[sel][tr.object_mask[sel]] - task.prototypes[tr.labels[sel]].repeat_interleave(
            CFG.num_objects, 0)
        torch.testing.assert_close(resid.mean(0), s[k], atol=0.05, rtol=0)


@pytest.mark.parametrize("key, value", [("object_fraction", 0.0), ("num_patches", 0), ("noise", -1.0), ("seed", -1)])
def test_bad_config_names_the_parameter(key, value):
    with pytest.raises(ConfigError, match=key):
        PlantedConfig(**{key: value})
