"""The rehearsal's random full-size weights: a ``done.json`` cut short (a crash, an edit) means the
weights are written again, not a JSONDecodeError traceback (issue 53, class 7)."""
from __future__ import annotations

import json

import pytest

import fedrepro.models
from fedrepro.pretrain import rehearsal_weights as rw


class _Rewrites(Exception):
    pass


@pytest.mark.parametrize("done", ['{"seed": 0, "fil', "\udcff"])
def test_a_cut_done_record_writes_the_weights_again(tmp_path, monkeypatch, done: str) -> None:
    record = {"seed": 0, "files": [rw.VIT_B16_FILE, *(f"{rw.CLIP_FOLDER}/{a}.pt" for a in rw.CLIP_ARCHS)]}
    for f in record["files"]:
        (tmp_path / f).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / f).write_bytes(b"x")
    (tmp_path / "done.json").write_text(json.dumps(record))
    assert rw.write_rehearsal_weights(tmp_path)["vit_b16"] == tmp_path / rw.VIT_B16_FILE  # complete: kept
    (tmp_path / "done.json").write_bytes(done.encode("utf-8", "surrogateescape"))

    def rewrite(*args, **kwargs):  # the full-size models take minutes; that it gets here is the point
        raise _Rewrites

    monkeypatch.setattr(fedrepro.models, "create_model", rewrite)
    with pytest.raises(_Rewrites):
        rw.write_rehearsal_weights(tmp_path)
