"""CIFAR at another image size resizes the images a run reads, not all 60,000 on load
(fedrepro.data.cifar.ResizedImages): the same values as resizing the whole set, a plain tensor out,
and no resize for a shape query."""
from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import pytest
import torch

import fedrepro.data.cifar as cifar
from fedrepro.data import load_dataset
from fedrepro.data.base import ImageDataset
from fedrepro.data.imaging import resize_images
from fedrepro.runs.pipeline import build_clients
from fedrepro.data.partition import make_partition

from .test_cifar import write_cifar10

pytestmark = pytest.mark.usefixtures("_isolated")

SIDE = 40
ROWS = torch.tensor([3, 1, 7, 58, 59])
MASK = torch.zeros(60, dtype=torch.bool).index_fill_(0, ROWS, True)


@pytest.fixture
def images() -> tuple[torch.Tensor, cifar.ResizedImages, torch.Tensor]:
    """(the small images, them resized as read, them resized whole on the spot)."""
    small = torch.from_numpy(np.random.default_rng(0).integers(0, 256, (60, 3, 32, 32), dtype=np.uint8))
    return small, cifar.ResizedImages(small, SIDE), resize_images(small, SIDE)


@pytest.fixture
def resized_count(monkeypatch) -> list[int]:
    """The images each call of cifar's resize_images resized, in order."""
    counts: list[int] = []

    def counting(x: torch.Tensor, size: int, chunk: int = 512) -> torch.Tensor:
        counts.append(len(x))
        return resize_images(x, size, chunk)

    monkeypatch.setattr(cifar, "resize_images", counting)
    return counts


@pytest.mark.parametrize("index", [
    ROWS, MASK, [4, 0, 9], slice(None, 5), slice(10, 40, 3), slice(0, 0), 5, -1, torch.tensor(4),
    (ROWS, 1), (ROWS, -1), (slice(None), 2), (ROWS, slice(0, 2)), (3, 1), (ROWS, 1, 5), (ROWS, slice(None), 3),
    (ROWS, torch.tensor([0, 1, 2, 0, 1])), (Ellipsis, 0), (slice(None), slice(None), slice(2, 9), 0),
    (ROWS, 0, slice(1, 4), slice(1, 4)),
], ids=repr)
def test_reading_images_out_gives_what_resizing_all_of_them_gives(images, index):
    _, lazy, whole = images
    got = lazy[index]
    assert type(got) is torch.Tensor and got.shape == whole[index].shape and torch.equal(got, whole[index])


def test_only_the_images_read_out_are_resized_and_a_shape_query_resizes_none(images, resized_count):
    small, lazy, whole = images
    assert (lazy.shape, lazy.dtype, lazy.dim(), len(lazy)) == ((60, 3, SIDE, SIDE), torch.uint8, 4, 60)
    assert lazy.element_size() * lazy.nelement() == whole.numel() and lazy.device == small.device
    assert resized_count == []
    lazy[ROWS]
    lazy[ROWS, 2]  # one channel of five images: five single-channel images resized
    assert resized_count == [5, 5]
    assert cifar.resized(small, 32) is small  # at its own size: the tensor itself


def test_any_other_use_resizes_the_whole_set_as_the_eager_loader_did(images):
    _, lazy, whole = images
    assert torch.equal(lazy.float(), whole.float()) and torch.equal(torch.cat([lazy, lazy]), torch.cat([whole, whole]))
    assert np.array_equal(np.asarray(lazy), whole.numpy()) and int(lazy.sum()) == int(whole.sum())
    rebuild, args = lazy.__reduce_ex__(2)  # what pickling writes: the small images and the size
    again = rebuild(*args)
    assert isinstance(again, cifar.ResizedImages) and torch.equal(again[ROWS], whole[ROWS])
    assert torch.equal(copy.deepcopy(lazy)[ROWS], whole[ROWS])
    with pytest.raises(IndexError):
        lazy[60]
    with pytest.raises(IndexError):
        lazy[0, 3]


def test_a_dataset_of_resized_images_gives_the_eager_datasets_statistics_subsets_and_clients(images):
    small, lazy, whole = images
    labels, test_labels = torch.arange(60) % 10, torch.arange(20) % 10
    names = [f"c{i}" for i in range(10)]
    ds = ImageDataset("t", lazy, labels, cifar.ResizedImages(small[:20].clone(), SIDE), test_labels, names)
    eager = ImageDataset("t", whole, labels, whole[:20].clone(), test_labels, names)
    assert ds.norm_stats == eager.norm_stats and (ds.image_size, ds.in_channels) == (SIDE, 3)
    sub, sub_eager = ds.subset(30, 10, np.random.default_rng(0)), eager.subset(30, 10, np.random.default_rng(0))
    assert type(sub.train_x) is torch.Tensor and torch.equal(sub.train_x, sub_eager.train_x)
    assert torch.equal(sub.test_x, sub_eager.test_x) and sub.norm_stats == sub_eager.norm_stats
    part = make_partition("dirichlet", labels.numpy(), test_labels.numpy(), 3, np.random.default_rng(1), alpha=1.0)
    for a, b in zip(build_clients(ds, part, torch.device("cpu"), max_test=2),
                    build_clients(eager, part, torch.device("cpu"), max_test=2)):
        assert torch.equal(a.train_x, b.train_x) and torch.equal(a.test_x, b.test_x) and torch.equal(a.mean, b.mean)


def test_the_loader_serves_cifar_at_another_size_as_read_and_at_its_own_as_loaded(tmp_path: Path):
    write_cifar10(tmp_path)
    big, native = load_dataset("cifar10", root=tmp_path, image_size=SIDE), load_dataset("cifar10", root=tmp_path)
    assert isinstance(big.train_x, cifar.ResizedImages) and isinstance(big.test_x, cifar.ResizedImages)
    assert type(native.train_x) is torch.Tensor
    assert torch.equal(big.train_x[ROWS[:3]], resize_images(native.train_x, SIDE)[ROWS[:3]])
