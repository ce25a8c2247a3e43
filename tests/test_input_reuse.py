"""A stored run is reused only for the input files it was trained on (issue 53, class 5).

Datasets whose files differ from user to user (here CIFAR-10) and pretrained weights files (here the
CLIP stand-in at a path of the config's) are digested into the run's ``meta.json`` (``inputs``);
a run whose inputs changed is stale (:func:`fedrepro.runs.fingerprint.staleness`): trained anew by
default, refused with ``on_stale="error"``, never reused silently for the other input.
"""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from fedrepro.data.digest import forget
from fedrepro.errors import StaleRunError
from fedrepro.execute.run import run
from fedrepro.models.vit import WEIGHTS_DIR
from fedrepro.runs import fingerprint, pipeline
from fedrepro.runs.store import RunStore
from tests.data.test_cifar import write_cifar10  # the loader tests' files, in CIFAR's real format

CIFAR = {"data.dataset": "cifar10", "data.dataset_args": {}, "data.partition": "iid", "data.partition_args": {},
         "data.num_clients": 2, "data.max_train": None, "data.max_test": None, "train.rounds": 2}


def _change_a_pixel(root: Path) -> None:
    batch = root / "cifar-10-batches-py" / "data_batch_3"
    raw = bytearray(batch.read_bytes())
    raw[-30] ^= 0x40  # inside the image array: same size, still a valid batch
    batch.write_bytes(bytes(raw))
    # This process's decoded copy and digests are of the old files (a process reads its inputs once).
    pipeline._datasets.clear()
    forget()


def test_a_run_is_not_reused_for_other_dataset_files(tiny, tmp_path: Path, monkeypatch) -> None:
    root = tmp_path / "data"
    write_cifar10(root)
    monkeypatch.setenv("FEDREPRO_DATA", str(root))
    pipeline._datasets.clear()
    cfg = tiny(**CIFAR)
    first = run(cfg)
    recorded = first.meta["inputs"]["data"]
    assert fingerprint.staleness(cfg, first.meta).state == fingerprint.FRESH

    # The same files at another data root: the same input, the stored run is reused.
    shutil.copytree(root, tmp_path / "copy")
    monkeypatch.setenv("FEDREPRO_DATA", str(tmp_path / "copy"))
    pipeline._datasets.clear()
    assert fingerprint.staleness(cfg, first.meta).state == fingerprint.FRESH
    assert run(cfg).path == first.path

    # Another input under the same config: stale, refused or trained anew, never reused as it is.
    _change_a_pixel(tmp_path / "copy")
    st = fingerprint.staleness(cfg, first.meta)
    assert st.state == fingerprint.STALE and st.changed == ("data input files",)
    with pytest.raises(StaleRunError, match="data input files"):
        run(cfg, on_stale="error")
    again = run(cfg)
    assert again.meta["inputs"]["data"] not in (None, recorded)
    retired = list((RunStore(cfg.runs_dir).root / ".stale").iterdir())
    assert len(retired) == 1 and retired[0].name.startswith(cfg.hash())


def test_a_fashion_mnist_run_records_no_inputs(tiny) -> None:
    # Fashion-MNIST's files are checked against the manifest, and synthetic data reads none: nothing
    # to record, and these runs' meta.json is as it was.
    assert fingerprint.inputs(tiny()) == {}
    assert "inputs" not in fingerprint.record(tiny())


def test_a_stand_in_pretrained_again_at_the_same_path_is_another_input(tiny, tmp_path: Path) -> None:
    path = tmp_path / "clip_standin.pt"
    for suffix in (".pt", ".json"):
        shutil.copy(WEIGHTS_DIR / f"clip_standin{suffix}", path.with_suffix(suffix))
    cfg = tiny(**{"model.name": "clip", "model.args": {"arch": "standin", "weights": str(path)},
                  "method.name": "coop"})
    meta = fingerprint.record(cfg)
    assert set(meta["inputs"]) == {"weights"}
    assert fingerprint.staleness(cfg, meta).state == fingerprint.FRESH
    shutil.copy(WEIGHTS_DIR / "vit_glyphs.pt", path)  # other weights where the config points
    st = fingerprint.staleness(cfg, meta)
    assert st.state == fingerprint.STALE and st.changed == ("weights input files",)
