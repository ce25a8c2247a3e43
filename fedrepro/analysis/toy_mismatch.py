"""The toy feature–classifier mismatch (FedPFT (ICLR) §1, Fig. 1).

A computed illustration, not a drawing: two clients hold 2-D points of four classes under strong
label skew; FedAvg trains a small network whose feature space is itself 2-D, so the features and
the global classifier's decision regions can be drawn together. The mismatch probe's Match step
(a per-client linear map inserted before the frozen classifier) then moves each client's features
back into the right regions. The same engine and FedAvg implementation as every other run are used.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import nn

from ..config import make_config
from ..fl.client_data import ClientData
from ..fl.engine import simulate
from ..fl.method import FLContext
from ..methods import METHODS
from ..models.base import SplitModel
from .embedding import analysis_generator, client_features
from .probe import ProbeConfig, accuracy_and_loss, fit_on_features, identity_linear

if TYPE_CHECKING:
    from .probe import ProbeConfig

_GRID = 4.0  # points live in [-4, 4]^2, stored as uint8 like every other dataset


@dataclass
class ToyConfig:
    seed: int = 0
    num_classes: int = 4
    clients: int = 2
    per_client: int = 400
    test_per_client: int = 200
    majority: float = 0.9  # share of a client's points from its two "own" classes
    noise: float = 0.45
    rounds: int = 30
    local_epochs: int = 5
    lr: float = 0.05
    hidden: int = 32


class _Features(nn.Module):
    """2 → hidden → 2 with no final non-linearity, so the feature plane can be drawn as is."""

    def __init__(self, hidden: int):
        super().__init__()
        self.net = nn.Sequential(nn.Flatten(), nn.Linear(2, hidden), nn.Tanh(), nn.Linear(hidden, 2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class _ToyContext(FLContext):
    hidden: int = 32

    def create_model(self, seed: int) -> SplitModel:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            return SplitModel(_Features(self.hidden), nn.Linear(2, self.num_classes), 2, self.num_classes)


def _points(rng: np.random.Generator, labels: np.ndarray, k: int, noise: float) -> np.ndarray:
    angles = 2 * np.pi * labels / k
    centres = np.stack([np.cos(angles), np.sin(angles)], axis=1) * 2.0
    return centres + rng.normal(0.0, noise, size=centres.shape)


def _client_labels(rng: np.random.Generator, cid: int, n: int, cfg: ToyConfig) -> np.ndarray:
    own = np.array([(2 * cid) % cfg.num_classes, (2 * cid + 1) % cfg.num_classes])
    others = np.setdiff1d(np.arange(cfg.num_classes), own)
    from_own = rng.random(n) < cfg.majority
    return np.where(from_own, rng.choice(own, size=n), rng.choice(others, size=n))


def _to_uint8(points: np.ndarray) -> torch.Tensor:
    q = np.clip(np.round((points + _GRID) / (2 * _GRID) * 255), 0, 255).astype(np.uint8)
    return torch.from_numpy(q).view(-1, 2, 1, 1)


def toy_clients(cfg: ToyConfig) -> list[ClientData]:
    """Label-skewed 2-D clients; train and test share each client's label distribution."""
    rng = np.random.default_rng(cfg.seed)
    # Normalise to zero mean / unit scale over the grid, like image datasets' mean/std.
    mean = torch.full((1, 2, 1, 1), 0.5)
    std = torch.full((1, 2, 1, 1), 1.0 / (2 * _GRID))
    clients = []
    for cid in range(cfg.clients):
        ytr = _client_labels(rng, cid, cfg.per_client, cfg)
        yte = _client_labels(rng, cid, cfg.test_per_client, cfg)
        clients.append(ClientData(cid=cid, train_x=_to_uint8(_points(rng, ytr, cfg.num_classes, cfg.noise)),
                                  train_y=torch.from_numpy(ytr).long(),
                                  test_x=_to_uint8(_points(rng, yte, cfg.num_classes, cfg.noise)),
                                  test_y=torch.from_numpy(yte).long(), mean=mean, std=std))
    return clients


