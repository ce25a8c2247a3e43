"""Where do a trained FedOTP run's transport plans put their mass? Maps over the image, and the mass
on the foreground, at any γ.

FedOTP (CVPR 2024) Fig. 2 overlays the patch-to-prompt similarity of the global and the local prompt
on the image; Fig. A4 overlays the transport plan of the true class, split into its global and local
columns, at several γ: at γ = 1 the two columns are complementary (every patch carries 1/M), and as
γ falls the plan shrinks onto the object. Here:

- :func:`plan_maps` / :func:`run_plan_maps`: for one client's images, the similarity maps and the
  true class's plan columns on the √M×√M grid (M = 49: 7×7), at each γ of a list;
  :func:`plot_plan_maps` overlays them on the images;
- :func:`foreground_mass` / :func:`run_foreground_mass`: the fraction of the true class's plan on
  foreground patches of Fashion-MNIST images (mean pixel above an ink threshold, as
  :func:`fedrepro.pretrain.clip_quality.foreground_similarity`; on cluttered renderings, where the
  clutter is inked too, the garment's own mask), per client and γ.

γ is an argument of the solver (Algorithm 1's prompt marginal γ/N), not of the prompts: the plans
are re-solved with the run's trained prompts at each γ asked for, whatever γ the run trained with
(``trained_gamma``). They are solved to Algorithm 1's fixed point (:data:`CONVERGED`, float64) unless
``converged=False``: at γ = 1 the paper's 100 iterations leave rows far from 1/M, so the model's own
plan is not yet the plan of the problem (``converged=False`` shows that plan, the one the run scores
with). The plan is always the paper's uot plan, also for runs trained with another ``ot`` variant.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from torch import Tensor

from ..data.fashion_mnist_domains import garment_mask
from ..errors import ConfigError
from ..fl.client_data import ClientData
from ..ot.transport import uot_plan
from ..models.clip_cache import normalized_tokens
from ..runs.store import RunResult
from ..runs.train import restore

#: Solver settings that reach the fixed point of Algorithm 1 (in float64, on the shifted cost of
#: :func:`converged_plan`): at γ = 1 the row sums come within ~1e-8 of 1/M only after ~1,000
#: iterations on cosine costs, which the paper's 100 iterations and early stop (an absolute change of
#: v below 1e-3) do not wait for.
CONVERGED = {"max_iter": 5000, "thresh": 1e-12}
DEFAULT_GAMMAS = (1.0, 0.8, 0.5)


def converged_plan(sim: Tensor, gamma: float, lam: float) -> Tensor:
    """Algorithm 1's plan for similarities ``sim`` [..., M, N] (cost 1 - sim) at its fixed point:
    float64, :data:`CONVERGED`.

    Each problem's cost is shifted by its minimum first. The plan is the same (its total mass is fixed
    at γ, so a constant in the cost only adds a constant to the objective, and the iterates of u are
    unchanged), but v = b / (Kᵀu) shrinks from ~e^(cost/λ) to O(1), so the absolute stopping rule
    on v becomes a relative one and a converged problem stops instead of running max_iter.
    """
    cost = 1.0 - sim.detach().double()
    cost = cost - cost.amin(dim=(-2, -1), keepdim=True)
    return uot_plan(cost, gamma, lam, **CONVERGED)


def _check_gammas(gammas: Sequence[float]) -> tuple[float, ...]:
    out = tuple(float(g) for g in gammas)
    if not out or any(not 0 < g <= 1 for g in out):
        raise ConfigError(f"gammas={list(gammas)!r}; valid: a non-empty list of numbers in (0, 1]")
    return out


def _fedotp(method):
    if not hasattr(method, "plan_scores") or not hasattr(method, "N_PROMPTS"):
        name = getattr(method, "name", method)
        raise ConfigError(f"this analysis reads FedOTP's transport plans; got method {name!r}")
    return method


def prompt_names(method) -> tuple[str, ...]:
    """The name of each prompt column, in the context tensor's order: "global" for an averaged
    prompt, "local" for a private one (FedOTP: ("global", "local"))."""
    return tuple("global" if i in method.SHARED else "local" for i in range(method.N_PROMPTS))


def plans_at(sim: Tensor, gammas: Sequence[float], lam: float, converged: bool = True, max_iter: int = 100,
             thresh: float = 1e-3) -> Tensor:
    """The uot plans [G, ..., M, N] of similarities ``sim`` [..., M, N] at each γ: at the fixed
    point (:func:`converged_plan`), or with the given solver settings when ``converged=False``."""
    out = []
    for g in _check_gammas(gammas):
        if converged:
            out.append(converged_plan(sim, g, lam))
        else:
            out.append(uot_plan(1.0 - sim.detach(), g, lam, max_iter=max_iter, thresh=thresh).double())
    return torch.stack(out)


@torch.no_grad()
def true_class_similarity(method, shared, state, images: Tensor, labels: Tensor) -> Tensor:
    """cos(patch m, prompt n of the image's true class) as [B, M, N] for uint8 ``images``, under the
    client's prompts ``assemble(shared, state)``."""
    method = _fedotp(method)
    text = method.text_features(method.assemble(shared, state))  # [N, C, d]
    # The frozen tokens of these very images: method.features() would apply the run's
    # ``misaligned_images`` quirk and pair an image with another image's tokens.
    _, patches = normalized_tokens(method.clip, images)
    patches = patches.to(text.device)
    return torch.einsum("bmd,nbd->bmn", patches, text[:, labels.to(text.device)]).cpu()


@dataclass
class PlanMaps:
    """Maps of one client's images (FedOTP Figs. 2 and A4), grids ``side`` × ``side``.

    ``similarity`` [B, N, side, side]: cos(patch, prompt n of the true class); ``plans``
    [G, B, N, side, side]: the true class's plan at ``gammas[g]``, in plan mass (each image's plan
    sums to γ, a patch's row to at most 1/M).
    """

    images: Tensor  # [B, C, H, W] uint8
    labels: Tensor  # [B]
    prompts: tuple[str, ...]
    gammas: tuple[float, ...]
    similarity: Tensor
    plans: Tensor
    client: int
    trained_gamma: float
    class_names: tuple[str, ...] = ()

    @property
    def side(self) -> int:
        return self.similarity.shape[-1]

    @property
    def num_patches(self) -> int:
        return self.side * self.side


def _grid(x: Tensor) -> Tensor:
    """[..., M, N] -> [..., N, side, side] (patches in row-major order, as the image tower emits them)."""
    m = x.shape[-2]
    side = round(m ** 0.5)
    if side * side != m:
        raise ConfigError(f"the feature map has {m} tokens, not a square grid; maps need M = side²")
    return x.transpose(-1, -2).reshape(*x.shape[:-2], x.shape[-1], side, side)


def plan_maps(method, shared, state, data: ClientData, gammas: Sequence[float] = DEFAULT_GAMMAS,
              num_images: int = 4, indices: Sequence[int] | None = None, split: str = "test",
              converged: bool = True, distinct_classes: bool = False) -> PlanMaps:
    """FedOTP Figs. 2 and A4 for one client: similarity maps and the true class's plan columns.

    Args:
        method, shared, state: a FedOTP method and the client's trained state (``state`` is the
            client's entry of ``client_states``).

        data: the client's data; images are taken from ``split``.
        gammas: the γ's to solve the plan at (with the trained prompts; see the module docstring).
        converged: solve to the fixed point (default) or with the run's own solver settings.
        num_images: the first this many images of the split, unless ``indices`` picks them.

        distinct_classes: instead, the first image of each class in turn (classes in the order
            they first appear, then round again), so that a figure's rows show several classes.
    """
    method = _fedotp(method)
    if split not in ("train", "test"):
        raise ConfigError(f"split={split!r}; valid: 'train', 'test'")
    x, y = (data.test_x, data.test_y) if split == "test" else (data.train_x, data.train_y)
    if len(y) == 0:
        raise ConfigError(f"client {data.cid} has no {split} images to map")
    if indices is None and distinct_classes:
        indices = _one_per_class(y.cpu().tolist(), int(num_images))
    idx = list(range(min(int(num_images), len(y)))) if indices is None else [int(i) for i in indices]
    bad = [i for i in idx if not 0 <= i < len(y)]
    if bad or not idx:
        raise ConfigError(f"indices={indices!r}; valid: a non-empty list of image indices in [0, {len(y)})")
    sel = torch.tensor(idx, dtype=torch.long, device=x.device)
    images, labels = x[sel].cpu(), y[sel].cpu()
    sim = true_class_similarity(method, shared, state, images, labels)
    p = method.p
    plans = plans_at(sim, gammas, p.lam, converged=converged, max_iter=p.max_iter, thresh=p.thresh)
    return PlanMaps(images=images, labels=labels, prompts=prompt_names(method), gammas=_check_gammas(gammas),
                    similarity=_grid(sim.double()), plans=_grid(plans), client=int(data.cid),
                    trained_gamma=float(p.gamma), class_names=tuple(getattr(method, "class_names", ())))


def _one_per_class(labels: Sequence[int], n: int) -> list[int]:
    """Up to ``n`` indices of ``labels``: each class's first, then each class's second, ..."""
    by_class: dict[int, list[int]] = {}
    for i, lab in enumerate(labels):
        by_class.setdefault(int(lab), []).append(i)
    out: list[int] = []
    for depth in range(max((len(v) for v in by_class.values()), default=0)):
        out += [v[depth] for v in by_class.values() if depth < len(v)]
    return out[:max(n, 0)]


def _client_of(clients: Sequence[ClientData], client: int) -> ClientData:
    for c in clients:
        if c.cid == client:
            return c
    raise ConfigError(f"client={client!r}; valid: a client id in [0, {len(clients)})")


def run_plan_maps(result, client: int = 0, **kw) -> PlanMaps:
    """:func:`plan_maps` for one client of a finished FedOTP run (a RunResult or its folder), with
    the run's final shared state and that client's final local state (``restore``)."""
    method, clients, state = restore(result)
    data = _client_of(clients, client)
    return plan_maps(method, state["shared"], state["client_states"][data.cid], data, **kw)


def foreground_mask(images: Tensor, side: int, ink: float = 0.2) -> Tensor:
    """[B, side²] bool: patches whose mean pixel (grey, in [0, 1]) exceeds ``ink`` (Fashion-MNIST's
    background is black), pooled onto the token grid like
    :func:`fedrepro.pretrain.clip_quality.foreground_similarity`."""
    if images.dtype != torch.uint8 or images.dim() != 4:
        raise ConfigError(f"images must be uint8 [B, C, H, W], got {images.dtype} {tuple(images.shape)}")
    pixels = F.adaptive_avg_pool2d(images.float().mean(1, keepdim=True) / 255, side).squeeze(1)
    return (pixels > ink).flatten(1)


#: A patch of a cluttered image is the garment's when at least this share of its pixels are.
GARMENT_SHARE = 0.5
MASKS = ("ink", "garment")


def garment_patches(images: Tensor, side: int) -> Tensor:
    """[B, side²] bool: patches of cluttered Fashion-MNIST images (``clutter`` > 0) of which at least
    :data:`GARMENT_SHARE` of the pixels are the garment's
    (:func:`fedrepro.data.fashion_mnist_domains.garment_mask`), on the token grid."""
    pixels = garment_mask(images)[:, None].float()
    return (F.adaptive_avg_pool2d(pixels, side).squeeze(1) >= GARMENT_SHARE).flatten(1)


def mass_on(plan: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
    """Per image, the fraction of the plan's mass on the patches of ``mask``: plan [B, M, N] and
    mask [B, M] -> (total [B], per prompt column [B, N]), float64."""
    plan = plan.double()
    on = plan * mask[..., None]
    return on.sum((-2, -1)) / plan.sum((-2, -1)), on.sum(-2) / plan.sum(-2)


def foreground_mass(method, shared, client_states, clients: Sequence[ClientData],
                    gammas: Sequence[float] = (1.0, 0.9, 0.8, 0.65, 0.5), ink: float = 0.2, split: str = "test",
                    converged: bool = True, batch_size: int = 500, mask: str = "ink") -> pd.DataFrame:
    """FedOTP Fig. A4's claim measured on Fashion-MNIST: the share of the true class's plan on
    foreground patches, per client and γ, over the client's ``split`` images. Foreground: patches
    inked above ``ink`` (``mask="ink"``: the garment on a black ground), or the garment's own patches
    of cluttered images (``mask="garment"``, :func:`garment_patches`).

    Returns one row per (client, γ): ``client``, ``gamma``, ``foreground_mass`` (mean over images of
    the plan's mass fraction on foreground patches), ``foreground_mass_<prompt>`` (the same within each
    prompt column), ``foreground_fraction`` (the fraction of foreground patches: the value at γ = 1),
    ``mass_ceiling`` (mean of min(1, fraction/γ), the most a plan can put there), ``n_images``.
    """
    method = _fedotp(method)
    gammas = _check_gammas(gammas)
    if split not in ("train", "test"):
        raise ConfigError(f"split={split!r}; valid: 'train', 'test'")
    if mask not in MASKS:
        raise ConfigError(f"mask={mask!r}; valid: {', '.join(map(repr, MASKS))}")
    names = prompt_names(method)
    sims, masks, owners = [], [], []
    for data in clients:
        x, y = (data.test_x, data.test_y) if split == "test" else (data.train_x, data.train_y)
        state = client_states[data.cid]
        for s in range(0, len(y), batch_size):
            xb, yb = x[s:s + batch_size].cpu(), y[s:s + batch_size].cpu()
            sim = true_class_similarity(method, shared, state, xb, yb)
            sims.append(sim)
            side = round(sim.shape[1] ** 0.5)
            masks.append(foreground_mask(xb, side, ink) if mask == "ink" else garment_patches(xb, side))
            owners.append(torch.full((len(yb),), data.cid))
    if not sims:
        raise ConfigError(f"no client has {split} images to measure")
    sim, on, owner = torch.cat(sims), torch.cat(masks), torch.cat(owners)
    frac = on.double().mean(1)
    p = method.p
    # every client's images in one solve per γ: the problems are independent, and one large batch
    # costs far less than many small ones
    plans = plans_at(sim, gammas, p.lam, converged=converged, max_iter=p.max_iter, thresh=p.thresh)
    rows = []
    for cid in torch.unique(owner).tolist():
        mine = owner == cid
        for g, plan in zip(gammas, plans):
            total, cols = mass_on(plan[mine], on[mine])
            row = {"client": int(cid), "gamma": g, "foreground_mass": float(total.mean())}
            row.update({f"foreground_mass_{n}": float(cols[:, i].mean()) for i, n in enumerate(names)})
            row.update(foreground_fraction=float(frac[mine].mean()),
                       mass_ceiling=float(frac[mine].div(g).clamp(max=1).mean()), n_images=int(mine.sum()))
            rows.append(row)
    return pd.DataFrame(rows)


def run_foreground_mass(result, gammas: Sequence[float] = (1.0, 0.9, 0.8, 0.65, 0.5), **kw) -> pd.DataFrame:
    """:func:`foreground_mass` over the participating clients of a finished FedOTP run; unless ``mask``
    is given, garment masks where the run's images are cluttered (``data.dataset_args.clutter`` > 0)
    and the ink threshold elsewhere."""
    result = result if isinstance(result, RunResult) else RunResult(result)
    if "mask" not in kw:
        kw["mask"] = "garment" if result.config.data.dataset_args.get("clutter") else "ink"
    method, clients, state = restore(result)
    part = [c for c in clients if not c.held_out]
    return foreground_mass(method, state["shared"], state["client_states"], part, gammas, **kw)


def _upsample(grid: Tensor, size: tuple[int, int]) -> np.ndarray:
    return F.interpolate(grid[None, None].float(), size=size, mode="bilinear", align_corners=False)[0, 0].numpy()


def plot_plan_maps(maps: PlanMaps, max_images: int = 4, alpha: float = 0.5, cmap: str = "jet", size: float = 1.6):
    """FedOTP Figs. 2 and A4 as one figure: a row per image; columns: the image, each prompt's
    similarity map, then each γ's plan columns, upsampled (bilinear) and overlaid on the image.

    Similarity maps are min-max normalised per map (only their shape shows, as in Fig. 2). Plans are
    drawn as the share of each patch's mass (M·T, 0 to 1, one colour scale for every γ), so the
    columns of γ = 1 add up to 1 on every patch and smaller γ's show where the mass left.
    Returns the Figure.
    """
    import matplotlib.pyplot as plt

    b = min(int(max_images), len(maps.labels))
    if b < 1:
        raise ConfigError(f"max_images={max_images!r}; valid: >= 1")
    n, g = len(maps.prompts), len(maps.gammas)
    cols = 1 + n + g * n
    fig, axes = plt.subplots(b, cols, figsize=(size * cols, size * b + 0.4), squeeze=False)
    hw = tuple(maps.images.shape[-2:])
    for r in range(b):
        img = maps.images[r].float().mean(0).numpy() / 255
        y = int(maps.labels[r])
        name = maps.class_names[y] if y < len(maps.class_names) else str(y)
        panels = [("image", None, None)]
        for i, pn in enumerate(maps.prompts):
            s = maps.similarity[r, i]
            s = (s - s.min()) / (s.max() - s.min()).clamp(min=1e-12)
            panels.append((f"sim {pn}", s, (0.0, 1.0)))
        for j, gam in enumerate(maps.gammas):
            for i, pn in enumerate(maps.prompts):
                panels.append((f"plan {pn} γ={gam:g}", maps.plans[j, r, i] * maps.num_patches, (0.0, 1.0)))
        for c, (title, grid, lim) in enumerate(panels):
            ax = axes[r, c]
            ax.imshow(img, cmap="gray", vmin=0, vmax=1)
            if grid is not None:
                ax.imshow(_upsample(grid, hw), cmap=cmap, alpha=alpha, vmin=lim[0], vmax=lim[1])
            if r == 0:
                ax.set_title(title.replace(" γ", "\nγ"), fontsize=8)
            ax.set_xticks([])
            ax.set_yticks([])
        axes[r, 0].set_ylabel(name, fontsize=8)
    fig.suptitle(f"client {maps.client}: true-class plans re-solved at each γ (trained at γ={maps.trained_gamma:g})",
                 fontsize=10)
    fig.tight_layout()
    from matplotlib.cm import ScalarMappable
    from matplotlib.colors import Normalize

    # One scale for every overlay (see above): a map's shape (sim) or a patch's share of its mass (plan).
    fig.colorbar(ScalarMappable(Normalize(0.0, 1.0), cmap), ax=axes.ravel().tolist(), fraction=0.02, pad=0.01,
                 label="sim: min-max per map; plan: share of the patch's mass")
    return fig


__all__ = ["CONVERGED", "DEFAULT_GAMMAS", "GARMENT_SHARE", "MASKS", "PlanMaps", "converged_plan", "foreground_mask",
           "foreground_mass", "garment_patches", "mass_on", "plan_maps", "plans_at", "plot_plan_maps", "prompt_names",
           "run_foreground_mass", "run_plan_maps", "true_class_similarity"]
