"""FedOTP's internals measured on trained runs: the local-prompt clusters behind Fig. A5 and the
plans' foreground mass behind Figs. 2 and A4, as the tidy tables the claims read."""
from __future__ import annotations

import pandas as pd
import torch
import torch.nn.functional as F

from ...analysis.ot_maps import run_foreground_mass
from ...analysis.prompt_clusters import run_prompt_clusters
from ...runs.store import RunResult
from ...data import load_dataset
from ...models.clip_cache import normalized_tokens
from ...models.clip_model import clip_backbone
from ...ot.transport import ot_score
from .notebooks import HAS_MASKS


def cluster_table(results: pd.DataFrame, by: str = "domain", learnt_only: bool = False) -> pd.DataFrame:
    """One row per run of ``results`` (a table's tidy results): the clustering statistic of its
    clients' local prompts grouped ``by`` (:func:`fedrepro.analysis.prompt_clusters.clustering_stat`);
    ``cluster_gap`` is the mean within-group minus across-group cosine similarity."""
    rows = []
    for _, r in results.iterrows():
        pc = run_prompt_clusters(RunResult(r["path"]), by=by, seed=int(r["seed"]), learnt_only=learnt_only)
        rows.append({"seed": int(r["seed"]), "row": r.get("row"), "cluster_gap": pc.stats["gap"], **pc.stats})
    return pd.DataFrame(rows)


def foreground_table(results: pd.DataFrame, gammas=(1.0, 0.9, 0.8, 0.65, 0.5), **kw) -> pd.DataFrame:
    """The plan mass on Fashion-MNIST foreground patches per (run seed, client, γ), with the trained
    prompts of each run in ``results`` (:func:`fedrepro.analysis.ot_maps.run_foreground_mass`)."""
    parts = [run_foreground_mass(RunResult(r["path"]), gammas, **kw).assign(seed=int(r["seed"]))
             for _, r in results.iterrows()]
    return pd.concat(parts, ignore_index=True)


def garment_table(results: pd.DataFrame, profile: str, **kw) -> pd.DataFrame:
    """:func:`foreground_table` where the profile's images have garment masks
    (:data:`fedrepro.papers.fedotp.notebooks.HAS_MASKS`), else no rows (the garment claims are then NOT RUN).
    The garment is the inked patches, or on cluttered images each image's own garment mask
    (:func:`fedrepro.analysis.ot_maps.run_foreground_mass` reads which from the run's config)."""
    if HAS_MASKS[profile]:
        return foreground_table(results, **kw)
    return pd.DataFrame(columns=["seed", "client", "gamma", "foreground_mass", "foreground_fraction", "mass_ceiling"])


@torch.no_grad()
def patch_vs_pooled_zero_shot(styles=("original", "noisy", "edges"), n_test: int = 1000,
                              template: str = "a photo of a {}.", gammas=(0.8,
                                                                          0.5), arch: str = "standin") -> pd.DataFrame:
    """How much class information the CLIP's feature-map tokens carry, next to its pooled embedding:
    zero-shot accuracy of the hand-written template scored (a) on the pooled image embedding (CLIP,
    CoOp, PromptFL), (b) on the mean patch similarity (FedOTP's "similarity averaging") and (c) by
    FedOTP's unbalanced-OT score at each γ (both prompt slots holding the template), on the first
    ``n_test`` test images of each Fashion-MNIST style. FedOTP scores images by patches alone
    (FedOTP (CVPR 2024) Eq. 10), so (b) and (c) bound what its prompts start from."""
    clip = clip_backbone(arch)
    rows = []
    for style in styles:
        ds = load_dataset("fashion_mnist_domains", styles=[style], half="federated")
        x, y = ds.test_x[:n_test], ds.test_y[:n_test]
        pooled, patches = normalized_tokens(clip, x)
        text = F.normalize(clip.encode_text([template.format(c.lower()) for c in ds.classes]), dim=-1)
        sim = torch.einsum("bmd,cd->bcm", patches, text)
        row = {"style": style, "pooled": _acc(pooled @ text.T, y), "mean patch": _acc(sim.mean(-1), y)}
        pair = torch.stack([sim, sim], dim=-1)
        row.update({f"uot γ={g:g}": _acc(ot_score(pair, "uot", g, 0.1), y) for g in gammas})
        rows.append(row)
    return pd.DataFrame(rows).set_index("style")


def _acc(scores: torch.Tensor, labels: torch.Tensor) -> float:
    return float(scores.argmax(1).eq(labels).float().mean())
