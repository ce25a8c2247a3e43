"""Image folders (DomainNet, Office-Caltech10): domains and labels, the seeded split, existing splits,
missing data, and the cache."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch
from PIL import Image

from fedrepro.data import load_dataset
from fedrepro.errors import ConfigError, DataNotFoundError

pytestmark = pytest.mark.usefixtures("_isolated")


FOLDER_COLOURS = {"cat": (200, 30, 30), "dog": (30, 200, 30), "fox": (30, 30, 200)}


def write_image_folder(folder: Path) -> None:
    """Two domains: 'photo' (JPEG, cat/dog) and 'sketch' (PNG, cat/dog/fox), 5 images per class."""
    for domain, classes, ext in (("photo", ["cat", "dog"], "jpg"), ("sketch", ["cat", "dog", "fox"], "png")):
        for cls in classes:
            d = folder / domain / cls
            d.mkdir(parents=True)
            for i in range(5):
                size = (40 + 3 * i, 30)  # non-square, varied: must be resized
                Image.new("RGB", size, FOLDER_COLOURS[cls]).save(d / f"{cls}{i}.{ext}")
            (d / "notes.txt").write_text("not an image")
    (folder / ".hidden").mkdir()


def test_image_folder_domains_and_labels(tmp_path: Path) -> None:
    write_image_folder(tmp_path / "image_folder")
    ds = load_dataset("image_folder", root=tmp_path, image_size=12)
    assert ds.domains == ["photo", "sketch"] and ds.classes == ["cat", "dog", "fox"]
    assert ds.train_x.shape[1:] == (3, 12, 12) and ds.train_x.dtype == torch.uint8
    assert len(ds.train_y) + len(ds.test_y) == 25
    # 20% of each group of 5 -> 1 test image per (domain, class)
    assert len(ds.test_y) == 5
    assert sorted(zip(ds.test_domain.tolist(), ds.test_y.tolist())) == [(0, 0), (0, 1), (1, 0), (1, 1), (1, 2)]
    assert torch.bincount(ds.train_domain).tolist() == [8, 12]
    for x, y in zip(torch.cat([ds.train_x, ds.test_x]), torch.cat([ds.train_y, ds.test_y])):
        assert int(x[:, 6, 6].float().argmax()) == y  # colour encodes class


def test_image_folder_split_is_seeded(tmp_path: Path) -> None:
    write_image_folder(tmp_path / "data")
    kw = dict(path=tmp_path / "data", image_size=8, test_fraction=0.4)
    a = load_dataset("image_folder", seed=1, **kw)
    b = load_dataset("image_folder", seed=1, **kw)
    assert torch.equal(a.test_x, b.test_x) and torch.equal(a.train_x, b.train_x)
    # choosing a subset of domains keeps that domain's split unchanged
    only = load_dataset("image_folder", seed=1, domains=["sketch"], **kw)
    assert only.domains == ["sketch"] and only.num_domains == 1
    assert torch.equal(only.test_x, a.test_x[a.test_domain == 1])
    with pytest.raises(ConfigError, match="photo"):
        load_dataset("image_folder", domains=["clipart"], **kw)


def test_image_folder_split_depends_on_seed(tmp_path: Path) -> None:
    # images within a class differ in content here, so the split is visible in pixels
    for i in range(10):
        d = tmp_path / "f" / "dom" / "cls"
        d.mkdir(parents=True, exist_ok=True)
        Image.new("L", (8, 8), i * 20).save(d / f"{i}.png")
    splits = {
        tuple(sorted(load_dataset("image_folder", path=tmp_path / "f", image_size=8, seed=s).test_x[:, 0, 0,
                                                                                                    0].tolist()))
        for s in range(5)
    }
    assert len(splits) > 1
    assert all(len(s) == 2 for s in splits)


def test_image_folder_existing_split_and_alias(tmp_path: Path) -> None:
    for domain in ("amazon", "webcam"):
        for split, n in (("train", 3), ("test", 2)):
            for cls in ("cat", "dog"):
                d = tmp_path / "office_caltech10" / domain / split / cls
                d.mkdir(parents=True)
                for i in range(n):
                    Image.new("RGB", (20, 20), FOLDER_COLOURS[cls]).save(d / f"{i}.jpeg")
    ds = load_dataset("office_caltech10", root=tmp_path, image_size=10)
    assert ds.name == "office_caltech10" and ds.domains == ["amazon", "webcam"] and ds.classes == ["cat", "dog"]
    assert len(ds.train_y) == 12 and len(ds.test_y) == 8
    assert torch.bincount(ds.test_domain).tolist() == [4, 4]


def test_image_folder_missing(tmp_path: Path) -> None:
    with pytest.raises(DataNotFoundError) as e:
        load_dataset("domainnet", root=tmp_path)
    assert "domainnet" in str(e.value) and str(tmp_path / "domainnet") in str(e.value)
    (tmp_path / "domainnet" / "real" / "cat").mkdir(parents=True)
    with pytest.raises(DataNotFoundError, match="No .jpg"):
        load_dataset("domainnet", root=tmp_path)


def test_image_folder_cache_tracks_file_list(tmp_path: Path) -> None:
    write_image_folder(tmp_path / "image_folder")
    a = load_dataset("image_folder", root=tmp_path, image_size=8)
    assert (tmp_path / "image_folder" / ".fedrepro_cache_photo_8.pt").is_file()
    Image.new("RGB", (9, 9), FOLDER_COLOURS["fox"]).save(tmp_path / "image_folder" / "photo" / "cat" / "extra.png")
    with pytest.warns(UserWarning, match="stale"):
        b = load_dataset("image_folder", root=tmp_path, image_size=8)
    assert len(b.train_y) + len(b.test_y) == len(a.train_y) + len(a.test_y) + 1


def test_image_folder_classes_keeps_those_class_folders(tmp_path: Path) -> None:
    write_image_folder(tmp_path / "domainnet")
    full = load_dataset("domainnet", root=tmp_path, image_size=8)
    two = load_dataset("domainnet", root=tmp_path, image_size=8, classes=["fox", "cat"])
    assert two.classes == ["cat", "fox"] and two.domains == ["photo", "sketch"]
    # The same split as the whole folder's, relabelled: cat stays 0, fox becomes 1.
    keep = (full.test_y == 0) | (full.test_y == 2)
    assert torch.equal(two.test_x, full.test_x[keep])
    assert two.test_y.tolist() == [0 if y == 0 else 1 for y in full.test_y[keep].tolist()]
    # Its own cache: loading the whole folder again does not find a stale one.
    assert len(list((tmp_path / "domainnet").glob(".fedrepro_cache_photo*_8.pt"))) == 2
    with pytest.raises(ConfigError, match="classes for 'domainnet' must be distinct names from: cat, dog, fox"):
        load_dataset("domainnet", root=tmp_path, image_size=8, classes=["cat", "zebra"])
    with pytest.raises(ConfigError, match="classes"):
        load_dataset("domainnet", root=tmp_path, image_size=8, classes="cat")
