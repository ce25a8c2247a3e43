"""The CIFAR-10/100 loaders on tiny files in the true pickle format, which cannot run code."""
from __future__ import annotations

import pickle
import struct
from pathlib import Path

import numpy as np
import pytest
import torch

from fedrepro.data import load_dataset
from fedrepro.errors import ConfigError, CorruptCacheError, DataNotFoundError

pytestmark = pytest.mark.usefixtures("_isolated")


def py2_pickle(obj: object) -> bytes:
    """Protocol-2 pickle the way Python 2 + numpy 1.x wrote the CIFAR files.

    Python 3 cannot produce this (it writes bytes via _codecs.encode and numpy
    arrays via numpy._core), so it is assembled from opcodes.
    """

    def s(b: bytes) -> bytes:
        return (b"U" + bytes([len(b)]) + b) if len(b) < 256 else (b"T" + struct.pack("<i", len(b)) + b)

    def enc(o: object) -> bytes:
        if isinstance(o, bytes):
            return s(o)
        if isinstance(o, bool) or o is None:
            raise TypeError(o)
        if isinstance(o, int):
            return b"J" + struct.pack("<i", o)
        if isinstance(o, list):
            return b"](" + b"".join(enc(v) for v in o) + b"e" if o else b"]"
        if isinstance(o, dict):
            return b"}(" + b"".join(enc(k) + enc(v) for k, v in o.items()) + b"u"
        if isinstance(o, np.ndarray):
            assert o.dtype == np.uint8
            shape = b"".join(b"J" + struct.pack("<i", d) for d in o.shape)
            return (
                b"cnumpy.core.multiarray\n_reconstruct\ncnumpy\nndarray\nK\x00\x85" + s(b"b") + b"\x87R"
                + b"(K\x01(" + shape + b"tcnumpy\ndtype\n" + s(b"u1") + b"K\x00K\x01\x87R"
                + b"(K\x03" + s(b"|") + b"NNNJ\xff\xff\xff\xffJ\xff\xff\xff\xffK\x00tb\x89" + s(o.tobytes()) + b"tb"
            )
        raise TypeError(type(o))

    return b"\x80\x02" + enc(obj) + b"."


def cifar_images(labels: list[int]) -> np.ndarray:
    """[N, 3072] rows, channel-major, each image a solid colour encoding (label, channel)."""
    n = len(labels)
    rows = np.empty((n, 3, 1024), np.uint8)
    for i, y in enumerate(labels):
        rows[i] = (np.array([y, 100 + y, 200 - y]) + i % 3)[:, None]
    return rows.reshape(n, 3072)


C10_NAMES = [b"airplane", b"automobile", b"bird", b"cat", b"deer", b"dog", b"frog", b"horse", b"ship", b"truck"]


def write_cifar10(root: Path) -> dict:
    folder = root / "cifar-10-batches-py"
    folder.mkdir(parents=True)
    want = {"train": [], "test": []}
    for i in range(1, 6):
        labels = [(i + j) % 10 for j in range(4)]
        want["train"] += labels
        (folder / f"data_batch_{i}").write_bytes(
            py2_pickle({b"batch_label": b"training batch", b"labels": labels, b"data": cifar_images(labels)})
        )
    labels = [9, 0, 5]
    want["test"] = labels
    (folder / "test_batch").write_bytes(py2_pickle({b"labels": labels, b"data": cifar_images(labels)}))
    (folder / "batches.meta").write_bytes(py2_pickle({b"label_names": C10_NAMES, b"num_vis": 3072}))
    return want


def test_cifar10(tmp_path: Path) -> None:
    want = write_cifar10(tmp_path)
    ds = load_dataset("cifar10", root=tmp_path)
    assert ds.train_x.shape == (20, 3, 32, 32) and ds.test_x.shape == (3, 3, 32, 32)
    assert ds.train_x.dtype == torch.uint8 and ds.train_y.dtype == torch.int64
    assert ds.train_y.tolist() == want["train"] and ds.test_y.tolist() == want["test"]
    assert ds.classes == [n.decode() for n in C10_NAMES]
    # channel-major rows -> CHW: pixel colour must encode (label, channel)
    y, i = ds.train_y[6].item(), 6 % 4 % 3
    assert ds.train_x[6, :, 5, 7].tolist() == [y + i, 100 + y + i, 200 - y + i]


