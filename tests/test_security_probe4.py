"""Issue 53, fourth probe: the files a run reads, checked before any is read (fedrepro.runs.inputs;
docs/reliability.md, "Threat model", the data root's row). Each test plants in a data root what a
writer of it could plant (a sparse file far larger than any dataset file, a gzip bomb, a torch file
with deflated entries, a link to a FIFO) and checks for a one-line error naming the file and its
bound before the reader is called and before the runs folder is written; a sound run is unchanged."""
from __future__ import annotations

import gzip
import os
import struct
import time
import zipfile
from pathlib import Path

import pytest

import fedrepro
from fedrepro.data import DATASETS
from fedrepro.data.fashion_mnist import DEBIAN_DIR
from fedrepro.data.rehearsal import NO_FILES
from fedrepro.errors import CorruptCacheError
from fedrepro.runs import inputs, train
from fedrepro.runs.store import RunStore

IDX = {"train-images-idx3-ubyte": (3, (2, 28, 28)), "train-labels-idx1-ubyte": (1, (2,)),
       "t10k-images-idx3-ubyte": (3, (2, 28, 28)), "t10k-labels-idx1-ubyte": (1, (2,))}


def one_line_naming(err: BaseException, path: Path, *words: str) -> None:
    text = str(err)
    assert "\n" not in text.strip(), text
    assert str(path) in text, text
    for w in words:
        assert w in text, text


def _idx(ndim: int, shape: tuple[int, ...]) -> bytes:
    n = 1
    for d in shape:
        n *= d
    return bytes([0, 0, 0x08, ndim]) + struct.pack(f">{ndim}I", *shape) + bytes(n)


@pytest.fixture
def root(tmp_path, monkeypatch):
    """A data root with four small, well-formed Fashion-MNIST IDX files (not the real ones: the runs
    below must stop before they are read), and fresh verdicts."""
    folder = tmp_path / "data" / "fashion_mnist"
    folder.mkdir(parents=True)
    for name, (ndim, shape) in IDX.items():
        (folder / name).write_bytes(_idx(ndim, shape))
    monkeypatch.setenv("FEDREPRO_DATA", str(tmp_path / "data"))
    inputs.forget()
    yield tmp_path / "data"
    inputs.forget()


@pytest.fixture
def unread(monkeypatch):
    """Fails the test if a Fashion-MNIST file or a torch file is read."""
    def fail(*args, **kwargs):
        raise AssertionError(f"read before the check refused it: {args[:1]}")

    monkeypatch.setattr("fedrepro.data.fashion_mnist.read_idx", fail)
    monkeypatch.setattr("torch.load", fail)


def _fmnist(tiny, **more):
    return tiny(**{"data.dataset": "fashion_mnist", "data.dataset_args": {}, **more})


def _refused(cfg, path: Path, *words: str) -> None:
    with pytest.raises(CorruptCacheError) as e:
        fedrepro.run(cfg)
    one_line_naming(e.value, path, *words)
    assert not RunStore(cfg.runs_dir).path(cfg).exists()  # nothing written, nothing trained


def test_sparse_huge_idx_file_is_refused_unread(root, tiny, unread):
    big = root / "fashion_mnist" / "train-images-idx3-ubyte"
    os.truncate(big, inputs.MAX_FILE_BYTES + 1)  # sparse: no disk taken
    _refused(_fmnist(tiny), big, str(inputs.MAX_FILE_BYTES), "MAX_FILE_BYTES")


def test_gzip_bomb_is_refused_at_the_bound(root, tiny, unread, monkeypatch):
    monkeypatch.setattr(inputs, "MAX_INFLATED_BYTES", 1 << 20)  # the test's own memory and time stay small
    plain = root / "fashion_mnist" / "train-images-idx3-ubyte"
    plain.unlink()
    bomb = plain.with_name(plain.name + ".gz")
    with gzip.open(bomb, "wb") as f:
        f.write(_idx(3, (2, 28, 28)) + bytes(4 << 20))
    assert bomb.stat().st_size < 64 << 10  # kilobytes on disk, megabytes inflated
    _refused(_fmnist(tiny), bomb, "decompresses to more than 1048576 bytes", "MAX_INFLATED_BYTES")


def test_gzip_within_the_bound_passes_and_is_decompressed_once(root, monkeypatch):
    plain = root / "fashion_mnist" / "train-images-idx3-ubyte"
    gz = plain.with_name(plain.name + ".gz")
    with gzip.open(gz, "wb") as f:
        f.write(plain.read_bytes())
    plain.unlink()
    time.sleep(2 * inputs.RACY_NS / 1e9)  # past the file clock's tick: its verdict is kept
    calls = []
    real = inputs._gzip_problem
    monkeypatch.setattr(inputs, "_gzip_problem", lambda p, cap: calls.append(p) or real(p, cap))
    for _ in range(3):
        assert inputs.file_problem(gz, "dataset file") is None
    assert calls == [gz]
    with gzip.open(gz, "wb") as f:  # changed: checked again
        f.write(_idx(3, (3, 28, 28)))
    time.sleep(2 * inputs.RACY_NS / 1e9)
    assert inputs.file_problem(gz, "dataset file") is None
    assert calls == [gz, gz]


