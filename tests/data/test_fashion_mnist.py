"""The Fashion-MNIST loader on tiny files in the true IDX format: both layouts, the root, download,
incomplete folders, and the Debian package when it is installed."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

import fedrepro.data.fashion_mnist as fm
from fedrepro.data import load_dataset
from fedrepro.errors import DataNotFoundError

from .fmnist_files import DEBIAN, check_fmnist, write_fake_fmnist

pytestmark = pytest.mark.usefixtures("_isolated")


def test_fashion_mnist_fedrepro_layout_gz(tmp_path: Path) -> None:
    arrays = write_fake_fmnist(tmp_path / "fashion_mnist", gz=True)
    check_fmnist(load_dataset("fashion_mnist", root=tmp_path), arrays)


def test_fashion_mnist_torchvision_layout_raw(tmp_path: Path) -> None:
    arrays = write_fake_fmnist(tmp_path / "FashionMNIST" / "raw", gz=False)
    check_fmnist(load_dataset("fashion_mnist", root=tmp_path), arrays)


def test_fashion_mnist_prefers_fedrepro_layout(tmp_path: Path) -> None:
    write_fake_fmnist(tmp_path / "FashionMNIST" / "raw", seed=1)
    arrays = write_fake_fmnist(tmp_path / "fashion_mnist", seed=2)
    check_fmnist(load_dataset("fashion_mnist", root=tmp_path), arrays)


def test_fashion_mnist_root_from_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    arrays = write_fake_fmnist(tmp_path / "fashion_mnist")
    monkeypatch.setenv("FEDREPRO_DATA", str(tmp_path))
    check_fmnist(load_dataset("fashion_mnist"), arrays)


def test_fashion_mnist_missing_names_dataset_and_paths(tmp_path: Path) -> None:
    with pytest.raises(DataNotFoundError) as e:
        load_dataset("fashion_mnist", root=tmp_path / "empty", download=False)
    msg = str(e.value)
    assert "fashion_mnist" in msg
    assert str(tmp_path / "empty" / "fashion_mnist") in msg
    assert str(tmp_path / "empty" / "FashionMNIST" / "raw") in msg
    assert "download=True" in msg and "apt-get install dataset-fashion-mnist" in msg


def test_fashion_mnist_download_failure_is_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []

    def offline(root: Path) -> None:
        calls.append(root)
        raise OSError("network unreachable")

    monkeypatch.setattr(fm, "_download", offline)
    with pytest.raises(DataNotFoundError):
        load_dataset("fashion_mnist", root=tmp_path)  # download off by default: not attempted
    assert calls == []
    monkeypatch.setenv("FEDREPRO_DOWNLOAD", "1")
    with pytest.raises(DataNotFoundError, match="network unreachable"):
        load_dataset("fashion_mnist", root=tmp_path)
    assert calls == [tmp_path]


def test_fashion_mnist_download_success_is_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # stands in for torchvision, which writes <root>/FashionMNIST/raw
    monkeypatch.setattr(fm, "_download", lambda root: write_fake_fmnist(root / "FashionMNIST" / "raw"))
    arrays = write_fake_fmnist(tmp_path / "unused")
    check_fmnist(load_dataset("fashion_mnist", root=tmp_path, download=True), arrays)


def test_fashion_mnist_incomplete_folder_is_not_used(tmp_path: Path) -> None:
    write_fake_fmnist(tmp_path / "fashion_mnist")
    (tmp_path / "fashion_mnist" / "t10k-labels-idx1-ubyte.gz").unlink()
    with pytest.raises(DataNotFoundError):
        load_dataset("fashion_mnist", root=tmp_path)


@pytest.mark.skipif(not (DEBIAN / "train-images-idx3-ubyte.gz").exists(), reason="dataset-fashion-mnist not installed")
def test_real_fashion_mnist_from_debian_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fm, "DEBIAN_DIR", DEBIAN)
    ds = load_dataset("fashion_mnist", root=tmp_path)
    assert ds.train_x.shape == (60000, 1, 28, 28) and ds.test_x.shape == (10000, 1, 28, 28)
    assert torch.bincount(ds.train_y).tolist() == [6000] * 10
    assert torch.bincount(ds.test_y).tolist() == [1000] * 10
