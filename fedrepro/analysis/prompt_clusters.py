"""Do clients with similar data learn similar local prompts? FedOTP (CVPR 2024) Fig. A5.

Fig. A5 flattens each client's local prompt (L × 512 context vectors), embeds the clients with
t-SNE and colours them by the coarse label their data came from: clients sharing a coarse label sit
together. Here, for any finished run whose clients keep a local context tensor (FedOTP, local CoOp):

- :func:`local_prompts`: each client's local prompt, flattened;
- :func:`client_groups`: a group label per client: its class set, or its domain;
- :func:`cosine_matrix`, :func:`prompt_tsne` (scikit-learn, seeded, perplexity clipped to n - 1);
- :func:`clustering_stat`: the claim as numbers: mean cosine similarity of local prompts between
  clients of the same group minus between clients of different groups (``gap`` > 0 when they
  cluster), and the silhouette score of the groups under cosine distance;
  :func:`class_overlap_correlation` asks the same where class sets overlap partly;
- :func:`prompt_clusters` / :func:`run_prompt_clusters` gather all of it, :func:`plot_prompt_clusters`
  draws the similarity matrix (clients ordered by group) beside the t-SNE.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..env.figure_check import keyed_by
from ..errors import ConfigError
from ..fl.client_data import ClientData
from ..runs.train import restore
from ..fl.engine import init_state
from .embedding import palette


def local_prompts(client_states: Sequence[dict], key: str = "ctx") -> np.ndarray:
    """[K, D]: each client's local context tensor (``state[key]``, e.g. FedOTP's [1, L, width]) flattened."""
    missing = [i for i, s in enumerate(client_states) if key not in s]
    if missing:
        raise ConfigError(f"clients {missing[:10]} keep no local {key!r}: the run's method has no local prompt "
                          "(FedOTP with prompts='global_only', PromptFL?)")
    return np.stack([s[key].detach().double().cpu().reshape(-1).numpy() for s in client_states])


def client_groups(clients: Sequence[ClientData], by: str = "classes") -> tuple[np.ndarray, list[str]]:
    """(group id per client [K], group names): ``by="classes"`` groups clients holding the same set
    of training classes (a pathological or coarse-label split), ``by="domain"`` by the client's
    domain (feature-shift partitions)."""
    if by == "classes":
        keys = [",".join(map(str, sorted(set(c.train_y.cpu().tolist())))) for c in clients]
    elif by == "domain":
        if any(c.domain is None for c in clients):
            raise ConfigError("by='domain' needs a partition that assigns each client a domain "
                              "(ClientData.domain is None); use by='classes'")
        keys = [str(c.domain) for c in clients]
    else:
        raise ConfigError(f"by={by!r}; valid: 'classes', 'domain'")
    names = list(dict.fromkeys(keys))  # in order of first appearance
    return np.array([names.index(k) for k in keys], dtype=np.int64), names


def cosine_matrix(vectors: np.ndarray) -> np.ndarray:
    """[K, K] cosine similarity between the rows of ``vectors`` [K, D]."""
    v = np.asarray(vectors, dtype=np.float64)
    if v.ndim != 2 or len(v) < 1:
        raise ConfigError(f"vectors must be [K, D] with K >= 1, got shape {v.shape}")
    v = v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)
    return v @ v.T


def clustering_stat(vectors: np.ndarray, groups: Sequence[int]) -> dict[str, float]:
    """How much more alike the local prompts of same-group clients are than those of other groups.

    ``within``: mean cosine similarity over pairs of distinct clients in the same group; ``between``:
    over pairs in different groups; ``gap = within - between`` (NaN when either kind of pair is
    missing); ``silhouette``: scikit-learn's silhouette score under cosine distance (NaN unless
    2 <= number of groups <= K - 1).
    """
    from sklearn.metrics import silhouette_score

    sim = cosine_matrix(vectors)
    g = np.asarray(groups)
    if g.shape != (len(sim),):
        raise ConfigError(f"groups must give one label per client ({len(sim)}), got shape {g.shape}")
    same = g[:, None] == g[None, :]
    off = ~np.eye(len(g), dtype=bool)
    within = sim[same & off].mean() if (same & off).any() else float("nan")
    between = sim[~same].mean() if (~same).any() else float("nan")
    n_groups = len(np.unique(g))
    dist = np.clip(1.0 - sim, 0.0, None)
    np.fill_diagonal(dist, 0.0)  # rounding leaves 1 - cos(v, v) at ~1e-16, which scikit-learn rejects
    sil = (float(silhouette_score(dist, g, metric="precomputed")) if 2 <= n_groups <= len(g) - 1
           else float("nan"))
    return {"within": float(within), "between": float(between), "gap": float(within - between),
            "silhouette": sil, "n_groups": n_groups}


def class_overlap_correlation(vectors: np.ndarray, clients: Sequence[ClientData]) -> float:
    """Spearman correlation, over pairs of clients, between the overlap of their training class sets
    (Jaccard) and the cosine similarity of their local prompts: the same question as
    :func:`clustering_stat` for splits where class sets overlap partly instead of repeating
    (a pathological split with random class combinations). NaN when the overlaps are all equal."""
    from scipy.stats import spearmanr

    sim = cosine_matrix(vectors)
    if len(clients) != len(sim):
        raise ConfigError(f"{len(clients)} clients for {len(sim)} prompt vectors")
    sets = [set(c.train_y.cpu().tolist()) for c in clients]
    iu = np.triu_indices(len(sets), k=1)
    jac = np.array([len(sets[i] & sets[j]) / max(len(sets[i] | sets[j]), 1) for i, j in zip(*iu)])
    if len(jac) < 2 or np.all(jac == jac[0]):
        return float("nan")
    return float(spearmanr(jac, sim[iu]).statistic)


def prompt_tsne(vectors: np.ndarray, seed: int = 0, perplexity: float = 30.0) -> np.ndarray:
    """[K, 2] t-SNE of the clients' prompts (scikit-learn, PCA init, ``random_state=seed``).

    Fig. A5 embeds 100 clients; a run with a handful of clients gets its perplexity clipped to
    K - 1 (scikit-learn needs perplexity < K)."""
    from sklearn.manifold import TSNE

    x = np.asarray(vectors, dtype=np.float64)
    if x.ndim != 2 or len(x) < 3:
        raise ConfigError(f"vectors must be [K, D] with K >= 3 clients, got shape {x.shape}")
    if not perplexity > 0:
        raise ConfigError(f"perplexity={perplexity!r}; valid: a number > 0")
    perp = float(min(perplexity, len(x) - 1))
    tsne = TSNE(n_components=2, perplexity=perp, init="pca", learning_rate="auto", random_state=int(seed))
    return tsne.fit_transform(x).astype(np.float64)


@dataclass
class PromptClusters:
    """Fig. A5's data: per client (row order ``clients``), its group, the prompt similarity matrix,
    the t-SNE embedding and the clustering statistic."""

    clients: np.ndarray  # [K] client ids
    groups: np.ndarray  # [K] group ids
    group_names: list[str]
    cosine: np.ndarray  # [K, K]
    embedding: np.ndarray  # [K, 2]
    stats: dict[str, float]
    by: str = "classes"


def prompt_clusters(client_states: Sequence[dict], clients: Sequence[ClientData], by: str = "classes",
                    seed: int = 0, perplexity: float = 30.0, key: str = "ctx") -> PromptClusters:
    """Local prompts of ``clients`` (``client_states`` indexed by client id), grouped ``by`` their
    class set or domain: similarity matrix, t-SNE, :func:`clustering_stat` and (as
    ``stats["overlap_spearman"]``) :func:`class_overlap_correlation`."""
    vectors = local_prompts([client_states[c.cid] for c in clients], key)
    groups, names = client_groups(clients, by)
    return PromptClusters(clients=np.array([c.cid for c in clients]), groups=groups, group_names=names,
                          cosine=cosine_matrix(vectors), embedding=prompt_tsne(vectors, seed, perplexity),
                          stats={**clustering_stat(vectors, groups),
                                 "overlap_spearman": class_overlap_correlation(vectors, clients)}, by=by)


def run_prompt_clusters(result, by: str = "classes", seed: int = 0, perplexity: float = 30.0,
                        learnt_only: bool = False) -> PromptClusters:
    """:func:`prompt_clusters` of the participating clients of a finished run (a RunResult or its
    folder), with the clients' final local states (``restore``).

    ``learnt_only`` subtracts each client's initial local prompt (re-drawn as the run drew it) and
    clusters what training added. Each client's prompt starts from its own random draw, and after a
    few rounds at a small learning rate that draw is most of the flattened vector, which hides the
    grouping Fig. A5 looks for (the paper's runs are long enough for the raw prompts to show it).
    """
    method, clients, state = restore(result)
    part = [c for c in clients if not c.held_out]
    states = state["client_states"]
    if learnt_only:
        start = init_state(method, len(states), method.ctx.cfg.seed).client_states
        states = [{"ctx": s["ctx"] - s0["ctx"]} if "ctx" in s and "ctx" in s0 else s for s, s0 in zip(states, start)]
    return prompt_clusters(states, part, by, seed, perplexity)


def plot_prompt_clusters(pc: PromptClusters, size: float = 4.0, title: str | None = None):
    """Two panels: the clients' local-prompt cosine similarity (clients ordered by group, group
    boundaries marked, the diagonal left blank) and the t-SNE coloured by group (FedOTP Fig. A5).
    Returns the Figure."""
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    order = np.argsort(pc.groups, kind="stable")
    fig, (ax_m, ax_t) = plt.subplots(1, 2, figsize=(2.2 * size, size))
    mat = pc.cosine[np.ix_(order, order)].copy()
    np.fill_diagonal(mat, np.nan)  # the self-similarities of 1 would set the colour scale
    im = ax_m.imshow(mat, cmap="viridis")
    fig.colorbar(im, ax=ax_m, fraction=0.046, pad=0.04)
    edges = np.flatnonzero(np.diff(pc.groups[order])) + 0.5
    boundary = f"{pc.by} boundary"
    for e in edges:
        keyed_by(ax_m.axhline(e, color="white", linewidth=0.8), boundary)
        keyed_by(ax_m.axvline(e, color="white", linewidth=0.8), boundary)
    if len(edges):
        ax_m.legend(handles=[Line2D([], [], color="black", linewidth=0.8, label=boundary)], loc="upper center",
                    bbox_to_anchor=(0.5, -0.12), frameon=False)
    if len(order) <= 20:  # more client ids than that do not fit at a legible size
        ticks = [str(c) for c in pc.clients[order]]
        ax_m.set_xticks(range(len(order)), ticks)
        ax_m.set_yticks(range(len(order)), ticks)
    else:
        ax_m.set_xticks([])
        ax_m.set_yticks([])
    ax_m.set_xlabel("client (by group)" if len(order) > 20 else "")
    ax_m.set_title("local-prompt cosine similarity (by group)", fontsize=9)
    colors = palette(len(pc.group_names))
    for gid, name in enumerate(pc.group_names):
        mine = pc.groups == gid
        ax_t.scatter(pc.embedding[mine, 0], pc.embedding[mine, 1], color=colors[gid], s=30,
                     label=f"{pc.by} {name}" if len(pc.group_names) <= 20 else None)
    if len(pc.group_names) <= 20:
        ax_t.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    ax_t.set_xticks([])
    ax_t.set_yticks([])
    s = pc.stats
    ax_t.set_title(f"t-SNE of local prompts\nwithin − between cos = {s['gap']:.3f}, "
                   f"silhouette = {s['silhouette']:.2f}", fontsize=8)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig


__all__ = ["PromptClusters", "class_overlap_correlation", "client_groups", "clustering_stat", "cosine_matrix",
           "local_prompts", "plot_prompt_clusters", "prompt_clusters", "prompt_tsne", "run_prompt_clusters"]
