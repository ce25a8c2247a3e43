"""The committed CLIP stand-in is good enough, and leaves room for prompts (issue 12's bars)."""
from __future__ import annotations

import pytest
import torch

pytest.importorskip("open_clip")

from fedrepro.data import load_dataset
from fedrepro.data.glyphs import heldout_fonts
from fedrepro.models.clip import STANDIN_CHECKPOINT, load_standin, standin_record
from fedrepro.pretrain import clip_quality as q
from fedrepro.pretrain.clip import PretrainClipConfig, load_validation
from fedrepro.pretrain.clip_data import FASHION_PRETRAIN_COUNT
from fedrepro.models.record import MAX_BYTES

# Styles the stand-in never saw in pretraining on which zero-shot works somewhat (see the record).
UNSEEN = ("noisy", "edges")
ZERO_SHOT_MARGIN = 0.08  # zero-shot must beat chance (10%) by this much
COOP_GAP = 0.10  # and 16-shot CoOp must beat zero-shot by this much
RETRIEVAL_R1 = 0.25  # image→text R@1 among ~460 distinct captions (chance ~0.2%)


@pytest.fixture(scope="module")
def clip():
    return load_standin()


@pytest.fixture(scope="module")
def fashion():
    return load_dataset("fashion_mnist")


def test_checkpoint_is_small_and_recorded():
    rec = standin_record()
    assert STANDIN_CHECKPOINT.stat().st_size <= MAX_BYTES
    for key in ("config", "data_hash", "weights_hash", "versions", "quality", "split", "torch_threads"):
        assert key in rec
    assert rec["versions"]["open_clip_torch"] and rec["versions"]["torch"]


def test_no_downstream_data_in_pretraining(fashion):
    rec = standin_record()
    assert not set(rec["split"]["glyph_fonts"]) & set(heldout_fonts())
    lo, hi = rec["split"]["fashion_mnist_train_indices"]
    assert lo == 0 and hi <= FASHION_PRETRAIN_COUNT
    # pixel-level: no few-shot or test image of the downstream tasks equals a pretraining image
    seen = {bytes(x.numpy().tobytes()) for x in fashion.train_x[:FASHION_PRETRAIN_COUNT]}
    (task,) = q.fashion_style_tasks(fashion, styles=("original",), test_size=300)
    downstream = torch.cat([task.train_x, task.test_x])[:, :1]  # grey styles are replicated to RGB
    assert not any(bytes(x.numpy().tobytes()) in seen for x in downstream)


@pytest.mark.parametrize("style", UNSEEN)
def test_zero_shot_above_chance_and_below_16_shot_coop(clip, fashion, style):
    (task,) = q.fashion_style_tasks(fashion, styles=(style,), test_size=600)
    res = q.style_quality(clip, [task], fashion.classes)[style]
    assert res["zero_shot"] > 0.10 + ZERO_SHOT_MARGIN, res
    assert res["coop_16shot"] > res["zero_shot"] + COOP_GAP, res


def test_retrieval_on_the_pretraining_validation_split(clip):
    cfg = PretrainClipConfig(**{**standin_record()["config"], "val_glyphs": 400})
    res = q.retrieval(clip, load_validation(cfg))
    assert res["image_to_text_r1"] > RETRIEVAL_R1, res