def train_toy_fedavg(cfg: ToyConfig | None = None):
    """FedAvg on the toy clients with the package's engine; returns ``(method, clients, state)``."""
    cfg = cfg or ToyConfig()
    clients = toy_clients(cfg)
    run_cfg = make_config("smoke", train__rounds=cfg.rounds, train__local_epochs=cfg.local_epochs,
                          train__batch_size=50, train__lr=cfg.lr, seed=cfg.seed)
    ctx = _ToyContext(cfg=run_cfg,
                      num_classes=cfg.num_classes, in_channels=2, image_size=1, device=torch.device("cpu"),
                      num_clients=cfg.clients)
    ctx.hidden = cfg.hidden
    cls = METHODS.get("fedavg")
    method = cls(ctx, cls.parse_params({}))
    state = simulate(method, clients, seed=cfg.seed, rounds=cfg.rounds, eval_every=cfg.rounds, progress=False)
    return method, clients, state


def toy_mismatch(cfg: ToyConfig | None = None, probe: ProbeConfig | None = None) -> dict:
    """Train FedAvg on the toy, then fit each client's Match map; return everything the figure needs.

    Returns ``{"head": global classifier, "clients": [{"cid", "features", "labels", "matched",
    "origin", "match"}...]}`` with test-split features before and after the client's linear map.
    """
    cfg = cfg or ToyConfig()
    probe = probe or ProbeConfig()
    method, clients, state = train_toy_fedavg(cfg)
    out = {"config": cfg, "clients": []}
    for data in clients:
        model = method.personalized_model(state.shared, state.client_states[data.cid])
        head = copy.deepcopy(model.head).eval().requires_grad_(False)
        tr_f, tr_y = client_features(model, data, "train")
        te_f, te_y = client_features(model, data, "test")
        lin = identity_linear(2, tr_f.device)
        matched_head = nn.Sequential(lin, head)  # the Match model: client map, then the frozen classifier
        with torch.enable_grad():
            fit_on_features(lin.parameters(), matched_head, tr_f, tr_y, probe,
                            analysis_generator(probe.seed, "match", data.cid))
        with torch.no_grad():
            matched = lin(te_f)
        out["clients"].append({"cid": data.cid, "features": te_f.numpy(), "labels": te_y.numpy(),
                               "matched": matched.numpy(), "origin": accuracy_and_loss(head, te_f, te_y)[0],
                               "match": accuracy_and_loss(matched_head, te_f, te_y)[0]})
    out["head"] = head
    return out


def plot_toy_mismatch(toy: dict, axes=None):
    """Rows: features as FedAvg leaves them (Origin) / after each client's linear map (Match).
    Background: the global classifier's decision regions in the 2-D feature plane."""
    import matplotlib.pyplot as plt

    clients = toy["clients"]
    if axes is None:
        fig, axes = plt.subplots(2, len(clients), figsize=(4.2 * len(clients), 8), squeeze=False)
    else:
        fig = axes[0][0].figure
    pts = np.concatenate([np.concatenate([c["features"], c["matched"]]) for c in clients])
    lo, hi = pts.min(0) - 0.5, pts.max(0) + 0.5
    gx, gy = np.meshgrid(np.linspace(lo[0], hi[0], 200), np.linspace(lo[1], hi[1], 200))
    with torch.no_grad():
        grid = torch.tensor(np.stack([gx.ravel(), gy.ravel()], 1), dtype=torch.float32)
        regions = toy["head"](grid).argmax(1).numpy().reshape(gx.shape)
    k = toy["config"].num_classes
    from ..env.style import categorical

    colours = categorical(k)
    for col, c in enumerate(clients):
        for row, (key, acc_key, label) in enumerate((("features", "origin", "Origin"),
                                                     ("matched", "match", "after the Match map"))):
            ax = axes[row][col]
            ax.contourf(gx, gy, regions, levels=np.arange(-0.5, k), colors=colours, alpha=0.18)
            labels = np.asarray(c["labels"]).astype(int)
            for y in range(k):  # one set of points per class, so that the key names each colour
                pts = c[key][labels == y]
                if len(pts):
                    ax.scatter(pts[:, 0], pts[:, 1], color=colours[y], s=8, edgecolors="none", label=f"class {y}")
            ax.set_title(f"client {c['cid']}: {label} — acc {100 * c[acc_key]:.1f}%", fontsize=9)
            ax.set_xticks([])
            ax.set_yticks([])
    axes[0][0].set_ylabel("features of the FedAvg model")
    axes[1][0].set_ylabel("features × client's linear map")
    from ..env.style import figure_legend

    figure_legend(fig, [a for r in axes for a in r],
                  title="point: a client's sample, by class\nshade: the global head's\nregion of that class")
    return fig
