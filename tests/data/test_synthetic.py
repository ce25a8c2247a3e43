"""The procedural ``synthetic`` dataset: shapes, determinism, speed, learnability."""
from __future__ import annotations

import time

import numpy as np
import pytest
import torch

from fedrepro.data import load_dataset
from fedrepro.errors import ConfigError


def test_shapes_and_labels() -> None:
    ds = load_dataset("synthetic")
    assert ds.train_x.shape == (1000, 1, 16, 16) and ds.test_x.shape == (200, 1, 16, 16)
    assert ds.train_x.dtype == torch.uint8 and ds.train_y.dtype == torch.int64
    assert torch.bincount(ds.train_y).tolist() == [100] * 10 and torch.bincount(ds.test_y).tolist() == [20] * 10
    assert ds.num_classes == 10 and ds.domains is None
    rgb = load_dataset("synthetic", num_classes=3, train_per_class=4, test_per_class=0, image_size=8, channels=3)
    assert rgb.train_x.shape == (12, 3, 8, 8) and rgb.test_x.shape == (0, 3, 8, 8)


def test_deterministic_in_seed() -> None:
    a, b = load_dataset("synthetic", seed=3), load_dataset("synthetic", seed=3)
    c = load_dataset("synthetic", seed=4)
    assert torch.equal(a.train_x, b.train_x) and torch.equal(a.test_x, b.test_x)
    assert not torch.equal(a.train_x, c.train_x)


def test_class_patterns_do_not_depend_on_split_sizes() -> None:
    small = load_dataset("synthetic", train_per_class=5, noise=0.0)
    big = load_dataset("synthetic", train_per_class=50, noise=0.0)
    # same templates: class means of noise-free samples agree closely
    m_small = torch.stack([small.train_x[small.train_y == k].float().mean(0) for k in range(10)])
    m_big = torch.stack([big.train_x[big.train_y == k].float().mean(0) for k in range(10)])
    assert (m_small - m_big).abs().mean() < 25


def test_fast() -> None:
    load_dataset("synthetic")  # warm-up (first-call allocations)
    # CPU time of this process (every torch thread counts), not wall time: a busy machine's other
    # work must not fail the test.
    t = time.process_time()
    load_dataset("synthetic", channels=3)
    assert time.process_time() - t < 0.5 * torch.get_num_threads()


def nearest_centroid_accuracy(**kw: object) -> float:
    # A closed-form classifier: deterministic and immune to CPU-thread contention,
    # unlike a training loop; if it beats chance, any trained model can.
    ds = load_dataset("synthetic", **kw)
    x, xt = ds.train_x.flatten(1).double().numpy(), ds.test_x.flatten(1).double().numpy()
    y, yt = ds.train_y.numpy(), ds.test_y.numpy()
    centroids = np.stack([x[y == k].mean(0) for k in range(ds.num_classes)])
    dist = ((xt[:, None, :] - centroids[None]) ** 2).sum(-1)
    return float((dist.argmin(1) == yt).mean())


def test_learnable_but_not_trivial() -> None:
    for kw in ({}, {"channels": 3}):
        acc = nearest_centroid_accuracy(**kw)
        assert 0.5 < acc < 0.99, (kw, acc)  # chance is 0.1
    assert nearest_centroid_accuracy(noise=3.0) < nearest_centroid_accuracy(noise=0.5)


def test_bad_options() -> None:
    for kw in (dict(num_classes=1), dict(image_size=2), dict(seed=-1), dict(noise=-0.1), dict(train_per_class=0)):
        with pytest.raises(ConfigError, match=next(iter(kw))):
            load_dataset("synthetic", **kw)
