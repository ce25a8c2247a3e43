"""How informative a frozen backbone's cls token is about data it never saw.

Two measurements, used as quality bars for the pretrained stand-ins and plotted in
``notebooks/backbones/01_vit_standin.ipynb``:

- **linear probe**: a logistic regression on the final (normed) cls token; the same architecture
  randomly initialised is the baseline it must clearly beat;
- **layer-wise nearest-prototype accuracy**: the cls token *entering* each block is assigned to
  the class whose prototype (mean cls token of that class, PEP-FedPT (arXiv) Eq. 10) is most
  cosine-similar to it (Eq. 13). PEP-FedPT Fig. 2 shows it rising with depth on ViT-B/16; CCMP
  relies on it being informative at the blocks where it inserts prompts.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from ..data.base import ImageDataset, norm_tensors, to_float
from ..errors import ConfigError
from ..params import check_value
from ..data import load_dataset
from ..models import create_model
from ..models.vit import arch_kwargs, checkpoint_meta, committed_weights

EVAL_BATCH = 500


@torch.no_grad()
def cls_features(backbone, images: Tensor, mean, std, batch_size: int = EVAL_BATCH) -> Tensor:
    """[N, depth + 1, d]: cls entering each block of ``backbone``, then its final-norm cls."""
    was_training = backbone.training
    backbone.eval()
    m, s = norm_tensors(mean, std)
    out = [backbone.cls_per_block(to_float(images[i:i + batch_size], m, s)) for i in range(0, len(images), batch_size)]
    backbone.train(was_training)
    return torch.cat(out) if out else torch.empty(0)


def nearest_prototype_accuracy(train_f: Tensor, train_y: Tensor, test_f: Tensor, test_y: Tensor) -> float:
    """Top-1 accuracy of assigning each test row to the most cosine-similar class mean of train rows."""
    classes = torch.unique(train_y)
    protos = torch.stack([train_f[train_y == c].mean(0) for c in classes])
    sim = F.normalize(test_f, dim=1) @ F.normalize(protos, dim=1).T
    return float((classes[sim.argmax(1)] == test_y).float().mean())


def linear_probe_accuracy(train_f: Tensor, train_y: Tensor, test_f: Tensor, test_y: Tensor) -> float:
    """Test accuracy of a logistic regression (lbfgs, deterministic) on standardised features."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    from threadpoolctl import threadpool_limits

    clf = make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000))
    # One BLAS thread: the problem is tiny (d ≤ 768), and on a busy shared CPU multi-threaded BLAS
    # spin-waits; measured 40 s with 2 threads vs 0.4 s with 1 for 3,000 × 96 features.
    with threadpool_limits(1):
        clf.fit(train_f.double().numpy(), train_y.numpy())
        return float(clf.score(test_f.double().numpy(), test_y.numpy()))


@dataclass(frozen=True)
class Quality:
    """``ncm[i]``: nearest-prototype accuracy of the cls entering block i; ``ncm[-1]``: final cls."""

    linear_probe: float
    ncm: tuple[float, ...]

    def as_dict(self) -> dict:
        return {"linear_probe": self.linear_probe, "ncm_per_block": list(self.ncm)}


def probe_sample(ds: ImageDataset, n_train: int, n_test: int, seed: int) -> ImageDataset:
    """A class-stratified sample of ``ds`` (seeded), so quality runs take seconds."""
    for key, v in {"n_train": n_train, "n_test": n_test}.items():
        check_value(key, v, int, ge=1)
    return ds.subset(n_train, n_test, np.random.default_rng(seed))


def backbone_quality(backbone, ds: ImageDataset, features: tuple[Tensor, Tensor] | None = None) -> Quality:
    """Both measurements on ``ds`` (train split fits, test split scores), normalised by its own stats.

    ``features`` lets a caller pass precomputed ``(train, test)`` :func:`cls_features`.
    """
    if features is None:
        mean, std = ds.norm_stats
        features = (cls_features(backbone, ds.train_x, mean, std), cls_features(backbone, ds.test_x, mean, std))
    tr, te = features
    ncm = tuple(nearest_prototype_accuracy(tr[:, i], ds.train_y, te[:, i], ds.test_y) for i in range(tr.shape[1]))
    return Quality(linear_probe_accuracy(tr[:, -1], ds.train_y, te[:, -1], ds.test_y), ncm)


# Probe sizes (train images of the federated half, test images) per profile: seconds at smoke,
# the pretraining record's own sizes at laptop, the whole half and test split at paper.
PROBE_SIZES = {"smoke": (600, 300), "laptop": (5000, 2000), "paper": (30000, 10000)}


def vit_standin_quality(profile: str, weights: str = "glyphs", seed: int = 0) -> dict[str, Quality]:
    """Both measurements for the committed ViT stand-in and the same architecture randomly initialised,
    on Fashion-MNIST images it never saw (``fashion_mnist_federated``)."""
    if profile not in PROBE_SIZES:
        raise ConfigError(f"profile must be one of {', '.join(PROBE_SIZES)}, got {profile!r}")
    arch = arch_kwargs(checkpoint_meta(committed_weights(weights))["shape"])
    n_train, n_test = PROBE_SIZES[profile]
    ds = probe_sample(load_dataset("fashion_mnist_federated"), n_train, n_test, seed)
    models = {
        "glyph-pretrained": create_model("tiny_vit", ds.num_classes, 1, 28, seed=seed, weights=weights, **arch),
        "random init": create_model("tiny_vit", ds.num_classes, 1, 28, seed=seed + 1, **arch),
    }
    return {name: backbone_quality(m.features.eval(), ds) for name, m in models.items()}


def plot_quality(qualities: dict[str, Quality], num_classes: int = 10, axes=None):
    """Left: linear-probe accuracy per backbone. Right: nearest-prototype accuracy of the cls token
    entering each block (PEP-FedPT Fig. 2), with chance as a dashed line."""
    import matplotlib.pyplot as plt

    from ..env.style import PALETTE

    if axes is None:
        _, axes = plt.subplots(1, 2, figsize=(10, 3.6), gridspec_kw={"width_ratios": [1, 2]})
    names = list(qualities)
    for i, n in enumerate(names):  # each bar named: the legend's backbone entries key it
        bars = axes[0].bar([i], [100 * qualities[n].linear_probe], color=[PALETTE[0], PALETTE[7]][i % 2], label=n)
        axes[0].bar_label(bars, fmt="%.1f")
    axes[0].set_xticks(range(len(names)), names)
    axes[0].set_ylabel("linear-probe test accuracy (%)")
    axes[0].set_ylim(0, 100)
    for i, n in enumerate(names):
        ncm = 100 * np.asarray(qualities[n].ncm)
        axes[1].plot(range(len(ncm)), ncm, marker="o", color=[PALETTE[0], PALETTE[7]][i % 2], label=n)
    depth = len(qualities[names[0]].ncm) - 1
    axes[1].axhline(100 / num_classes, ls="--", color="k", lw=0.8, label="chance")
    axes[1].set_xticks(range(depth + 1), [str(i) for i in range(depth)] + ["final"])
    axes[1].set_xlabel("cls token entering block")
    axes[1].set_ylabel("nearest-prototype accuracy (%)")
    axes[1].set_ylim(0, 100)
    axes[1].legend(fontsize=8)
    return axes
