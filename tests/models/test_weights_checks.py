"""Pretrained stand-ins are checked against their records (issue 53, classes 5 and 7).

A flipped bit in a stand-in checkpoint, a checkpoint cut short, and a record cut short or of the
wrong form are each a one-line error naming the file, never a backbone to train on; and the weights
file's digest keys the runs that read it (:func:`fedrepro.models.record.weights_digest`).
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from fedrepro.models import create_model
from fedrepro.models.clip import STANDIN_CHECKPOINT, load_standin, standin_record
from fedrepro.models.clip_model import ENV_CLIP_WEIGHTS
from fedrepro.models.record import state_hash, weights_digest
from fedrepro.models.vit import WEIGHTS_DIR
from fedrepro.errors import CorruptCacheError, DataNotFoundError


def _copy(tmp_path: Path, stem: str) -> Path:
    for suffix in (".pt", ".json"):
        shutil.copy(WEIGHTS_DIR / f"{stem}{suffix}", tmp_path / f"{stem}{suffix}")
    return tmp_path / f"{stem}.pt"


def flip_a_weight(path: Path) -> None:
    """Flip the lowest bit of one stored float in ``path`` (the file stays a loadable checkpoint)."""
    state = torch.load(path, weights_only=True)
    t = next(v for v in state.values() if v.is_floating_point() and v.numel() > 100)
    raw = t.contiguous().numpy().tobytes()[:64]
    data = bytearray(path.read_bytes())
    at = data.find(raw)
    assert at > 0 and data.find(raw, at + 1) < 0
    data[at + 4] ^= 0x01
    path.write_bytes(bytes(data))


def _one_line(excinfo: pytest.ExceptionInfo, *names: str) -> str:
    msg = str(excinfo.value)
    assert "\n" not in msg, msg
    for name in names:
        assert name in msg, (name, msg)
    return msg


def _clip_standin(path: Path):
    return create_model("clip", 10, image_size=28, arch="standin", weights=str(path))


def test_the_committed_stand_ins_match_their_records() -> None:
    for stem in ("clip_standin", "vit_glyphs"):
        record = json.loads((WEIGHTS_DIR / f"{stem}.json").read_text())
        assert state_hash(torch.load(WEIGHTS_DIR / f"{stem}.pt", weights_only=True)) == record["weights_hash"]


def test_a_bit_flipped_clip_stand_in_is_named(tmp_path: Path) -> None:
    path = _copy(tmp_path, "clip_standin")
    load_standin(path)  # the copy as it is loads
    flip_a_weight(path)
    with pytest.raises(CorruptCacheError) as e:
        load_standin(path)
    _one_line(e, str(path), "does not match its record", "clip_standin.json")
    with pytest.raises(CorruptCacheError, match="does not match its record"):
        _clip_standin(path)  # the model a config names: the same check


@pytest.mark.parametrize("cut", [100, 100_000])
def test_a_truncated_clip_stand_in_is_named(tmp_path: Path, cut: int) -> None:
    path = _copy(tmp_path, "clip_standin")
    path.write_bytes(path.read_bytes()[:cut])
    with pytest.raises(CorruptCacheError) as e:
        load_standin(path)
    _one_line(e, str(path), "pretrain clip")


@pytest.mark.parametrize("record", ['{"config": {"arch"', "[1, 2]", '{"config": {}}', "not utf-8", "no weights_hash"])
def test_a_bad_clip_stand_in_record_is_named(tmp_path: Path, record: str) -> None:
    path = _copy(tmp_path, "clip_standin")
    rec = path.with_suffix(".json")
    if record == "not utf-8":
        rec.write_bytes(b"\xff\xfe{")
    elif record == "no weights_hash":
        good = json.loads(rec.read_text())
        del good["weights_hash"]
        rec.write_text(json.dumps(good))
    else:
        rec.write_text(record)
    with pytest.raises(CorruptCacheError) as e:
        load_standin(path)
    _one_line(e, str(rec))


def test_a_missing_clip_stand_in_record_is_named(tmp_path: Path) -> None:
    path = _copy(tmp_path, "clip_standin")
    path.with_suffix(".json").unlink()
    with pytest.raises(DataNotFoundError) as e:
        standin_record(path)
    _one_line(e, str(path.with_suffix(".json")))


def test_a_bit_flipped_vit_stand_in_is_named(tmp_path: Path) -> None:
    path = _copy(tmp_path, "vit_glyphs")
    create_model("tiny_vit", 10, in_channels=1, image_size=28, weights=str(path))
    flip_a_weight(path)
    with pytest.raises(CorruptCacheError) as e:
        create_model("tiny_vit", 10, in_channels=1, image_size=28, weights=str(path))
    _one_line(e, str(path), "does not match its record")


@pytest.mark.parametrize("with_record", [True, False])
def test_a_truncated_vit_checkpoint_is_named(tmp_path: Path, with_record: bool) -> None:
    path = _copy(tmp_path, "vit_glyphs")
    if not with_record:
        path.with_suffix(".json").unlink()
    path.write_bytes(path.read_bytes()[:5000])
    with pytest.raises(CorruptCacheError) as e:
        create_model("tiny_vit", 10, in_channels=1, image_size=28, weights=str(path))
    _one_line(e, str(path))


def test_a_truncated_vit_record_is_named(tmp_path: Path) -> None:
    path = _copy(tmp_path, "vit_glyphs")
    rec = path.with_suffix(".json")
    rec.write_text(rec.read_text()[:300])
    with pytest.raises(CorruptCacheError) as e:
        create_model("tiny_vit", 10, in_channels=1, image_size=28, weights=str(path))
    _one_line(e, str(rec), "not JSON")


def test_the_weights_digest_follows_the_file_a_model_reads(tmp_path: Path, monkeypatch) -> None:
    committed = weights_digest("clip", {"arch": "standin"})
    assert committed is not None and weights_digest("clip", {}) == committed
    path = _copy(tmp_path, "clip_standin")
    assert weights_digest("clip", {"weights": str(path)}) == committed  # the same bytes elsewhere
    # A stand-in pretrained again at the same path (weights and record both new): another digest.
    state = torch.load(path, weights_only=True)
    state["logit_scale"] = state["logit_scale"] + 1
    torch.save(state, path)
    assert weights_digest("clip", {"weights": str(path)}) not in (None, committed)
    assert weights_digest("tiny_vit", {"weights": "glyphs"}) is not None
    assert weights_digest("tiny_vit", {}) is None and weights_digest("cnn", {}) is None
    # A paper-size CLIP named by $FEDREPRO_CLIP_WEIGHTS, which the config does not hold.
    (tmp_path / "clip").mkdir()
    (tmp_path / "clip" / "RN50.pt").write_bytes(b"one")
    monkeypatch.setenv(ENV_CLIP_WEIGHTS, str(tmp_path / "clip"))
    one = weights_digest("clip", {"arch": "RN50"})
    (tmp_path / "clip" / "RN50.pt").write_bytes(b"two")
    assert one is not None and weights_digest("clip", {"arch": "RN50"}) not in (None, one)
    assert weights_digest("clip", {"arch": "ViT-B-16"}) is None  # not here
    assert STANDIN_CHECKPOINT.is_file()
