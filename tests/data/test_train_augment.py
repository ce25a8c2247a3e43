"""Training augmentation (``train.augment``): seeded, per batch, and a no-op when off."""
from __future__ import annotations

import dataclasses

import pytest
import torch

from fedrepro.config import TrainConfig
from fedrepro.data.train_augment import TRAIN_AUGMENTS, CropFlip, train_augment
from fedrepro.errors import ConfigError
from fedrepro.fl.client_data import ClientData


def _client(augment=None, n=23, side=6):
    g = torch.Generator().manual_seed(5)
    x = torch.randint(0, 256, (n, 3, side, side), generator=g, dtype=torch.uint8)
    y = torch.randint(0, 4, (n,), generator=g)
    z = torch.zeros(1, 3, 1, 1)
    return ClientData(0, x, y, x[:2], y[:2], mean=z + 0.5, std=z + 0.25, augment=augment)


def _epoch(client, seed, bs=5):
    return list(client.train_batches(bs, torch.Generator().manual_seed(seed)))


def test_the_config_choices_are_the_registered_augmentations():
    field = next(f for f in dataclasses.fields(TrainConfig) if f.name == "augment")
    assert field.default == "none"
    from fedrepro.params import _META

    assert set(field.metadata[_META].choices) == set(TRAIN_AUGMENTS)
    assert set(TRAIN_AUGMENTS) == {"none", "crop_flip", "crop_flip_reflect", "flip"}
    with pytest.raises(ConfigError, match="valid: none, crop_flip"):
        train_augment("cutout")


def test_bad_augment_in_a_config_names_the_key():
    from fedrepro.config import make_config

    with pytest.raises(ConfigError, match="train.augment"):
        make_config("smoke", train__augment="cutout")


def test_off_leaves_batches_bit_for_bit_and_draws_only_the_permutation():
    c = _client()
    gen = torch.Generator().manual_seed(3)
    got = list(c.train_batches(5, gen))
    order = torch.randperm(c.num_train, generator=torch.Generator().manual_seed(3))
    for k, (x, y) in enumerate(got):
        idx = order[5 * k:5 * k + 5]
        assert torch.equal(x, c.normalize(c.train_x[idx])) and torch.equal(y, c.train_y[idx])
    ref = torch.Generator().manual_seed(3)
    torch.randperm(c.num_train, generator=ref)
    assert torch.equal(gen.get_state(), ref.get_state())
    assert train_augment("none") is None


@pytest.mark.parametrize("name", ["crop_flip", "crop_flip_reflect", "flip"])
def test_same_seed_same_batches_other_seed_other_batches(name):
    c = _client(train_augment(name))
    a, b, other = _epoch(c, 1), _epoch(c, 1), _epoch(c, 2)
    assert all(torch.equal(x1, x2) and torch.equal(y1, y2) for (x1, y1), (x2, y2) in zip(a, b))
    assert not all(torch.equal(x1, x2) for (x1, _), (x2, _) in zip(a, other))
    # The labels and the order are those of the unaugmented run (the permutation is drawn first).
    assert all(torch.equal(y1, y2) for (_, y1), (_, y2) in zip(a, _epoch(_client(), 1)))
    assert not all(torch.equal(x1, x2) for (x1, _), (x2, _) in zip(a, _epoch(_client(), 1)))


def test_crop_flip_geometry():
    x = torch.arange(2 * 1 * 4 * 4, dtype=torch.uint8).view(2, 1, 4, 4)
    # Find draws that give: offset (p, p) and no flip = the image; a flip reverses the columns.
    aug = CropFlip(padding=2)
    for seed in range(200):
        g = torch.Generator().manual_seed(seed)
        off = torch.randint(0, 5, (2, 2), generator=g)
        flip = torch.rand(2, generator=g) < 0.5
        out = aug(x, torch.Generator().manual_seed(seed))
        for i in range(2):
            dy, dx = int(off[i, 0]) - 2, int(off[i, 1]) - 2
            ref = torch.zeros(4, 4, dtype=torch.uint8)
            for r in range(4):
                for c in range(4):
                    sr, sc = r + dy, c + dx
                    if 0 <= sr < 4 and 0 <= sc < 4:
                        ref[r, c] = x[i, 0, sr, sc]
            ref = ref.flip(1) if flip[i] else ref
            assert torch.equal(out[i, 0], ref), (seed, i)
    assert out.dtype == torch.uint8 and out.shape == x.shape


def test_reflect_padding_repeats_no_zero_pixels():
    x = torch.full((8, 3, 5, 5), 7, dtype=torch.uint8)
    assert torch.all(CropFlip(padding=4, reflect=True)(x, torch.Generator().manual_seed(0)) == 7)
    assert torch.any(CropFlip(padding=4)(x, torch.Generator().manual_seed(0)) == 0)


def test_augment_needs_a_generator():
    with pytest.raises(ValueError, match="generator"):
        next(_client(train_augment("flip")).train_batches(5, None))


def test_a_run_with_augmentation_is_seeded_and_off_keeps_the_hash(tiny):
    from fedrepro import run

    cfg = tiny(**{"model.name": "cnn", "model.args": {"width": 4, "feature_dim": 8}, "train.rounds": 2})
    assert cfg.replace(**{"train.augment": "none"}).hash() == cfg.hash()
    on = cfg.replace(**{"train.augment": "crop_flip"})
    assert on.hash() != cfg.hash() and on.hashed_dict()["train"]["augment"] == "crop_flip"
    a = run(on)
    b = run(on.replace(runs_dir=str(on.runs_dir) + "_again"))
    plain = run(cfg)
    assert a.rounds["train_loss"].tolist() == b.rounds["train_loss"].tolist()
    assert a.rounds["train_loss"].tolist() != plain.rounds["train_loss"].tolist()
