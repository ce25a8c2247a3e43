"""Every input a run trains on is checked or digested (issue 53, class 5; class 7's domains cache).

Fashion-MNIST's files are checked against the manifest of their content: a damaged copy of the same
size is a one-line error naming the file at fault (images or labels). Derived caches carry a digest
of their own content and of their source: an altered, unreadable or short one is rebuilt with a
warning naming it, never trained on. Files that vary from user to user (CIFAR, Tiny-ImageNet, image
folders) have a content digest that a run records (tests/test_input_reuse.py: no reuse across inputs).
"""
from __future__ import annotations

import gzip
import re
import shutil
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

import fedrepro.data.fashion_mnist as fm
from fedrepro.data import REHEARSAL_ROOT, load_dataset
from fedrepro.data import digest
from fedrepro.data.digest import file_digest, forget
from fedrepro.data.registry import input_digest
from fedrepro.data.verified_cache import DIGEST, content_digest
from fedrepro.errors import CorruptCacheError

from .fmnist_files import DEBIAN, idx_bytes, write_fake_fmnist
from .test_cifar import write_cifar10
from .test_image_folder import write_image_folder
from .test_tiny_imagenet import write_tiny

pytestmark = pytest.mark.usefixtures("_isolated")


def _flip(path: Path, at: int = -5) -> None:
    """Flip one bit of the IDX bytes of ``path`` (gz or raw); the size stays the same."""
    raw = bytearray(gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes())
    raw[at] ^= 0x01
    path.write_bytes(gzip.compress(bytes(raw)) if path.suffix == ".gz" else bytes(raw))


def _one_line_error(excinfo: pytest.ExceptionInfo, *names: str) -> str:
    msg = str(excinfo.value)
    assert "\n" not in msg
    for name in names:
        assert name in msg, (name, msg)
    return msg


@pytest.mark.parametrize("gz", [True, False])
def test_a_damaged_images_file_of_the_same_size_is_named(tmp_path: Path, gz: bool) -> None:
    write_fake_fmnist(tmp_path / "fashion_mnist", gz=gz)
    load_dataset("fashion_mnist", root=tmp_path)  # the files as written load
    f = tmp_path / "fashion_mnist" / ("train-images-idx3-ubyte" + (".gz" if gz else ""))
    _flip(f)
    with pytest.raises(CorruptCacheError) as e:
        load_dataset("fashion_mnist", root=tmp_path)
    msg = _one_line_error(e, str(f), "training images", "sha256")
    assert "labels" not in msg


def test_a_damaged_labels_file_is_named_as_the_labels_file(tmp_path: Path) -> None:
    write_fake_fmnist(tmp_path / "fashion_mnist")
    f = tmp_path / "fashion_mnist" / "t10k-labels-idx1-ubyte.gz"
    _flip(f, at=-1)  # label 1 -> 0 or 0 -> 1: still a valid class, same size
    with pytest.raises(CorruptCacheError) as e:
        load_dataset("fashion_mnist", root=tmp_path)
    msg = _one_line_error(e, str(f), "test labels")
    assert "images-idx3" not in msg


def test_labels_out_of_range_name_the_labels_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Were the manifest to admit such a file, the range check names the labels, not the images.
    folder = tmp_path / "fashion_mnist"
    write_fake_fmnist(folder, gz=False)
    labels = folder / "train-labels-idx1-ubyte"
    labels.write_bytes(idx_bytes(np.full(60, 12, np.uint8)))
    monkeypatch.setitem(fm.MANIFEST, "train-labels-idx1-ubyte", frozenset({file_digest(labels)}))
    with pytest.raises(CorruptCacheError) as e:
        load_dataset("fashion_mnist", root=tmp_path)
    msg = _one_line_error(e, str(labels), "label 12")
    assert "images-idx3" not in msg