def test_cifar10_missing_lists_files(tmp_path: Path) -> None:
    write_cifar10(tmp_path)
    (tmp_path / "cifar-10-batches-py" / "data_batch_3").unlink()
    with pytest.raises(DataNotFoundError) as e:
        load_dataset("cifar10", root=tmp_path)
    assert "cifar10" in str(e.value) and "data_batch_3" in str(e.value)
    assert str(tmp_path / "cifar-10-batches-py") in str(e.value)


def test_cifar_truncated_pickle(tmp_path: Path) -> None:
    write_cifar10(tmp_path)
    f = tmp_path / "cifar-10-batches-py" / "test_batch"
    f.write_bytes(f.read_bytes()[:500])
    with pytest.raises(CorruptCacheError, match="test_batch"):
        load_dataset("cifar10", root=tmp_path)


def test_cifar_pickle_cannot_run_code(tmp_path: Path) -> None:
    write_cifar10(tmp_path)
    marker = tmp_path / "pwned"
    evil = b"\x80\x02cos\nsystem\nX" + struct.pack("<I",
                                                   len(f"touch {marker}")) + f"touch {marker}".encode() + b"\x85R."
    (tmp_path / "cifar-10-batches-py" / "batches.meta").write_bytes(evil)
    with pytest.raises(CorruptCacheError, match="os.system"):
        load_dataset("cifar10", root=tmp_path)
    assert not marker.exists()


def write_cifar100(root: Path) -> None:
    folder = root / "cifar-100-python"
    folder.mkdir(parents=True)
    for split, fine in (("train", [0, 1, 2, 99, 50]), ("test", [3, 98])):
        coarse = [f // 5 for f in fine]
        d = {b"filenames": [b"x.png"] * len(fine), b"fine_labels": fine, b"coarse_labels": coarse,
             b"data": cifar_images(fine)}
        # Python 3 protocol-2 pickle: the other dialect a re-pickled copy may use
        (folder / split).write_bytes(pickle.dumps(d, protocol=2))
    meta = {b"fine_label_names": [f"fine{i}".encode() for i in range(100)],
            b"coarse_label_names": [f"coarse{i}".encode() for i in range(20)]}
    (folder / "meta").write_bytes(pickle.dumps(meta, protocol=2))


def test_cifar100_fine_and_coarse(tmp_path: Path) -> None:
    write_cifar100(tmp_path)
    fine = load_dataset("cifar100", root=tmp_path)
    assert fine.train_y.tolist() == [0, 1, 2, 99, 50] and fine.test_y.tolist() == [3, 98]
    assert fine.num_classes == 100 and fine.classes[99] == "fine99"
    assert fine.train_x.shape == (5, 3, 32, 32)
    coarse = load_dataset("cifar100", root=tmp_path, label_type="coarse")
    assert coarse.train_y.tolist() == [0, 0, 0, 19, 10] and coarse.num_classes == 20
    assert torch.equal(coarse.train_x, fine.train_x)


def test_cifar100_missing(tmp_path: Path) -> None:
    with pytest.raises(DataNotFoundError, match="cifar100"):
        load_dataset("cifar100", root=tmp_path)


def test_cifar_image_size_resizes_every_image(tmp_path: Path) -> None:
    # A ViT-B/16 or CLIP reads 224x224 (PEP-FedPT §5.1); a solid colour stays that colour when resized.
    want = write_cifar10(tmp_path)
    ds = load_dataset("cifar10", root=tmp_path, image_size=48)
    native = load_dataset("cifar10", root=tmp_path)
    assert ds.train_x.shape == (20, 3, 48, 48) and ds.test_x.shape == (3, 3, 48, 48)
    assert ds.train_y.tolist() == want["train"]
    assert torch.equal(ds.train_x[:, :, 20, 30], native.train_x[:, :, 5, 7])
    write_cifar100(tmp_path)
    assert load_dataset("cifar100", root=tmp_path, image_size=40).train_x.shape == (5, 3, 40, 40)
    with pytest.raises(ConfigError, match="image_size"):
        load_dataset("cifar100", root=tmp_path, image_size=0)
