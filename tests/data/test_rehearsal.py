"""The rehearsal data mode: at the root "rehearsal:" every dataset comes as seeded stand-in images
of its real shape, for the same options, within the memory budget, with a learnable signal."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

import fedrepro.data.rehearsal as rehearsal
from fedrepro.data import REHEARSAL_ROOT, dataset_options, list_datasets, load_dataset, rehearsal_shape
from fedrepro.data.subsets import DOMAINNET_TEN
from fedrepro.errors import ConfigError

pytestmark = pytest.mark.usefixtures("_clean_env")

DOCS = Path(__file__).resolve().parents[2] / "docs" / "data.md"


@pytest.fixture
def small_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rehearsal, "BUDGET_BYTES", 2**20)


def _options(row: rehearsal.DataShape, **over) -> dict:
    return {**dict(row.select), **over}


@pytest.mark.parametrize("key", rehearsal.SHAPES.names())
def test_each_row_loads_in_its_shape(key, small_budget) -> None:
    row = rehearsal.SHAPES.get(key)
    # At the row's own size the shape is read without images; the images are made at 16 pixels.
    at_size = rehearsal_shape(row.loader, **_options(row))
    assert at_size.image_size == row.image_size and at_size.classes == row.classes
    small = _options(row, image_size=16) if "image_size" in dataset_options(row.loader) else _options(row)
    ds = load_dataset(row.loader, root=REHEARSAL_ROOT, **small)
    s = rehearsal_shape(row.loader, **small)
    assert ds.classes == list(row.classes) and ds.in_channels == row.channels
    assert tuple(ds.train_x.shape[2:]) == (s.image_size,) * 2
    assert ds.domains == (None if row.domains is None else list(row.domains))
    per_domain_train = torch.bincount(ds.train_domain, minlength=ds.num_domains) if ds.domains else \
        torch.tensor([len(ds.train_y)])
    assert per_domain_train.tolist() == [n * ds.num_classes for n in s.train_per_class]
    assert torch.bincount(ds.train_y, minlength=ds.num_classes).tolist() == [sum(s.train_per_class)] * ds.num_classes
    assert len(ds.test_y) == sum(s.test_per_class) * ds.num_classes
    # Within the budget, unless a floor (min_train training images a class, one test image) asks for more.
    floor = s.nbytes <= rehearsal.BUDGET_BYTES or min(s.train_per_class) <= row.min_train + 1 or \
        min(s.test_per_class) == 1
    assert floor and 0 < s.fraction <= 1


def test_every_loader_that_reads_files_has_a_row_or_reads_none() -> None:
    for name in list_datasets():
        if name in rehearsal.NO_FILES:
            assert load_dataset(name, root=REHEARSAL_ROOT).num_classes >= 2  # its own procedural loader
            continue
        rows = [k for k in rehearsal.SHAPES.names() if rehearsal.SHAPES.get(k).loader == name]
        assert rows, name


def test_the_environment_variable_selects_it(monkeypatch, small_budget) -> None:
    monkeypatch.setenv("FEDREPRO_DATA", REHEARSAL_ROOT)
    ds = load_dataset("cifar100", image_size=8)
    assert ds.train_x.shape[1:] == (3, 8, 8) and ds.classes[:3] == ["apple", "aquarium_fish", "baby"]
    assert load_dataset("cifar100", label_type="coarse", image_size=8).num_classes == 20


def test_real_sizes_and_the_stated_fraction() -> None:
    # At full budget the small sets come whole, the large ones as a stated fraction of every class.
    whole = rehearsal_shape("fashion_mnist")
    assert whole.fraction == 1 and whole.train_per_class == (6000,) and whole.test_per_class == (1000,)
    c100 = rehearsal_shape("cifar100", image_size=224)
    assert c100.image_size == 224 and c100.fraction < 0.02 and c100.nbytes <= rehearsal.BUDGET_BYTES
    assert c100.train_per_class == (int(500 * c100.fraction),)
    # Few-shot CLIP datasets keep 16 training images a class, the most shots the paper draws.
    pets = rehearsal_shape("image_folder", path="rehearsal:/oxford_pets", image_size=224)
    assert pets.domains == ("oxford_pets",) and len(pets.classes) == 37 and pets.train_per_class[0] >= 16


def test_domainnet_ten_classes_and_options_checked(small_budget) -> None:
    s = rehearsal_shape("domainnet", image_size=224, classes=list(DOMAINNET_TEN))
    assert s.classes == DOMAINNET_TEN and len(s.domains) == 6
    with pytest.raises(ConfigError, match="classes for 'domainnet' must be distinct names"):
        rehearsal_shape("domainnet", classes=["bird", "unicorn"])
    with pytest.raises(ConfigError, match="domains for 'pacs' must be distinct names from: art_painting"):
        rehearsal_shape("pacs", domains=["photo", "clipart"])
    with pytest.raises(ConfigError, match="unknown option"):
        load_dataset("cifar10", root=REHEARSAL_ROOT, label_type="fine")
    with pytest.raises(ConfigError, match="unknown rehearsal dataset 'my_own_set'"):
        rehearsal_shape("image_folder", path="/data/my_own_set")


def test_seeded_and_blocks_independent() -> None:
    # PACS at 16 pixels fits the budget whole, so a subset of domains keeps every count.
    a = load_dataset("pacs", root=REHEARSAL_ROOT, image_size=16)
    b = load_dataset("pacs", root=REHEARSAL_ROOT, image_size=16)
    assert torch.equal(a.train_x, b.train_x) and torch.equal(a.test_x, b.test_x)
    photo = load_dataset("pacs", root=REHEARSAL_ROOT, image_size=16, domains=["photo"])
    assert torch.equal(photo.train_x, a.train_x[a.train_domain == a.domains.index("photo")])
    other = load_dataset("pacs", root=REHEARSAL_ROOT, image_size=16, seed=1)
    assert not torch.equal(other.train_x, a.train_x)


def test_a_nearest_class_mean_probe_beats_chance(small_budget) -> None:
    for name, kw in (("cifar100", {"image_size": 16}), ("domainnet", {"image_size": 16,
                                                                      "classes": list(DOMAINNET_TEN)})):
        ds = load_dataset(name, root=REHEARSAL_ROOT, **kw)
        x_tr = ds.train_x.flatten(1).float()
        x_te = ds.test_x.flatten(1).float()
        means = torch.stack([x_tr[ds.train_y == c].mean(0) for c in range(ds.num_classes)])
        acc = float((torch.cdist(x_te, means).argmin(1) == ds.test_y).float().mean())
        assert acc > 3.0 / ds.num_classes, (name, acc)


def test_docs_hold_the_table() -> None:
    assert rehearsal.markdown_table() in DOCS.read_text()


def test_budget_is_what_it_says() -> None:
    assert rehearsal.BUDGET_BYTES == 96 * 2**20
    assert np.isclose(rehearsal_shape("cifar10").fraction, rehearsal.BUDGET_BYTES / (60000 * 3 * 32 * 32))


def test_the_budget_can_be_raised_from_the_environment(monkeypatch) -> None:
    # 2 GiB: the paper profile's CIFAR-100 at 224 gives each of a class's 10 pathological clients images.
    monkeypatch.setenv(rehearsal.ENV_BUDGET, "2048")
    s = rehearsal_shape("cifar100", image_size=224)
    assert s.fraction == pytest.approx(2048 * 2**20 / (60000 * 3 * 224 * 224)) and s.train_per_class[0] >= 10
    monkeypatch.setenv(rehearsal.ENV_BUDGET, "lots")
    with pytest.raises(ConfigError, match="FEDREPRO_REHEARSAL_MIB='lots' is not valid; valid: a positive number"):
        rehearsal_shape("cifar10")
