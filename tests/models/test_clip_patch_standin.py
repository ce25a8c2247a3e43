"""The patch stand-in (issue 55, finding 6): an attention-pool head as in CLIP RN50, its feature map in
the joint space, selectable by ``model.args.arch`` and loaded only when its weights match its record."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

pytest.importorskip("open_clip")

from fedrepro.errors import ConfigError, CorruptCacheError
from fedrepro.models import create_model
from fedrepro.models.clip import (
    STANDIN_CHECKPOINT,
    STANDIN_PATCH_CHECKPOINT,
    AttentionPoolViT,
    StandinArch,
    build_standin,
    load_standin,
    standin_record,
)
from fedrepro.models.clip_model import STANDINS, clip_backbone
from fedrepro.models.record import MAX_BYTES, state_hash, weights_digest

SMALL = dict(vision_width=32, vision_layers=2, vision_head_width=16, text_width=32, text_layers=2, embed_dim=32)


def _images(n=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 256, (n, 1, 28, 28), dtype=torch.uint8, generator=g)


@pytest.mark.parametrize("feature_map", ["attention", "value"])
def test_the_feature_map_starts_with_the_pooled_embedding(feature_map):
    clip = build_standin(StandinArch(**SMALL, pool="attention", feature_map=feature_map), None, seed=0)
    assert isinstance(clip.model.visual, AttentionPoolViT)
    x = clip.preprocess(_images())
    tokens = clip.image_tokens(x)
    assert tokens.shape == (3, 1 + 49, 32)
    torch.testing.assert_close(tokens[:, 0], clip.encode_image(x), rtol=0, atol=0)
    assert "visual.proj" not in clip.model.state_dict()  # the pool's out projection maps into the joint space


def test_value_tokens_are_what_the_pool_averages():
    # With the query and key projections zeroed every query attends uniformly, so the pooled embedding
    # is exactly the mean of the value tokens of [mean token; patches]: the feature map lives in the
    # space the pooled embedding is trained in (the point of the RN50 head).
    clip = build_standin(StandinArch(**SMALL, pool="attention", feature_map="value"), None, seed=1)
    pool = clip.model.visual.attnpool
    with torch.no_grad():
        for lin in (pool.q_proj, pool.k_proj):
            lin.weight.zero_()
            lin.bias.zero_()
    x = clip.preprocess(_images())
    tokens = clip.image_tokens(x)
    seq = clip.model.visual._patch_sequence(x)
    mean_value = pool.c_proj(pool.v_proj(seq.mean(0) + pool.positional_embedding[0]))
    expect = (mean_value + tokens[:, 1:].sum(1)) / (1 + tokens.shape[1] - 1)
    torch.testing.assert_close(tokens[:, 0], expect, rtol=1e-4, atol=1e-5)


def test_an_attention_pool_needs_heads_that_divide_the_width():
    with pytest.raises(ConfigError, match="vision_width"):
        StandinArch(vision_width=50, vision_head_width=16, pool="attention")  # 3 heads of 50
    with pytest.raises(ConfigError, match="pool"):
        StandinArch(pool="avg")


def test_old_records_without_a_pool_build_the_class_token_stand_in():
    arch = standin_record()["config"]["arch"]
    assert "pool" not in arch and StandinArch(**arch).pool == "tok"


# ----------------------------------------------------------------- the committed patch stand-in
def test_the_patch_stand_in_is_a_config_choice_beside_the_first():
    assert STANDINS == {"standin": STANDIN_CHECKPOINT, "standin_patch": STANDIN_PATCH_CHECKPOINT}
    old = create_model("clip", 10, image_size=28, arch="standin").clip
    new = create_model("clip", 10, image_size=28, arch="standin_patch").clip
    assert isinstance(new.model.visual, AttentionPoolViT) and not isinstance(old.model.visual, AttentionPoolViT)
    assert new.fingerprint() != old.fingerprint()
    assert clip_backbone("standin_patch") is new  # one shared copy per process
    # Runs that read it are keyed by its own file (a retrained patch stand-in makes them stale).
    assert weights_digest("clip", {"arch": "standin_patch"}) not in (None, weights_digest("clip", {"arch": "standin"}))
    tokens = new.image_tokens(new.preprocess(_images(2)))
    assert tokens.shape == (2, 50, new.embed_dim)


def test_the_committed_patch_stand_in_matches_its_record_and_is_small():
    record = standin_record(STANDIN_PATCH_CHECKPOINT)
    assert state_hash(torch.load(STANDIN_PATCH_CHECKPOINT, weights_only=True)) == record["weights_hash"]
    size = STANDIN_PATCH_CHECKPOINT.stat().st_size
    assert size <= MAX_BYTES and size < 1.5 * STANDIN_CHECKPOINT.stat().st_size
    assert record["config"]["arch"]["pool"] == "attention" and record["config"]["patch_weight"] > 0
    # Pretrained on the first stand-in's split: it starts from those weights, checked by hash.
    assert record["split"] == standin_record()["split"]
    assert record["init"]["weights_hash"] == standin_record()["weights_hash"]


def test_a_bit_flipped_patch_stand_in_is_named(tmp_path: Path):
    from tests.models.test_weights_checks import flip_a_weight

    for suffix in (".pt", ".json"):
        shutil.copy(STANDIN_PATCH_CHECKPOINT.with_suffix(suffix), tmp_path / f"clip_standin_patch{suffix}")
    path = tmp_path / "clip_standin_patch.pt"
    load_standin(path)
    flip_a_weight(path)
    with pytest.raises(CorruptCacheError) as e:
        create_model("clip", 10, image_size=28, arch="standin_patch", weights=str(path))
    msg = str(e.value)
    assert "\n" not in msg and str(path) in msg and "does not match its record" in msg
    assert "fedrepro pretrain clip_patch" in msg  # the command that writes this one, not the first's
    rec = json.loads(path.with_suffix(".json").read_text())
    assert rec["weights_hash"] == standin_record(STANDIN_PATCH_CHECKPOINT)["weights_hash"]


def test_patch_tokens_of_the_patch_stand_in_point_at_their_class():
    # A few garments, in the pretraining style: on average over patches, the feature map is closer to
    # the true class's prompt than to the others' (on the first stand-in this margin is about zero).
    from fedrepro.data import load_dataset

    fashion = load_dataset("fashion_mnist")
    x, y = fashion.test_x[:200], fashion.test_y[:200]
    clip = clip_backbone("standin_patch")
    with torch.no_grad():
        patches = F.normalize(clip.image_tokens(clip.preprocess(x))[:, 1:], dim=-1)
        text = F.normalize(clip.encode_text([f"a photo of a {c.lower()}." for c in fashion.classes]), dim=-1)
    scores = torch.einsum("bmd,cd->bc", patches, text) / patches.shape[1]
    assert scores.argmax(1).eq(y).float().mean() > 0.6


def test_fedotp_trains_on_the_patch_stand_in(tiny):
    # The whole path a FedOTP setup takes when its config names the patch stand-in.
    import fedrepro

    res = fedrepro.run(tiny(**{
        "model.name": "clip", "model.args": {"arch": "standin_patch"}, "method.name": "fedotp", "method.args": {},
        "data.dataset": "fashion_mnist_federated", "data.dataset_args": {}, "data.partition": "pathological",
        "data.partition_args": {"classes_per_client": 2, "shots": 4}, "data.num_clients": 3, "data.max_test": 100,
        "train.batch_size": 8, "train.lr": 0.01, "train.rounds": 2, "train.local_epochs": 2}))
    assert res.summary["final_acc_mean"] > 0.3, res.summary