@pytest.mark.skipif(not (DEBIAN / "train-images-idx3-ubyte.gz").exists(), reason="dataset-fashion-mnist not installed")
def test_the_manifest_admits_the_real_files_and_no_damaged_copy(tmp_path: Path) -> None:
    folder = tmp_path / "fashion_mnist"
    shutil.copytree(DEBIAN, folder)
    ds = load_dataset("fashion_mnist", root=tmp_path)
    assert ds.train_x.shape == (60000, 1, 28, 28)
    f = folder / "train-labels-idx1-ubyte.gz"
    raw = bytearray(gzip.decompress(f.read_bytes()))
    raw[100] = (raw[100] + 1) % 10  # one label changed, still a class
    f.write_bytes(gzip.compress(bytes(raw)))
    with pytest.raises(CorruptCacheError) as e:
        load_dataset("fashion_mnist", root=tmp_path)
    _one_line_error(e, str(f), "training labels")


# --------------------------------------------------------------------------- the domains cache

def _domains(tmp_path: Path):
    return load_dataset("fashion_mnist_domains", root=tmp_path, seed=1, styles=["original", "inverted"])


def _the_cache(tmp_path: Path) -> Path:
    (cache,) = (tmp_path / "cache" / "fashion_mnist_domains").glob("*.pt")
    return cache


def _rebuilt_with_warning(tmp_path: Path, cache: Path, first, match: str) -> None:
    with pytest.warns(UserWarning, match=re.escape(str(cache)) + ".*" + match) as seen:
        again = _domains(tmp_path)
    assert all("\n" not in str(w.message) for w in seen)
    for f in ("train_x", "test_x", "train_domain", "test_domain"):
        assert torch.equal(getattr(again, f), getattr(first, f)), f
    # and the rebuilt cache is sound: read back without a warning
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _domains(tmp_path)


def test_an_altered_domains_cache_is_rebuilt_not_trained_on(tmp_path: Path) -> None:
    write_fake_fmnist(tmp_path / "fashion_mnist")
    first = _domains(tmp_path)
    cache = _the_cache(tmp_path)
    c = torch.load(cache, weights_only=True)
    c["train_x"][0, 0, 0, 0] ^= 0xFF  # one pixel changed, digest left as it was
    torch.save(c, cache)
    _rebuilt_with_warning(tmp_path, cache, first, "altered")


def test_a_domains_cache_with_too_few_images_is_rebuilt(tmp_path: Path) -> None:
    write_fake_fmnist(tmp_path / "fashion_mnist")
    first = _domains(tmp_path)
    cache = _the_cache(tmp_path)
    c = torch.load(cache, weights_only=True)
    short = {k: v[:10] if isinstance(v, torch.Tensor) else v for k, v in c.items() if k != DIGEST}
    torch.save({**short, DIGEST: content_digest(short)}, cache)  # sound as a file, short of images
    _rebuilt_with_warning(tmp_path, cache, first, "10, 3, 28, 28")


@pytest.mark.parametrize("damage", ["truncated", "no digest"])
def test_a_cut_or_unvouched_domains_cache_is_rebuilt(tmp_path: Path, damage: str) -> None:
    write_fake_fmnist(tmp_path / "fashion_mnist")
    first = _domains(tmp_path)
    cache = _the_cache(tmp_path)
    if damage == "truncated":
        cache.write_bytes(cache.read_bytes()[:2000])
    else:  # a cache written by an older fedrepro, or by hand
        c = torch.load(cache, weights_only=True)
        del c[DIGEST]
        torch.save(c, cache)
    _rebuilt_with_warning(tmp_path, cache, first, "rebuilding it")


# --------------------------------------------------------------------------- decoded caches keyed by source

def test_tiny_imagenet_cache_follows_the_images_content(tmp_path: Path) -> None:
    folder = write_tiny(tmp_path)
    first = load_dataset("tiny_imagenet", root=tmp_path, image_size=16)
    img = next((folder / "train").rglob("*_0.JPEG"))
    Image.new("RGB", (64, 64), (128, 128, 128)).save(img, quality=95)  # same name, other picture
    with pytest.warns(UserWarning, match="stale.*source"):
        again = load_dataset("tiny_imagenet", root=tmp_path, image_size=16)
    assert not torch.equal(again.train_x, first.train_x)


