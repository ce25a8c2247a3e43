"""`fedrepro pretrain vit`: determinism, the pretraining/federated split, and the written record."""
from __future__ import annotations

import json

import pytest
import torch

from fedrepro.app.cli import main
from fedrepro.data.fashion_mnist import DEBIAN_DIR
from fedrepro.data.glyphs import FONT_NAMES, heldout_fonts, pretrain_fonts
from fedrepro.data.splits import FASHION_MNIST_FEDERATED, FASHION_MNIST_PRETRAIN
from fedrepro.errors import ConfigError
from fedrepro.models import create_model
from fedrepro.pretrain import get_pretrainer, parse_overrides
from fedrepro.models.record import compact
from fedrepro.pretrain.vit import ViTPretrainConfig, pretraining_data, train_vit

TINY = {"steps": 3, "batch_size": 8, "glyphs": 64, "fashion_mnist": False, "dim": 24, "depth": 2, "heads": 2,
        "progress": False, "measure": False}
HAS_FMNIST = (DEBIAN_DIR / "train-images-idx3-ubyte.gz").exists()


def test_short_run_is_bitwise_deterministic() -> None:
    cfg = ViTPretrainConfig(**TINY)
    a, b = pretraining_data(cfg), pretraining_data(cfg)
    assert a.hash() == b.hash()
    (m1, l1), (m2, l2) = train_vit(cfg, a), train_vit(cfg, b)
    assert l1 == l2
    assert all(torch.equal(v, m2.state_dict()[k]) for k, v in m1.state_dict().items())
    m3, _ = train_vit(ViTPretrainConfig(**{**TINY, "seed": 1}), a)
    assert not torch.equal(m1.features.vit.pos_embed, m3.features.vit.pos_embed)


@pytest.mark.skipif(not HAS_FMNIST, reason="dataset-fashion-mnist not installed")
def test_pretraining_never_uses_a_federated_image() -> None:
    from fedrepro.data import load_dataset

    full = load_dataset("fashion_mnist")
    data = pretraining_data(ViTPretrainConfig(**{**TINY, "glyphs": 620, "fashion_mnist": True}), full)
    used = set(data.fashion_mnist_indices.tolist())
    assert used == set(FASHION_MNIST_PRETRAIN) and not used & set(FASHION_MNIST_FEDERATED)
    fm_rows = data.x[data.source == 1]
    assert torch.equal(fm_rows, full.train_x[data.fashion_mnist_indices])  # exactly those images
    fonts = {FONT_NAMES[i] for i in data.glyph_fonts.tolist()}
    assert fonts <= set(pretrain_fonts()) and not fonts & set(heldout_fonts())
    # The federated dataset is the other half plus the test split, nothing from the pretraining half.
    fed = load_dataset("fashion_mnist_federated")
    assert torch.equal(fed.train_x, full.train_x[FASHION_MNIST_FEDERATED.start:])
    assert torch.equal(fed.test_x, full.test_x)


def test_cli_writes_checkpoint_and_record(tmp_path, capsys) -> None:
    out = tmp_path / "vit.pt"
    sets = [f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in TINY.items()] + [f"out={out}"]
    assert main(["pretrain", "vit", *[arg for s in sets for arg in ("--set", s)]]) == 0
    assert str(out) in capsys.readouterr().out
    record = json.loads(out.with_suffix(".json").read_text())
    assert record["config"]["steps"] == 3 and record["torch_threads"] == 1
    assert {"data_hash", "weights_hash", "versions", "quality", "shape"} <= set(record)
    assert record["bytes"] == out.stat().st_size <= 10_000_000
    model = create_model("tiny_vit", 5, in_channels=1, image_size=28, dim=24, depth=2, heads=2, weights=str(out))
    saved = torch.load(out, weights_only=True)
    assert all(torch.equal(v, model.features.vit.state_dict()[k]) for k, v in saved.items())


def test_config_errors_name_the_key() -> None:
    cls = ViTPretrainConfig
    with pytest.raises(ConfigError, match="stpes.*valid keys.*steps"):
        parse_overrides(cls, ["stpes=3"])
    with pytest.raises(ConfigError, match="steps"):
        parse_overrides(cls, ["steps=0"])
    with pytest.raises(ConfigError, match="dim=30.*heads=4"):
        ViTPretrainConfig(dim=30, heads=4)
    with pytest.raises(ConfigError, match="gan"):
        get_pretrainer("gan")


def test_compact_falls_back_to_fp16_when_over_budget() -> None:
    state = {"w": torch.randn(1000, 100), "n": torch.tensor(3)}
    kept, dtype = compact(state)
    assert dtype == "float32" and torch.equal(kept["w"], state["w"])
    small, dtype = compact(state, max_bytes=300_000)
    assert dtype == "float16" and small["w"].dtype == torch.float16 and small["n"].dtype == torch.int64


@pytest.mark.parametrize("what", ["vit", "clip"])
def test_an_out_path_that_cannot_be_written_is_refused_before_pretraining(tmp_path, capsys, what):
    """A folder, or a path below a file, was trained into for minutes and then (a folder) reported as
    the checkpoint while nothing was written there."""
    from fedrepro.app.cli import main

    (tmp_path / "a_file").write_text("x")
    for out in (tmp_path, tmp_path / "a_file" / "w.pt"):
        assert main(["pretrain", what, "--set", f"out={out}"]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and f"invalid out='{out}'" in err


def test_a_checkpoint_that_cannot_be_written_is_an_error_and_leaves_no_record(tmp_path):
    from fedrepro.errors import ResourceError
    from fedrepro.models.record import write_checkpoint

    target = tmp_path / "w.pt"
    target.mkdir()  # os.replace cannot put a file there
    with pytest.raises(ResourceError, match="cannot write"):
        write_checkpoint(target, {"w": torch.zeros(2)}, {"seed": 0}, "d", {})
    assert not (tmp_path / "w.json").exists() and sorted(p.name for p in tmp_path.iterdir()) == ["w.pt"]
    written = write_checkpoint(tmp_path / "sub" / "v.pt", {"w": torch.ones(2)}, {"seed": 0}, "d", {})
    assert torch.equal(torch.load(written, weights_only=True)["w"], torch.ones(2))
    assert written.with_suffix(".json").is_file()
