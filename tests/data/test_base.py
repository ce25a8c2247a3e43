"""The dataset container ImageDataset: properties, validation, normalisation, stratified subsets."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from fedrepro.data import (
    ImageDataset,
    norm_tensors,
    to_float,
)
from fedrepro.errors import ConfigError

pytestmark = pytest.mark.usefixtures("_clean_env")


def make_ds(n_train: int = 200, n_test: int = 50, classes: int = 4, domains: int | None = None,
            c: int = 3) -> ImageDataset:
    g = torch.Generator().manual_seed(0)
    kw = {}
    if domains:
        kw = dict(
            train_domain=(torch.arange(n_train) // classes) % domains,  # independent of the class
            test_domain=(torch.arange(n_test) // classes) % domains,
            domains=[f"d{i}" for i in range(domains)],
        )
    return ImageDataset(
        "toy",
        torch.randint(0, 256, (n_train, c, 8, 8), dtype=torch.uint8, generator=g),
        torch.arange(n_train) % classes,
        torch.randint(0, 256, (n_test, c, 8, 8), dtype=torch.uint8, generator=g),
        torch.arange(n_test) % classes,
        [f"c{i}" for i in range(classes)],
        **kw,
    )


def test_properties() -> None:
    ds = make_ds()
    assert (ds.num_classes, ds.in_channels, ds.image_size, ds.num_domains) == (4, 3, 8, 1)
    assert make_ds(domains=3).num_domains == 3
    assert "toy" in repr(ds) and "tensor" not in repr(ds)


@pytest.mark.parametrize(
    "change",
    [
        dict(train_x=torch.zeros(200, 3, 8, 8)),  # float, not uint8
        dict(train_y=torch.zeros(200, dtype=torch.int32)),
        dict(test_y=torch.zeros(49, dtype=torch.int64)),  # wrong length
        dict(train_y=torch.full((200,), 4, dtype=torch.int64)),  # label >= num_classes
        dict(test_x=torch.zeros(50, 3, 4, 4, dtype=torch.uint8)),  # shape differs from train
        dict(train_domain=torch.zeros(200, dtype=torch.int64)),  # domains missing
    ],
)
def test_validation_rejects_malformed(change: dict) -> None:
    ds = make_ds()
    fields = dict(
        name=ds.name, train_x=ds.train_x, train_y=ds.train_y, test_x=ds.test_x, test_y=ds.test_y, classes=ds.classes
    )
    fields.update(change)
    with pytest.raises(ValueError):
        ImageDataset(**fields)


def test_norm_stats_match_direct_computation() -> None:
    ds = make_ds()
    mean, std = ds.norm_stats
    x = ds.train_x.double() / 255
    assert np.allclose(mean, x.mean((0, 2, 3)).numpy())
    assert np.allclose(std, x.std((0, 2, 3), unbiased=False).numpy())
    assert ds.norm_stats is ds.norm_stats  # cached


def test_norm_stats_constant_channel_has_unit_std() -> None:
    ds = make_ds(c=1)
    ds = ImageDataset("k", torch.full_like(ds.train_x, 7), ds.train_y, ds.test_x, ds.test_y, ds.classes)
    mean, std = ds.norm_stats
    assert mean[0] == pytest.approx(7 / 255) and std == (1.0,)


def test_to_float_matches_formula() -> None:
    x = torch.randint(0, 256, (5, 3, 4, 4), dtype=torch.uint8)
    mean, std = (0.1, 0.2, 0.3), (0.5, 0.25, 2.0)
    want = (x.double() / 255 - torch.tensor(mean).double()[None, :, None, None]) / torch.tensor(std).double()[
        None, :, None, None
    ]
    for m, s in [(mean, std), norm_tensors(mean, std)]:
        got = to_float(x, m, s)
        assert got.dtype == torch.float32 and got.shape == x.shape
        assert torch.allclose(got.double(), want, atol=1e-5)
    assert x.dtype == torch.uint8  # input untouched


def test_subset_is_stratified_and_deterministic() -> None:
    ds = make_ds(n_train=400, n_test=100, classes=4, domains=2)
    a = ds.subset(80, 20, np.random.default_rng(3))
    b = ds.subset(80, 20, np.random.default_rng(3))
    c = ds.subset(80, 20, np.random.default_rng(4))
    assert len(a.train_y) == 80 and len(a.test_y) == 20
    assert torch.equal(a.train_x, b.train_x) and torch.equal(a.test_y, b.test_y)
    assert not torch.equal(a.train_x, c.train_x)
    # 8 (domain, class) groups of equal size -> exactly 10 of each
    groups = torch.bincount(a.train_domain * 4 + a.train_y, minlength=8)
    assert groups.tolist() == [10] * 8
    assert a.domains == ds.domains and a.classes == ds.classes
    # every kept sample is an original sample with its own label
    assert set(a.train_x.flatten(1).sum(1).tolist()) <= set(ds.train_x.flatten(1).sum(1).tolist())


def test_subset_none_or_large_keeps_everything() -> None:
    ds = make_ds()
    s = ds.subset(None, 10_000, np.random.default_rng(0))
    assert torch.equal(s.train_x, ds.train_x) and torch.equal(s.test_x, ds.test_x)
    with pytest.raises(ConfigError, match="max_train"):
        ds.subset(-1, None, np.random.default_rng(0))


def test_subset_has_own_norm_stats() -> None:
    ds = make_ds()
    _ = ds.norm_stats
    s = ds.subset(10, None, np.random.default_rng(0))
    assert s.norm_stats != ds.norm_stats