def _deflated_torch_file(path: Path) -> None:
    """A zip archive shaped like torch.save's, its entry deflated: 256 KiB of zeros in about 300 bytes."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as z:
        z.writestr("archive/data.pkl", bytes(256 << 10))


def test_compressed_entry_weights_file_is_refused_unread(root, tiny, unread, tmp_path):
    planted = tmp_path / "weights.pt"
    _deflated_torch_file(planted)
    cfg = tiny(**{"model.name": "clip", "model.args": {"arch": "standin", "weights": str(planted)}})
    _refused(cfg, planted, "weights file", "compressed entry")


def test_compressed_entry_data_cache_is_refused_unread(root, tiny, unread):
    cache = root / "cache" / "fashion_mnist_domains" / ("0" * 24 + ".pt")
    cache.parent.mkdir(parents=True)
    _deflated_torch_file(cache)
    _refused(tiny(**{"data.dataset": "fashion_mnist_domains", "data.dataset_args": {}}), cache,
             "cache file", "compressed entry", "rebuilt")


def test_oversized_cache_is_refused_at_this_machines_memory(root, tiny, unread):
    cache = root / "cache" / "fashion_mnist_domains" / ("1" * 24 + ".pt")
    cache.parent.mkdir(parents=True)
    with open(cache, "wb") as f:
        f.truncate(inputs.memory_bytes() + 1)  # sparse
    _refused(tiny(**{"data.dataset": "fashion_mnist_domains", "data.dataset_args": {}}), cache,
             "cache file", "this machine's memory")


def test_link_to_a_fifo_is_refused_a_linked_root_is_followed(root, tiny, unread, tmp_path, monkeypatch):
    # CIFAR-10's loader names its files whatever they are: a link to a FIFO would block its read.
    folder = root / "cifar-10-batches-py"
    folder.mkdir()
    for _, path in inputs.dataset_files("cifar10", {}):
        path.write_bytes(b"x")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    batch = folder / "data_batch_1"
    batch.unlink()
    batch.symlink_to(fifo)
    _refused(tiny(**{"data.dataset": "cifar10", "data.dataset_args": {}}), batch, "not a regular file")
    # A data root that is a link to a folder of sound files passes (then the reader reads them).
    linked = tmp_path / "linked"
    linked.symlink_to(root)
    monkeypatch.setenv("FEDREPRO_DATA", str(linked))
    found = inputs.dataset_files("fashion_mnist", {})
    assert [p.name for _, p in found] == list(IDX) and all(str(p).startswith(str(linked)) for _, p in found)
    inputs.check_run_inputs(_fmnist(tiny))


def test_every_dataset_that_reads_files_is_checked():
    """A dataset that reads files names them (input_files) or is listed in inputs.EXTRA_FILES: a new
    one that does neither would be read unchecked."""
    unchecked = [n for n in DATASETS.names() if n not in NO_FILES and n not in inputs.EXTRA_FILES
                 and getattr(DATASETS.get(n), "input_files", None) is None]
    assert unchecked == []


@pytest.mark.skipif(not (DEBIAN_DIR / "train-images-idx3-ubyte.gz").is_file(), reason="no Debian Fashion-MNIST")
def test_the_real_fashion_mnist_files_pass(tmp_path, monkeypatch, tiny):
    monkeypatch.setenv("FEDREPRO_DATA", str(tmp_path / "empty"))  # found in the Debian folder
    inputs.forget()
    inputs.check_run_inputs(_fmnist(tiny))
    assert {p.name for _, p in inputs.dataset_files("fashion_mnist", {})} == {f"{n}.gz" for n in IDX}


def test_a_tiny_run_trains_as_before_and_the_check_is_not_in_its_fingerprint(tiny, tmp_path, monkeypatch):
    checked = tiny()
    res = fedrepro.run(checked)
    monkeypatch.setattr(train, "check_run_inputs", lambda cfg: None)
    unchecked = tiny(runs_dir=str(tmp_path / "unchecked"))
    ref = fedrepro.run(unchecked)
    assert res.summary["rounds"] == checked.train.rounds
    def numbers(summary):  # what the run computed: not its hash (another runs folder) or its timings
        return {k: v for k, v in summary.items() if k != "config_hash" and not k.startswith("time_")}

    assert numbers(res.summary) == numbers(ref.summary)
    files = res.meta["code_files"]
    assert "fedrepro/runs/pipeline.py" in files  # the list is the run's code
    assert "fedrepro/runs/inputs.py" not in files and "fedrepro/env/torchfile.py" not in files


def test_restore_checks_the_inputs_before_it_rebuilds_the_data(tiny, monkeypatch):
    res = fedrepro.run(tiny())
    order = []
    monkeypatch.setattr(train, "check_run_inputs", lambda cfg: order.append(("check", cfg.hash())))
    real = train.prepare_data
    monkeypatch.setattr(train, "prepare_data", lambda cfg: order.append(("prepare", cfg.hash())) or real(cfg))
    train.restore(res)
    assert order == [("check", res.config.hash()), ("prepare", res.config.hash())]


@pytest.mark.parametrize("plant", ["deflated", "fifo"])
def test_a_clip_token_cache_in_the_data_root_is_checked_before_a_clip_run(root, tiny, unread, plant):
    # The token caches a frozen CLIP's methods read during training (fedrepro.models.clip_cache) sit
    # in the shared data root; which one a run reads is known only once its images are hashed.
    cache = root / "cache" / "clip_tokens" / ("clip_tokens-" + "2" * 24 + ".pt")
    cache.parent.mkdir(parents=True)
    if plant == "deflated":
        _deflated_torch_file(cache)
    else:
        os.mkfifo(cache)
    cfg = tiny(**{"model.name": "clip", "model.args": {"arch": "standin"}})
    _refused(cfg, cache, "cache file", "compressed entry" if plant == "deflated" else "not a regular file")
    # A run of another model reads no token cache: not its input.
    assert all(p != cache for _, p in inputs.run_input_files(tiny()))
