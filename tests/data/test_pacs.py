"""PACS (FedPFT (ICLR) Table 10) read from its archive's image folders, and the error without them."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch
from PIL import Image

from fedrepro.data import load_dataset
from fedrepro.errors import DataNotFoundError

pytestmark = pytest.mark.usefixtures("_isolated")

DOMAINS = ("art_painting", "cartoon", "photo", "sketch")
CLASSES = {"dog": (200, 30, 30), "house": (30, 200, 30)}


def write_pacs(folder: Path, images: int = 3) -> None:
    """The archive's layout: kfold/<domain>/<class>/pic_NNN.jpg (227-pixel JPEGs, 3 per class here)."""
    for domain in DOMAINS:
        for cls, colour in CLASSES.items():
            d = folder / "kfold" / domain / cls
            d.mkdir(parents=True)
            for i in range(images):
                Image.new("RGB", (227, 227), colour).save(d / f"pic_{i:03d}.jpg")


@pytest.mark.parametrize("nested", [True, False])
def test_pacs_reads_four_domains_from_its_archive_layout(tmp_path: Path, nested: bool) -> None:
    write_pacs(tmp_path / "pacs")
    if not nested:  # the kfold/ folder's contents placed at <root>/pacs/ directly
        (tmp_path / "pacs" / "kfold").rename(tmp_path / "flat")
        (tmp_path / "pacs").rmdir()
        (tmp_path / "flat").rename(tmp_path / "pacs")
    ds = load_dataset("pacs", root=tmp_path, image_size=8, test_fraction=0.33)
    assert ds.domains == list(DOMAINS) and ds.classes == ["dog", "house"]
    # round(3 × 0.33) = 1 test image per (domain, class): 8 test, 16 train.
    assert len(ds.test_y) == 8 and len(ds.train_y) == 16
    assert torch.bincount(ds.test_domain).tolist() == [2, 2, 2, 2]
    assert ds.train_x.shape[1:] == (3, 8, 8)


def test_pacs_without_its_files_says_where_it_looked_and_how_to_get_it(tmp_path: Path) -> None:
    with pytest.raises(DataNotFoundError) as e:
        load_dataset("pacs", root=tmp_path)
    message = str(e.value)
    assert "'pacs'" in message and str(tmp_path / "pacs") in message
    assert "kfold" in message and "art_painting, cartoon, photo, sketch" in message
