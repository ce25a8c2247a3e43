"""``data.validation``: each client scores on a held-out part of its own training split."""
from __future__ import annotations

import pytest
import torch

from fedrepro.errors import ConfigError
from fedrepro.runs.pipeline import prepare_data


def test_validation_split_replaces_the_test_split_with_held_out_training_images(tiny):
    cfg = tiny()
    ds0, part0 = prepare_data(cfg)
    ds, part = prepare_data(cfg.replace(**{"data.validation": 0.25}))
    for c in range(part.num_clients):
        tr0 = set(part0.train[c].tolist())
        kept = part.train[c]
        assert set(kept.tolist()) < tr0
        # The client's validation images are its other training images, in the pooled test arrays.
        val_imgs = ds.test_x[torch.tensor(part.test[c])]
        rest = sorted(tr0 - set(kept.tolist()))
        assert torch.equal(val_imgs, ds0.train_x[torch.as_tensor(rest)])
        assert len(rest) == max(1, round(0.25 * len(tr0)))
    assert part.meta["validation"] == 0.25
    # Seeded: the same config draws the same split; no test image is read.
    again = prepare_data(cfg.replace(**{"data.validation": 0.25}))[1]
    assert part.hash() == again.hash() != part0.hash()
    assert ds.test_x.shape[0] == sum(len(t) for t in part.test)


def test_validation_zero_keeps_the_hash_and_bad_values_name_the_key(tiny):
    cfg = tiny()
    assert cfg.replace(**{"data.validation": 0.0}).hash() == cfg.hash()
    assert cfg.replace(**{"data.validation": 0.2}).hash() != cfg.hash()
    with pytest.raises(ConfigError, match="data.validation"):
        cfg.replace(**{"data.validation": 1.0})


def test_a_run_on_the_validation_split(tiny):
    from fedrepro import run

    r = run(tiny(**{"data.validation": 0.2, "train.rounds": 1}))
    assert len(r.rounds) == 1
