"""What reaches each paper-profile model (issue 38): every config the paper profile builds, its data
served by the rehearsal data mode (no real data needed), and the input size (H × W, channels) its
model receives compared with the paper's: 224 × 224 RGB for ViT-B/16 (PEP-FedPT §5.1) and CLIP
(FedOTP), each dataset's own size for the ResNets and CNNs."""
from __future__ import annotations

import json

import pytest

import fedrepro.data.rehearsal as rehearsal
from fedrepro.data import REHEARSAL_ROOT, load_dataset, rehearsal_shape
from fedrepro.errors import ConfigError
from fedrepro.papers import PAPERS, paper, setup, variants

# The size the models that read a fixed input size were trained at: ViT-B/16 (PEP-FedPT §5.1, "we
# resize our input images to 224x224 pixels"), CLIP ViT-B/16 and RN50 (FedOTP).
FIXED = {"vit_b16": 224, "clip": 224}
# The ResNets and CNNs read each dataset at its own size: CIFAR 32, Tiny-ImageNet 64 (FedPFT,
# pFedCSPC); VireoFood-172 at 224 for pFedCSPC's ImageNet-stem ResNet-18; PACS and DomainNet at 32
# for FedPFT's ResNet-10 (FedPFT App. I names no size: ours).
NATIVE = {"cifar10": 32, "cifar100": 32, "tiny_imagenet": 64, "vireo172": 224, "pacs": 32, "domainnet": 32}


def _paper_configs() -> list:
    out = {}
    for name in PAPERS:
        mod = paper(name)
        for table in getattr(mod, "TABLES", {}).values():
            for cfg in table.configs("paper", tuned=False) + table.search_configs("paper"):
                out[cfg.hash()] = cfg
        if hasattr(mod, "layers"):
            for variant in variants(name):
                try:
                    cfg = setup(name, "paper", variant)
                except ConfigError as e:  # a variant of the small profiles only, and it says so
                    assert "does not run at the paper profile" in str(e)
                    continue
                out[cfg.hash()] = cfg
    return list(out.values())


@pytest.fixture(scope="module")
def feeds() -> dict:
    """(dataset, dataset_args, model, model args) -> one config, over every paper-profile config."""
    out = {}
    for cfg in _paper_configs():
        key = (cfg.data.dataset, json.dumps(cfg.data.dataset_args, sort_keys=True), cfg.model.name,
               json.dumps(cfg.model.args, sort_keys=True, default=str))
        out.setdefault(key, cfg)
    return out


def _reaching(cfg, served) -> tuple[int, int, int]:
    """(H, W, channels) the model's first layer receives: CLIP resizes any input to its own size
    and repeats grey to RGB in its preprocessing; every other model takes the data as it comes."""
    if cfg.model.name == "clip":
        import open_clip

        side = open_clip.get_model_config(cfg.model.args["arch"])["vision_cfg"]["image_size"]
        return side, side, 3
    return served.image_size, served.image_size, served.shape.channels


def test_every_paper_dataset_is_one_the_rehearsal_serves(feeds, monkeypatch) -> None:
    datasets = {(c.data.dataset, json.dumps(c.data.dataset_args, sort_keys=True)): c for c in feeds.values()}
    assert len(datasets) >= 15
    monkeypatch.setattr(rehearsal, "BUDGET_BYTES", 2**20)
    for (name, _), cfg in sorted(datasets.items()):
        s = rehearsal_shape(name, **cfg.data.dataset_args)
        assert s.num_images > 0
        # Loaded (not only described) where a 1 MiB budget keeps it small; the others are loaded at
        # 16 pixels by tests/data/test_rehearsal.py.
        if s.nbytes <= 8 * 2**20:
            ds = load_dataset(name, root=REHEARSAL_ROOT, **cfg.data.dataset_args)
            assert (ds.image_size, ds.in_channels, ds.num_classes) == (s.image_size, s.shape.channels,
                                                                       len(s.classes))


def test_each_paper_config_feeds_its_model_the_papers_input_size(feeds) -> None:
    seen = set()
    for (_, _, model, _), cfg in sorted(feeds.items()):
        s = rehearsal_shape(cfg.data.dataset, **cfg.data.dataset_args)
        side = FIXED.get(model, NATIVE.get(s.shape.name))
        assert side is not None, f"no paper size stated here for {model} on {s.shape.name}"
        assert _reaching(cfg, s) == (side, side, 3), (model, s.shape.name, cfg.data.dataset_args)
        seen.add((model, s.shape.name))
    # The audit's case: CIFAR-100 reaches ViT-B/16 at 224, as do Tiny-ImageNet and DomainNet.
    assert {("vit_b16", "cifar100"), ("vit_b16", "tiny_imagenet"), ("vit_b16", "domainnet")} <= seen
    assert {("clip", "cifar10"), ("clip", "caltech101"), ("clip", "office_caltech10")} <= seen


def test_a_vit_reads_its_data_at_the_loaders_size_and_clip_resizes() -> None:
    """The two routes _reaching assumes: the pipeline builds a ViT at the data's size (so the
    loader must resize), and CLIP's preprocessing resizes whatever it gets to its own size."""
    import inspect

    import torch

    from fedrepro.models.clip import ClipBackbone
    from fedrepro.runs import pipeline

    assert "ds.image_size" in inspect.getsource(pipeline.make_method)
    standin = type("S", (), {"image_size": 12, "image_mean": torch.zeros(1, 3, 1, 1),
                             "image_std": torch.ones(1, 3, 1, 1)})()
    out = ClipBackbone.preprocess(standin, torch.zeros(2, 1, 5, 5, dtype=torch.uint8))
    assert out.shape == (2, 3, 12, 12)
