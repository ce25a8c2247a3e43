"""Quality bars of the committed glyph-pretrained ViT on Fashion-MNIST images it never saw (issue 12).

A weak stand-in must fail here, loudly, rather than turn the PEP-FedPT notebooks into noise. The
sample is small (seconds); the pretraining record holds the same numbers on 5,000 / 2,000 images.
"""
from __future__ import annotations

import pytest

from fedrepro.analysis.backbone_quality import backbone_quality, probe_sample
from fedrepro.data.fashion_mnist import DEBIAN_DIR
from fedrepro.data.glyphs import pretrain_fonts
from fedrepro.data.splits import FASHION_MNIST_PRETRAIN
from fedrepro.models import create_model
from fedrepro.models.vit import arch_kwargs, checkpoint_meta, committed_weights

pytestmark = pytest.mark.skipif(not (DEBIAN_DIR / "train-images-idx3-ubyte.gz").exists(),
                                reason="dataset-fashion-mnist not installed")
CHANCE = 0.1


@pytest.fixture(scope="module")
def quality():
    from fedrepro.data import load_dataset

    ds = probe_sample(load_dataset("fashion_mnist_federated"), 1000, 500, seed=0)
    arch = arch_kwargs(checkpoint_meta(committed_weights("glyphs"))["shape"])
    pre = create_model("tiny_vit", 10, 1, 28, seed=0, weights="glyphs", **arch).features.eval()
    rnd = create_model("tiny_vit", 10, 1, 28, seed=1, **arch).features.eval()
    return backbone_quality(pre, ds), backbone_quality(rnd, ds)


def test_linear_probe_clearly_beats_random_init(quality):
    pre, rnd = quality
    assert pre.linear_probe >= 0.75 and pre.linear_probe >= rnd.linear_probe + 0.08


def test_cls_prototype_accuracy_rises_with_depth(quality):
    pre, rnd = quality
    depth = len(pre.ncm) - 1
    assert depth >= 6
    assert pre.ncm[0] == pytest.approx(CHANCE, abs=0.03)  # block 0's cls input is the same for all images
    assert pre.ncm[depth // 2] >= 4 * CHANCE  # well above chance where CCMP inserts its prompts
    assert pre.ncm[-1] > pre.ncm[depth // 2] > pre.ncm[1]  # rises with depth
    assert pre.ncm[depth // 2] > rnd.ncm[depth // 2]


def test_committed_record_documents_the_split_and_its_quality():
    path = committed_weights("glyphs")
    record = checkpoint_meta(path)
    assert path.stat().st_size == record["bytes"] <= 10_000_000
    assert record["data"]["glyph_fonts"] == list(pretrain_fonts())
    assert record["data"]["fashion_mnist_train_indices"] == [FASHION_MNIST_PRETRAIN.start, FASHION_MNIST_PRETRAIN.stop]
    q = record["quality"]
    assert q["pretrained"]["linear_probe"] > q["random_init"]["linear_probe"] + 0.08
