"""Do FedOTP's transport plans move onto the object as γ falls? Measured on the planted-patch task.

FedOTP (CVPR 2024) Fig. A4 and §4.3 claim that with γ < 1 the unbalanced plan leaves background
patches out and concentrates on the object, while at γ = 1 every patch must be transported. Real
images have no ground truth for "object", so this experiment (a synthetic CLIP-like task of ours)
trains FedOTP's mechanism on :mod:`fedrepro.data.planted`, whose images come with their object masks:

- no text encoder: the "prompt features" are free vectors in the joint token space, used unit-norm.
  Per class c there is one global vector g_c (shared by all clients, averaged FedAvg-style by sample
  count each round, FedOTP Eq. 4) and per client k one local vector l_{k,c} (never leaves the client);
- client k scores class c on image x by FedOTP's Eq. 10, ``ot_score`` of the patch-to-{g_c, l_{k,c}}
  cosine similarities with the uot plan (Algorithm 1) at γ, and trains both vectors by cross-entropy
  on ``scale · score`` with local SGD (the plan held fixed, as in the paper);
- then, on each client's test split, the plan of the *true* class is read against the object mask:
  the fraction of its mass on object patches. At γ = 1 every patch carries exactly 1/M of mass, so
  that fraction is the object fraction ρ = (object patches)/M whatever the vectors are; with γ < 1
  the prompts take the γ share of the map they match best, and the fraction can rise up to ρ/γ.

The measured plan is re-solved to convergence (float64, :data:`~fedrepro.analysis.ot_maps.CONVERGED`):
Algorithm 1 at γ = 1 approaches the balanced plan slowly, and after the 100 iterations of the
paper's solver its rows are still far from 1/M, so the solver's own plan, also reported
(``object_mass_solver``), is not yet the plan of the problem at γ = 1.

Everything random comes from generators seeded by (seed, purpose); the initial vectors and the batch
order are the same for every γ of a seed, so the γ's of one seed are paired.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from torch import Tensor

from ..data.planted import PlantedConfig, PlantedSplit, PlantedTask, make_planted
from ..errors import ConfigError
from ..ot.transport import ot_score
from ..params import check_fields, hp
from .embedding import analysis_generator
from .ot_maps import converged_plan, mass_on

DEFAULT_GAMMAS = (1.0, 0.9, 0.8, 0.65, 0.5)


@dataclass(frozen=True)
class PlantedOTConfig:
    """The training of the planted experiment (FedOTP's mechanism, prompt features as free vectors).

    ``scale`` is CLIP's logit scale (1/τ ≈ 100, FedOTP §4.1); ``lam``, ``max_iter`` and ``thresh``
    are Algorithm 1's (0.1, 100, 1e-3 in the official code). SGD with momentum, a fresh optimiser per
    client and round; after each step the vectors are put back on the unit sphere, so a step of
    ``lr`` times the gradient means the same turn whatever the vectors went through before.
    """

    # Half the task's default clients and shots: 3 seeds x 5 γ take ~12 s on one CPU thread.
    task: PlantedConfig = hp(factory=lambda: PlantedConfig(num_clients=5, train_per_client=32))
    rounds: int = hp(5, ge=1)
    local_epochs: int = hp(1, ge=1)
    batch_size: int = hp(32, ge=1)
    lr: float = hp(0.5, gt=0)
    momentum: float = hp(0.9, ge=0, lt=1)
    scale: float = hp(100.0, gt=0)
    lam: float = hp(0.1, gt=0)
    max_iter: int = hp(100, ge=1)
    thresh: float = hp(1e-3, ge=0)

    def __post_init__(self) -> None:
        check_fields(self)


@dataclass
class PlantedPrompts:
    """Trained vectors of one (seed, γ): ``global_`` [C, d] and ``local`` [K, C, d], unit-norm."""

    global_: Tensor
    local: Tensor


def _unit(x: Tensor) -> Tensor:
    return F.normalize(x, dim=-1)


def _prompt_pair(global_: Tensor, local_k: Tensor) -> Tensor:
    """[N=2, C, d]: index 0 the global vector, 1 the local one (FedOTP's ctx order)."""
    return torch.stack([_unit(global_), _unit(local_k)])


def _sims(tokens: Tensor, prompts: Tensor) -> Tensor:
    """cos(patch m of image b, prompt n of class c) as [B, C, M, N] (tokens already unit-norm)."""
    return torch.einsum("bmd,ncd->bcmn", tokens, prompts)


def train_planted(task: PlantedTask, gamma: float, cfg: PlantedOTConfig, seed: int) -> PlantedPrompts:
    """FedOTP's rounds (Algorithm 2) on the planted task at ``gamma``, all clients every round.

    The SGD step is written out: a ``torch.optim.SGD`` per client and round would cost more than
    the step itself on vectors this small."""
    tc = task.config
    K, C, d = tc.num_clients, tc.num_classes, tc.dim
    gen = analysis_generator(seed, "planted-ot-init")
    global_ = _unit(torch.randn(C, d, generator=gen))
    local = _unit(torch.randn(K, C, d, generator=gen))
    clients = [task.train.client(k) for k in range(K)]
    tokens = [_unit(c.tokens) for c in clients]
    for rnd in range(cfg.rounds):
        uploads, sizes = [], []
        for k in range(K):
            params = [global_.clone(), local[k].clone()]
            bufs = [torch.zeros_like(p) for p in params]  # a fresh optimiser per client and round
            n = len(clients[k])
            order_gen = analysis_generator(seed, "planted-ot-order", rnd, k)
            for _ in range(cfg.local_epochs):
                order = torch.randperm(n, generator=order_gen)
                for s in range(0, n, cfg.batch_size):
                    idx = order[s:s + cfg.batch_size]
                    g, loc = (p.requires_grad_(True) for p in params)
                    score = ot_score(_sims(tokens[k][idx], _prompt_pair(g, loc)), "uot", gamma, cfg.lam,
                                     max_iter=cfg.max_iter, thresh=cfg.thresh)
                    loss = F.cross_entropy(cfg.scale * score, clients[k].labels[idx])
                    grads = torch.autograd.grad(loss, params)
                    with torch.no_grad():
                        # SGD with momentum (torch.optim.SGD's rule), then back onto the unit sphere
                        for i, grad in enumerate(grads):
                            bufs[i] = cfg.momentum * bufs[i] + grad
                        params = [_unit(p.detach() - cfg.lr * b) for p, b in zip(params, bufs)]
            uploads.append(params[0])
            sizes.append(n)
            local[k] = params[1]
        w = torch.tensor(sizes, dtype=torch.float32)
        # FedOTP Eq. 4: the global vectors averaged by sample count; the local ones stay put
        global_ = (torch.stack(uploads) * (w / w.sum())[:, None, None]).sum(0)
    return PlantedPrompts(_unit(global_), _unit(local))


def evaluate_planted(task: PlantedTask, prompts: PlantedPrompts, gamma: float, cfg: PlantedOTConfig,
                     split: str = "test") -> dict[str, float]:
    """Accuracy and plan-on-object measures of trained vectors on every client's ``split``.

    The accuracy uses the solver as trained (``cfg``); the object masses use the true class's plan,
    re-solved to convergence (:func:`~fedrepro.analysis.ot_maps.converged_plan`), besides the
    solver's own (``object_mass_solver``).
    """
    data: PlantedSplit = getattr(task, split)
    tc = task.config
    correct, total = 0, 0
    true_sims, masks, solver = [], [], []
    local_style, global_style = [], []
    for k in range(tc.num_clients):
        part = data.client(k)
        if len(part) == 0:
            continue
        sims = _sims(_unit(part.tokens), _prompt_pair(prompts.global_, prompts.local[k]))
        with torch.no_grad():
            score, plan = ot_score(sims, "uot", gamma, cfg.lam, max_iter=cfg.max_iter, thresh=cfg.thresh,
                                   return_plan=True)
        correct += int((score.argmax(1) == part.labels).sum())
        total += len(part)
        rows = torch.arange(len(part))
        true_sims.append(sims[rows, part.labels])  # [B, M, N]
        masks.append(part.object_mask)
        solver.append(mass_on(plan[rows, part.labels], part.object_mask)[0])
        # Each client's style is on the objects of all its classes, so it cannot tell its classes
        # apart: cross-entropy gives the local vectors no reason to take it up (the columns say if they do).
        style = _unit(task.styles[k])
        local_style.append(float((prompts.local[k] @ style).mean()))
        global_style.append(float((prompts.global_ @ style).mean()))
    if total == 0:
        raise ConfigError(f"the planted task's {split} split is empty; raise {split}_per_client")
    mask = torch.cat(masks)
    plan = converged_plan(torch.cat(true_sims), gamma, cfg.lam)  # every client's images in one solve
    on_objects, cols = mass_on(plan, mask)
    rho = tc.num_objects / tc.num_patches
    return {
        "object_mass": float(on_objects.mean()),
        "object_mass_global": float(cols[:, 0].mean()),
        "object_mass_local": float(cols[:, 1].mean()),
        "object_mass_solver": float(torch.cat(solver).mean()),
        "object_fraction": rho,
        "mass_ceiling": min(1.0, rho / gamma),
        "acc": correct / total,
        "local_style_cos": float(np.mean(local_style)),
        "global_style_cos": float(np.mean(global_style)),
    }


def planted_plan_maps(seed: int = 0, gammas: Sequence[float] = (1.0, 0.8, 0.5), num_images: int = 4,
                      client: int = 0, config: PlantedOTConfig | None = None) -> dict:
    """Fig. A4 on the planted task: for the first ``num_images`` test images of ``client``, the object
    mask and the true class's converged plan (global + local columns summed per patch) at each γ, as
    √M×√M grids, with each γ's own trained vectors. Returns ``{"mask": [I, s, s], "plans": {γ: [I, s, s]},
    "labels": [I]}``."""
    cfg = config or PlantedOTConfig()
    task = make_planted(replace(cfg.task, seed=int(seed)))
    part = task.test.client(client)
    if len(part) == 0:
        raise ConfigError(f"client {client} has no planted test images; valid: 0..{task.config.num_clients - 1}")
    part = PlantedSplit(*(t[:num_images] for t in (part.tokens, part.labels, part.clients, part.object_mask)))
    side = round(task.config.num_patches ** 0.5)
    if side * side != task.config.num_patches:
        raise ConfigError(f"num_patches={task.config.num_patches} is not a square grid; use e.g. 49")
    rows = torch.arange(len(part))
    plans = {}
    for gamma in gammas:
        prompts = train_planted(task, gamma, cfg, int(seed))
        sims = _sims(_unit(part.tokens), _prompt_pair(prompts.global_, prompts.local[client]))[rows, part.labels]
        plans[float(gamma)] = converged_plan(sims, gamma, cfg.lam).sum(-1).reshape(-1, side, side).float()
    return {"mask": part.object_mask.reshape(-1, side, side), "plans": plans, "labels": part.labels}


def plot_planted_maps(maps: dict, size: float = 1.6):
    """One row per image: its object patches, then the plan's mass per patch at each γ (one colour
    scale per image), the object patches marked by red dots. Returns the Figure."""
    import matplotlib.pyplot as plt

    mask, plans = maps["mask"].numpy(), maps["plans"]
    n = len(mask)
    fig, axes = plt.subplots(n, 1 + len(plans), figsize=(size * (1 + len(plans)), size * n), squeeze=False)
    for i in range(n):
        axes[i, 0].imshow(mask[i], cmap="gray_r", vmin=0, vmax=1)
        axes[i, 0].set_ylabel(f"class {int(maps['labels'][i])}", fontsize=8)
        vmax = max(float(p[i].max()) for p in plans.values())
        for j, (gamma, plan) in enumerate(plans.items(), start=1):
            axes[i, j].imshow(plan[i].numpy(), cmap="viridis", vmin=0, vmax=vmax)
            ys, xs = np.nonzero(mask[i])
            axes[i, j].scatter(xs, ys, s=6, c="red", marker="o", label="object patch")
            if i == 0:
                axes[i, j].set_title(f"plan mass, γ={gamma:g}", fontsize=8)
        if i == 0:
            axes[i, 0].set_title("object patches", fontsize=8)
    for ax in axes.ravel():
        ax.set_xticks([])
        ax.set_yticks([])
    fig.suptitle("planted task: where the true class's plan puts its mass (red: object patches)", fontsize=9)
    fig.tight_layout()
    from matplotlib.lines import Line2D

    fig.legend(handles=[Line2D([], [], ls="", marker="o", markersize=3, color="red", label="object patch")],
               loc="upper center", bbox_to_anchor=(0.5, 0.0), frameon=False)
    return fig


def planted_ot_experiment(seeds: Sequence[int] = (0, 1, 2), gammas: Sequence[float] = DEFAULT_GAMMAS,
                          config: PlantedOTConfig | None = None, split: str = "test") -> pd.DataFrame:
    """FedOTP (CVPR 2024) Fig. A4's claim on ground truth: per (seed, γ), train FedOTP's global/local
    vectors on the planted task (drawn with the seed) and measure the true-class plan on the objects.

    Returns a tidy table, one row per (seed, γ): ``seed``, ``gamma``, ``object_mass`` (mean over test
    images of the converged plan's mass fraction on object patches), ``object_mass_global`` /
    ``object_mass_local`` (the same per prompt column), ``object_mass_solver`` (the plan of the
    paper's solver settings, as the model uses it), ``object_fraction`` (ρ, the value at γ = 1),
    ``mass_ceiling`` (min(1, ρ/γ), the most a plan can put on objects), ``acc`` (test accuracy, each
    client with its own local vectors), ``local_style_cos`` / ``global_style_cos`` (mean cosine of the
    client's local, resp. the global, vectors with the client's planted style direction).

    Expected: ``object_mass`` equals ρ at γ = 1 and rises as γ falls.
    """
    cfg = config or PlantedOTConfig()
    if split not in ("train", "test"):
        raise ConfigError(f"split={split!r}; valid: 'train', 'test'")
    gammas = [float(g) for g in gammas]
    bad = [g for g in gammas if not 0 < g <= 1]
    if bad or not gammas:
        raise ConfigError(f"gammas={gammas!r}; valid: a non-empty list of numbers in (0, 1]")
    rows = []
    for seed in seeds:
        task = make_planted(replace(cfg.task, seed=int(seed)))
        for gamma in gammas:
            prompts = train_planted(task, gamma, cfg, int(seed))
            rows.append({"seed": int(seed), "gamma": gamma, **evaluate_planted(task, prompts, gamma, cfg, split)})
    return pd.DataFrame(rows)


__all__ = ["DEFAULT_GAMMAS", "PlantedOTConfig", "PlantedPrompts", "evaluate_planted", "planted_ot_experiment",
           "planted_plan_maps", "plot_planted_maps", "train_planted"]
