"""pFedCSPC Table I: sizes read from the data root, beside the paper's."""
from pathlib import Path

import pytest

from fedrepro.runs import pipeline
from fedrepro.papers.pfedcspc.datasets import client_table, dataset_table
from fedrepro.papers.pfedcspc.reference import TABLE_I
from tests.data.test_cifar import write_cifar10


@pytest.fixture
def data_root(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("FEDREPRO_DATA", str(tmp_path))
    monkeypatch.setattr(pipeline, "_datasets", type(pipeline._datasets)())
    return tmp_path


def test_missing_datasets_keep_the_papers_numbers_and_say_why(data_root):
    t = dataset_table("paper")
    assert list(t.index) == ["cifar10", "cifar100", "tiny_imagenet", "vireo172"]
    assert t["status"].str.startswith("not under the data root").all()
    assert t.loc["vireo172", ["paper classes", "paper train", "paper test"]].tolist() == [172, 68175, 33154]
    assert t["train"].isna().all()


def test_a_dataset_under_the_root_is_counted(data_root):
    want = write_cifar10(data_root)
    t = dataset_table("paper", variants=["default"])
    row = t.loc["cifar10"]
    assert row["status"] == "loaded"
    assert (row["classes"], row["train"], row["test"]) == (10, len(want["train"]), len(want["test"]))
    assert (row["paper train"], row["paper test"]) == (TABLE_I["cifar10"]["train"], TABLE_I["cifar10"]["test"])
    # the other datasets of the paper's Table I follow, with the paper's numbers only
    assert t.loc["cifar100", "status"] == "the paper's numbers only" and t["train"].isna()["cifar100"]


def test_clients_hold_every_used_image_once():
    t = client_table("smoke")
    full = dataset_table("smoke").iloc[0]
    assert t["train"].sum() == full["used train"] and (t["classes"] >= 1).all()
