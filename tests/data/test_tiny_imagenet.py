"""The Tiny-ImageNet loader: labels from the annotations, the cache, corrupt and missing data."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch
from PIL import Image

from fedrepro.data import load_dataset
from fedrepro.errors import CorruptCacheError, DataNotFoundError

pytestmark = pytest.mark.usefixtures("_isolated")


# wnids.txt order differs from sorted order, so "index in the file" labels would be wrong
TINY_WNIDS = ["n03000000", "n01000000", "n02000000"]  # sorted -> n01=0, n02=1, n03=2


COLOURS = [(250, 10, 10), (10, 250, 10), (10, 10, 250)]  # per sorted class index


# val annotations: neither "all 0", nor file order, nor wnids.txt position
VAL = [("val_0.JPEG", "n03000000"), ("val_1.JPEG", "n02000000"), ("val_2.JPEG", "n03000000"),
       ("val_3.JPEG", "n01000000"), ("val_4.JPEG", "n02000000")]


def solid(colour: tuple[int, int, int], size: int = 64) -> Image.Image:
    return Image.new("RGB", (size, size), colour)


def write_tiny(root: Path) -> Path:
    folder = root / "tiny-imagenet-200"
    (folder / "val" / "images").mkdir(parents=True)
    (folder / "wnids.txt").write_text("\n".join(TINY_WNIDS) + "\n")
    (folder / "words.txt").write_text(
        "n01000000\tgoldfish, Carassius auratus\nn02000000\tcat\nn03000000\tbus, autobus\nn09999999\tunused\n"
    )
    for wnid in TINY_WNIDS:
        c = sorted(TINY_WNIDS).index(wnid)
        d = folder / "train" / wnid / "images"
        d.mkdir(parents=True)
        (folder / "train" / wnid / f"{wnid}_boxes.txt").write_text("")
        for j in range(2):
            img = solid(COLOURS[c]) if j == 0 else solid(COLOURS[c]).convert("L")  # grey images exist
            img.save(d / f"{wnid}_{j}.JPEG", quality=95)
    lines = []
    for fname, wnid in VAL:
        solid(COLOURS[sorted(TINY_WNIDS).index(wnid)]).save(folder / "val" / "images" / fname, quality=95)
        lines.append(f"{fname}\t{wnid}\t0\t0\t63\t63")
    (folder / "val" / "val_annotations.txt").write_text("\n".join(lines) + "\n")
    return folder


def test_tiny_imagenet_labels_from_annotations(tmp_path: Path) -> None:
    folder = write_tiny(tmp_path)
    ds = load_dataset("tiny_imagenet", root=tmp_path)
    assert ds.train_x.shape == (6, 3, 64, 64) and ds.test_x.shape == (5, 3, 64, 64)
    assert ds.train_x.dtype == torch.uint8
    assert ds.classes == ["goldfish", "cat", "bus"]
    assert ds.train_y.tolist() == [0, 0, 1, 1, 2, 2]
    assert ds.test_y.tolist() == [2, 1, 2, 0, 1]
    # and the pixels agree with the labels (colour per class; JPEG is lossy)
    for x, y in zip(ds.test_x, ds.test_y):
        assert int(x[:, 32, 32].argmax()) == y
    assert (folder / ".fedrepro_cache_64.pt").is_file()


def test_tiny_imagenet_cache_and_resize(tmp_path: Path) -> None:
    folder = write_tiny(tmp_path)
    small = load_dataset("tiny_imagenet", root=tmp_path, image_size=16)
    assert small.train_x.shape == (6, 3, 16, 16)
    # with the images gone, the second load must come from the cache
    for p in (folder / "train").rglob("*.JPEG"):
        p.unlink()
    again = load_dataset("tiny_imagenet", root=tmp_path, image_size=16)
    assert torch.equal(again.train_x, small.train_x) and torch.equal(again.test_y, small.test_y)
    assert not list(folder.glob("*.tmp"))  # atomic write left no temp files


def test_tiny_imagenet_corrupt_cache(tmp_path: Path) -> None:
    folder = write_tiny(tmp_path)
    cache = folder / ".fedrepro_cache_64.pt"
    first = load_dataset("tiny_imagenet", root=tmp_path)
    cache.write_bytes(b"this is not a torch file")
    # Decoded again from the images, with a warning naming the file: never an error nor trained on.
    with pytest.warns(UserWarning, match=re.escape(str(cache)) + ".*rebuilding it"):
        again = load_dataset("tiny_imagenet", root=tmp_path)
    assert torch.equal(again.train_x, first.train_x)


def test_tiny_imagenet_bad_annotation(tmp_path: Path) -> None:
    folder = write_tiny(tmp_path)
    with open(folder / "val" / "val_annotations.txt", "a") as f:
        f.write("val_9.JPEG\tn04000000\t0\t0\t1\t1\n")
    with pytest.raises(CorruptCacheError, match="val_annotations"):
        load_dataset("tiny_imagenet", root=tmp_path)


def test_tiny_imagenet_missing(tmp_path: Path) -> None:
    with pytest.raises(DataNotFoundError) as e:
        load_dataset("tiny_imagenet", root=tmp_path)
    assert "tiny_imagenet" in str(e.value) and str(tmp_path / "tiny-imagenet-200") in str(e.value)
