"""``fedrepro pretrain vit``: the glyph-pretrained ViT stand-in for PEP-FedPT's IN-21k ViT-B/16.

Supervised classification, as IN-21k pretraining is, over 72 classes: the 62 glyph classes drawn in
the pretraining fonts, plus (``fashion_mnist=True``) Fashion-MNIST's 10 classes on the pretraining
half of its training images (:mod:`fedrepro.data.splits`). The federated experiments then see only
held-out fonts and the other half, as ViT-B/16 never saw CIFAR-100's images.

Deterministic for a seed at a given thread count: the run is a fixed number of steps (never a time
budget), every draw comes from generators seeded by ``cfg.seed``, and the thread count is set and
recorded (CPU reductions can differ between thread counts in the last bits).
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from ..analysis.backbone_quality import backbone_quality, probe_sample
from ..data.base import ImageDataset
from ..data.glyphs import GLYPH_CLASSES, heldout_fonts, pretrain_fonts, render_glyphs
from ..data.splits import FASHION_MNIST_PRETRAIN, fashion_mnist_half
from ..models.registry import create_model
from ..models.vit import WEIGHTS_DIR, ViTShape, arch_kwargs, shape_dict
from ..models.record import OUT_VALID, checkpoint_path_ok, tensor_hash, write_checkpoint
from ..data import load_dataset
from ..params import check_fields, hp

DEFAULT_OUT = WEIGHTS_DIR / "vit_glyphs.pt"
GRAD_CLIP = 1.0


@dataclass(frozen=True)
class ViTPretrainConfig:
    """Everything that determines the checkpoint. ``out`` empty means the committed path."""

    seed: int = hp(0, ge=0)
    steps: int = hp(800, ge=1)  # sized for a 2-core machine shared with other jobs: ~10 min at 0.7 s/step
    batch_size: int = hp(96, ge=1)
    lr: float = hp(2e-3, gt=0)
    weight_decay: float = hp(0.05, ge=0)
    warmup_steps: int = hp(80, ge=0)
    glyphs: int = hp(30000, ge=1)  # rendered once from the pretraining fonts, then sampled with replacement
    fashion_mnist: bool = hp(True)  # add the pretraining half of Fashion-MNIST's training images
    threads: int = hp(1, ge=1)  # on a shared CPU, 2 threads per process spin-wait and run slower than 1
    patch_size: int = hp(4, ge=1)
    dim: int = hp(96, ge=1)
    depth: int = hp(6, ge=1)
    heads: int = hp(3, ge=1)
    mlp_ratio: float = hp(2.0, gt=0)
    probe_train: int = hp(5000, ge=1)  # quality: Fashion-MNIST federated-half images fitting the probe
    probe_test: int = hp(2000, ge=1)  # quality: Fashion-MNIST test images scoring it
    measure: bool = hp(True)
    progress: bool = hp(True)
    out: str = hp("", check=checkpoint_path_ok, valid=OUT_VALID)

    def __post_init__(self) -> None:
        check_fields(self)

    def validate(self) -> None:
        self.shape.check()  # the divisibility of image, patch, width and heads

    @property
    def shape(self) -> ViTShape:
        return ViTShape(28, 1, self.patch_size, self.dim, self.depth, self.heads, self.mlp_ratio)

    @property
    def out_path(self) -> Path:
        return Path(self.out) if self.out else DEFAULT_OUT


@dataclass
class PretrainData:
    """The pretraining pool. ``source`` 0 = glyph, 1 = Fashion-MNIST; each is standardised by its own
    stats, as the federated engine standardises every dataset by its own."""

    x: Tensor  # uint8 [N, 1, 28, 28]
    y: Tensor  # int64 [N]: glyph classes 0..61, Fashion-MNIST classes 62..71
    source: Tensor  # int64 [N]
    glyph_fonts: Tensor  # int64 [G]: font ids of the glyph rows
    fashion_mnist_indices: Tensor  # int64 [M]: rows of Fashion-MNIST's training split used
    mean: Tensor  # [S] per source
    std: Tensor
    classes: list[str]

    def hash(self) -> str:
        return tensor_hash(self.x, self.y, self.source)

    def batch(self, idx: Tensor) -> tuple[Tensor, Tensor]:
        s = self.source[idx]
        x = self.x[idx].float().div_(255)
        x = (x - self.mean[s].view(-1, 1, 1, 1)) / self.std[s].view(-1, 1, 1, 1)
        return x, self.y[idx]


def _stats(x: Tensor) -> tuple[float, float]:
    f = x.float() / 255
    return float(f.mean()), float(f.std())


def pretraining_data(cfg: ViTPretrainConfig, fashion_mnist: ImageDataset | None = None) -> PretrainData:
    """Render the glyphs and (if ``cfg.fashion_mnist``) take the pretraining half of Fashion-MNIST.

    ``fashion_mnist`` is the full dataset (loaded from the data root when not given).
    """
    gx, gy, gf = render_glyphs(cfg.glyphs, np.random.default_rng(np.random.SeedSequence([cfg.seed, 0])),
                               pretrain_fonts())
    xs, ys, srcs = [gx.unsqueeze(1)], [gy], [torch.zeros(len(gy), dtype=torch.int64)]
    stats = [_stats(gx)]
    classes = list(GLYPH_CLASSES)
    fm_idx = torch.empty(0, dtype=torch.int64)
    if cfg.fashion_mnist:
        if fashion_mnist is None:

            fashion_mnist = load_dataset("fashion_mnist")
        half = fashion_mnist_half(fashion_mnist, "pretrain")
        fm_idx = torch.as_tensor(list(FASHION_MNIST_PRETRAIN), dtype=torch.int64)
        xs.append(half.train_x)
        ys.append(half.train_y + len(GLYPH_CLASSES))
        srcs.append(torch.ones(len(half.train_y), dtype=torch.int64))
        stats.append(_stats(half.train_x))
        classes += [f"fashion: {c}" for c in half.classes]
    mean, std = (torch.tensor(v, dtype=torch.float32) for v in zip(*stats))
    return PretrainData(torch.cat(xs), torch.cat(ys), torch.cat(srcs), gf, fm_idx, mean, std, classes)


def _lr_factor(step: int, cfg: ViTPretrainConfig) -> float:
    """Linear warm-up, then cosine decay to zero over the remaining steps."""
    if step < cfg.warmup_steps:
        return (step + 1) / cfg.warmup_steps
    t = (step - cfg.warmup_steps) / max(1, cfg.steps - cfg.warmup_steps)
    return 0.5 * (1 + math.cos(math.pi * min(1.0, t)))


def _param_groups(model: torch.nn.Module, weight_decay: float) -> list[dict]:
    # Decay matrices only: decaying norms, biases, cls token and positions hurts small ViTs.
    decay = [p for p in model.parameters() if p.dim() >= 2 and p.requires_grad]
    rest = [p for p in model.parameters() if p.dim() < 2 and p.requires_grad]
    return [{"params": decay, "weight_decay": weight_decay}, {"params": rest, "weight_decay": 0.0}]


def train_vit(cfg: ViTPretrainConfig, data: PretrainData) -> tuple[torch.nn.Module, list[float]]:
    """Train the stand-in on ``data`` for ``cfg.steps`` steps; returns the model and per-step losses."""
    threads = torch.get_num_threads()
    torch.set_num_threads(cfg.threads)
    try:
        return _train(cfg, data)
    finally:
        torch.set_num_threads(threads)


def _train(cfg: ViTPretrainConfig, data: PretrainData) -> tuple[torch.nn.Module, list[float]]:
    from tqdm.auto import tqdm

    model = create_model("tiny_vit", len(data.classes), in_channels=1, image_size=28, seed=cfg.seed,
                         **arch_kwargs(cfg.shape))
    model.train()
    opt = torch.optim.AdamW(_param_groups(model, cfg.weight_decay), lr=cfg.lr)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: _lr_factor(s, cfg))
    gen = torch.Generator().manual_seed(cfg.seed)
    losses: list[float] = []
    bar = tqdm(range(cfg.steps), desc="pretrain vit", disable=not cfg.progress, mininterval=1.0)
    for step in bar:
        x, y = data.batch(torch.randint(len(data.y), (cfg.batch_size,), generator=gen))
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), GRAD_CLIP)
        opt.step()
        sched.step()
        losses.append(loss.item())
        if step % 20 == 0:
            bar.set_postfix(loss=f"{np.mean(losses[-100:]):.3f}")
    return model.eval(), losses


@torch.no_grad()
def heldout_font_accuracy(model: torch.nn.Module, data: PretrainData, n: int, seed: int) -> float:
    """Accuracy of the pretraining head on glyphs in the held-out fonts (62-way, no other classes)."""
    x, y, _ = render_glyphs(n, np.random.default_rng(np.random.SeedSequence([seed, 1])), heldout_fonts())
    xf = (x.unsqueeze(1).float() / 255 - data.mean[0]) / data.std[0]
    logits = model(xf)[:, : len(GLYPH_CLASSES)]
    return float((logits.argmax(1) == y).float().mean())


def measure_quality(cfg: ViTPretrainConfig, model: torch.nn.Module, data: PretrainData) -> dict:
    """Linear probe and layer-wise prototype accuracy on unseen Fashion-MNIST, vs random init."""
    ds = probe_sample(load_dataset("fashion_mnist_federated"), cfg.probe_train, cfg.probe_test, cfg.seed)
    random_init = create_model("tiny_vit", len(data.classes), in_channels=1, image_size=28, seed=cfg.seed + 1,
                               **arch_kwargs(cfg.shape)).eval()
    return {
        "downstream": "fashion_mnist_federated",
        "probe_train": cfg.probe_train, "probe_test": cfg.probe_test,
        "pretrained": backbone_quality(model.features, ds).as_dict(),
        "random_init": backbone_quality(random_init.features, ds).as_dict(),
        "heldout_font_accuracy": heldout_font_accuracy(model, data, 2000, cfg.seed),
    }


def pretrain_vit(cfg: ViTPretrainConfig) -> Path:
    """Pretrain, measure, and write the checkpoint (timm layout, no classifier) with its JSON record."""
    start = time.perf_counter()
    data = pretraining_data(cfg)
    model, losses = train_vit(cfg, data)
    train_s = time.perf_counter() - start
    quality = measure_quality(cfg, model, data) if cfg.measure else {}
    quality["final_train_loss"] = float(np.mean(losses[-100:]))
    path = write_checkpoint(
        cfg.out_path, model.features.vit.state_dict(), cfg, data.hash(), quality,
        extra={
            "shape": shape_dict(cfg.shape),
            "normalisation": {"glyphs": [float(data.mean[0]), float(data.std[0])],
                              **({"fashion_mnist": [float(data.mean[1]), float(data.std[1])]}
                                 if cfg.fashion_mnist else {})},
            "data": {"glyphs": cfg.glyphs, "glyph_fonts": list(pretrain_fonts()),
                     "fashion_mnist_train_indices": [FASHION_MNIST_PRETRAIN.start, FASHION_MNIST_PRETRAIN.stop]
                     if cfg.fashion_mnist else None},
            "torch_threads": cfg.threads,
            "train_seconds": round(train_s, 1),
            "total_seconds": round(time.perf_counter() - start, 1),
        },
    )
    print(f"wrote {path} ({path.stat().st_size / 1e6:.2f} MB) and {path.with_suffix('.json').name}")
    return path