def test_tiny_imagenet_altered_cache_is_rebuilt(tmp_path: Path) -> None:
    folder = write_tiny(tmp_path)
    first = load_dataset("tiny_imagenet", root=tmp_path, image_size=16)
    cache = folder / ".fedrepro_cache_16.pt"
    c = torch.load(cache, weights_only=True)
    c["train_y"][0] = 2
    torch.save(c, cache)
    with pytest.warns(UserWarning, match=re.escape(str(cache)) + ".*altered"):
        again = load_dataset("tiny_imagenet", root=tmp_path, image_size=16)
    assert torch.equal(again.train_y, first.train_y)


def test_image_folder_cache_follows_the_images_content(tmp_path: Path) -> None:
    write_image_folder(tmp_path / "image_folder")
    first = load_dataset("image_folder", root=tmp_path, image_size=8)
    img = next((tmp_path / "image_folder").rglob("*.png"))
    Image.new("RGB", (16, 16), (1, 2, 3)).save(img)
    with pytest.warns(UserWarning, match="stale.*source"):
        again = load_dataset("image_folder", root=tmp_path, image_size=8)
    assert not torch.equal(torch.cat([again.train_x, again.test_x]), torch.cat([first.train_x, first.test_x]))


# --------------------------------------------------------------------------- input digests

def test_the_input_digest_is_the_files_content_wherever_they_lie(tmp_path: Path, monkeypatch) -> None:
    write_cifar10(tmp_path / "a")
    write_cifar10(tmp_path / "b")
    a, b = input_digest("cifar10", {}, tmp_path / "a"), input_digest("cifar10", {}, tmp_path / "b")
    assert a is not None and a == b
    monkeypatch.setenv("FEDREPRO_DATA", str(tmp_path / "a"))  # the run's data root, as a run reads it
    assert input_digest("cifar10", {"image_size": 16}) == a  # resizing is code, not input
    batch = tmp_path / "b" / "cifar-10-batches-py" / "data_batch_2"
    raw = bytearray(batch.read_bytes())
    raw[-20] ^= 0x01  # a pixel, same size
    batch.write_bytes(bytes(raw))
    assert input_digest("cifar10", {}, tmp_path / "b") == a  # a process reads its inputs once ...
    forget()
    assert input_digest("cifar10", {}, tmp_path / "b") not in (None, a)  # ... and a new one sees the change


def test_the_input_digest_reads_a_file_again_only_when_it_changed(tmp_path: Path, monkeypatch) -> None:
    forget()
    f = tmp_path / "x"
    f.write_bytes(b"one")
    reads: list = []
    monkeypatch.setattr(digest, "open", lambda *a, **k: reads.append(a[0]) or open(*a, **k), raising=False)
    first = file_digest(f)
    assert file_digest(f) == first and len(reads) == 2  # just written: read each time (racily clean)
    time.sleep(digest.RACY_NS / 1e9 + 0.05)
    file_digest(f)
    assert file_digest(f) == first and len(reads) == 3  # then memoized by path and stat
    f.write_bytes(b"two")  # same size, and maybe the same tick: its ctime moved or it is recent
    assert file_digest(f) != first and len(reads) == 4


def test_no_input_digest_where_the_manifest_or_nothing_is_read(tmp_path: Path) -> None:
    write_fake_fmnist(tmp_path / "fashion_mnist")
    assert input_digest("fashion_mnist", {}, tmp_path) is None  # checked against the manifest instead
    assert input_digest("fashion_mnist_domains", {}, tmp_path) is None
    assert input_digest("synthetic", {}, tmp_path) is None
    assert input_digest("cifar10", {}, REHEARSAL_ROOT) is None
    assert input_digest("cifar10", {}, tmp_path) is None  # not here: nothing to compare
    write_tiny(tmp_path)
    assert input_digest("tiny_imagenet", {}, tmp_path) is not None
    write_image_folder(tmp_path / "pacs")
    assert input_digest("pacs", {"domains": ["photo"]}, tmp_path) != input_digest("pacs", {}, tmp_path)
