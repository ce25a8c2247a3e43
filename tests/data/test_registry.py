"""The dataset registry: every loader registered, unknown names and options named, values checked."""
from __future__ import annotations

import pytest

from fedrepro.data import (
    DATASETS,
    dataset_options,
    list_datasets,
    load_dataset,
)
from fedrepro.errors import ConfigError

pytestmark = pytest.mark.usefixtures("_clean_env")


def test_all_loaders_registered() -> None:
    assert set(list_datasets()) >= {
        "fashion_mnist", "cifar10", "cifar100", "tiny_imagenet", "image_folder",
        "domainnet", "office_caltech10", "pacs", "synthetic", "fashion_mnist_domains",
    }
    assert list_datasets() == sorted(list_datasets())
    assert "synthetic" in DATASETS


def test_unknown_dataset_lists_valid_names() -> None:
    with pytest.raises(ConfigError) as e:
        load_dataset("fashion-mnist")
    assert "fashion-mnist" in str(e.value) and "fashion_mnist" in str(e.value) and "cifar10" in str(e.value)


def test_unknown_option_is_named() -> None:
    with pytest.raises(ConfigError) as e:
        load_dataset("synthetic", num_clases=3)
    msg = str(e.value)
    assert "num_clases" in msg and "num_classes" in msg and "synthetic" in msg
    assert "seed" in dataset_options("synthetic") and "root" not in dataset_options("synthetic")


def test_option_values_are_checked() -> None:
    with pytest.raises(ConfigError, match="channels"):
        load_dataset("synthetic", channels=2)
    with pytest.raises(ConfigError, match="label_type"):
        load_dataset("cifar100", label_type="medium")
    with pytest.raises(ConfigError, match="image_size"):
        load_dataset("tiny_imagenet", image_size=0)
    with pytest.raises(ConfigError, match="styles"):
        load_dataset("fashion_mnist_domains", styles=["original", "sepia"])
    with pytest.raises(ConfigError, match="test_fraction"):
        load_dataset("image_folder", test_fraction=1.0)
