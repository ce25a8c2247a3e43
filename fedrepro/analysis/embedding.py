"""Feature extraction from trained runs, and the t-SNE views of FedPFT Figures 4 and 5.

FedPFT (ICLR) §4.4, Fig. 4 (arXiv Fig. 2): t-SNE of all clients' *test* features, colour = class,
marker = client (one panel per method); §4.6, Fig. 5 (arXiv Fig. 3): the same for FedPFT+Con's
two prompt sets, with large markers at each client's class centroids. The paper does not say
which vector Fig. 4 plots: ``on="features"`` is the classifier's input (f' for FedPFT, the φ
output for the baselines) and ``on="phi"`` the raw extractor output; plot both when unsure.

Every function works through ``Method.personalized_model(shared, state)``, so it applies to any
method, FedPFT included, without special cases.
"""
from __future__ import annotations

import hashlib
from typing import Sequence

import numpy as np
import torch
from torch import nn

from ..env.figure_check import OUTLIER_FACTOR, keyed_by, stretch
from ..errors import ConfigError
from ..fl.client_data import ClientData

SPLITS = ("train", "test")
# The engine evaluates in batches of 500 (fl/local.py::evaluate_model); extracting with the same
# batch size makes the probe's Origin bit-identical to the run's own test accuracy.
EVAL_BATCH = 500


def analysis_generator(seed: int, tag: str, *keys: int) -> torch.Generator:
    """A CPU generator for one analysis draw, from (seed, tag, keys): independent of call order.

    Deliberately separate from :func:`fedrepro.fl.seeding.derive_seed`, whose purposes belong to the
    training run: an analysis must never replay a stream the run itself consumed.
    """
    blob = "/".join(["fedrepro.analysis", tag, str(int(seed)), *map(str, map(int, keys))]).encode()
    return torch.Generator().manual_seed(int.from_bytes(hashlib.sha256(blob).digest()[:8], "little") >> 1)


def feature_module(model: nn.Module, on: str = "features") -> nn.Module:
    """The sub-module of a personalised model that produces the vectors to analyse.

    ``"features"``: the classifier's input (the interface contract). ``"phi"``: the raw extractor;
    a model that exposes no separate ``phi`` (every baseline, where φ *is* the classifier input)
    falls back to ``features``. Any other name must be an attribute of the model mapping x to
    ``[B, d]`` (e.g. a second prompt path a method chooses to expose).
    """
    if not isinstance(on, str) or not on:
        raise ConfigError(f"on={on!r}; valid: 'features', 'phi' or another attribute of the personalised model")
    mod = getattr(model, on, None)
    if mod is None and on == "phi":
        mod = getattr(model, "features", None)
    if mod is None or not callable(mod):
        raise ConfigError(f"on={on!r}: the personalised model ({type(model).__name__}) has no callable "
                          f"attribute {on!r}; valid: 'features', 'phi'")
    return mod


@torch.no_grad()
def client_features(model: nn.Module, data: ClientData, split: str = "test", on: str = "features",
                    batch_size: int = EVAL_BATCH) -> tuple[torch.Tensor, torch.Tensor]:
    """``(feats [n, d], labels [n])`` of one client's split, model in eval mode (BN running stats).

    Unshuffled order, no gradients; the model's train/eval flag is restored afterwards, so the
    method's scratch module is left as it was found.
    """
    if split not in SPLITS:
        raise ConfigError(f"split={split!r}; valid: {', '.join(SPLITS)}")
    mod = feature_module(model, on)
    batches = data.test_batches(batch_size) if split == "test" else data.eval_train_batches(batch_size)
    was_training = model.training
    model.eval()
    try:
        feats, labels = [], []
        for x, y in batches:
            feats.append(mod(x).flatten(1))
            labels.append(y)
    finally:
        model.train(was_training)
    if not feats:
        return torch.zeros(0, 0, device=data.test_y.device), torch.zeros(0, dtype=torch.long, device=data.test_y.device)
    return torch.cat(feats), torch.cat(labels)


def extract_features_state(method, clients: Sequence[ClientData], state: dict, split: str = "test",
                           max_per_client: int | None = None, on: str = "features", seed: int = 0,
                           client_ids: Sequence[int] | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`extract_features` on an explicit ``(method, clients, state)`` (what ``restore`` gives).

    ``max_per_client`` keeps a seeded random subset of each client's split (in original order), so a
    capped plot does not show only the first classes of a class-sorted split.
    """
    if max_per_client is not None and (not isinstance(max_per_client, int) or max_per_client < 1):
        raise ConfigError(f"max_per_client={max_per_client!r}; valid: None or an integer >= 1")
    ids = [c.cid for c in clients] if client_ids is None else [int(c) for c in client_ids]
    by_id = {c.cid: c for c in clients}
    feats, labels, owners = [], [], []
    for cid in ids:
        if cid not in by_id:
            raise ConfigError(f"client_ids contains {cid}; valid: {sorted(by_id)}")
        model = method.personalized_model(state["shared"], state["client_states"][cid])
        f, y = client_features(model, by_id[cid], split, on)
        if max_per_client is not None and len(y) > max_per_client:
            keep = torch.randperm(len(y), generator=analysis_generator(seed, "tsne-subset", cid))[:max_per_client]
            keep = keep.sort().values.to(y.device)
            f, y = f[keep], y[keep]
        if len(y):
            feats.append(f.float().cpu().numpy())
            labels.append(y.cpu().numpy())
            owners.append(np.full(len(y), cid, dtype=np.int64))
    if not feats:
        return np.zeros((0, 0), dtype=np.float32), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    return np.concatenate(feats), np.concatenate(labels).astype(np.int64), np.concatenate(owners)


def extract_features(result, split: str = "test", max_per_client: int | None = None, on: str = "features",
                     device: str = "auto", seed: int = 0,
                     client_ids: Sequence[int] | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Features of every client's ``split`` under its **final-round** personalised model.

    Returns ``(feats [N, d] float32, labels [N], client_ids [N])`` as numpy arrays, clients in id
    order (held-out clients included; pass ``client_ids`` to choose).
    """
    from ..runs.train import restore

    method, clients, state = restore(result, device)
    return extract_features_state(method, clients, state, split, max_per_client, on, seed, client_ids)


def tsne_embed(feats: np.ndarray, seed: int = 0, perplexity: float = 30.0) -> np.ndarray:
    """2-d t-SNE (scikit-learn, PCA init, ``random_state=seed``) of ``feats [N, d]`` -> ``[N, 2]``.

    The perplexity is capped at ``(N - 1) / 3`` (the usual 3·perplexity < N rule of thumb;
    scikit-learn itself only requires perplexity < N) so that small smoke-profile sets still embed.
    """
    from sklearn.manifold import TSNE

    x = np.asarray(feats, dtype=np.float32)
    if x.ndim != 2 or len(x) < 4:
        raise ConfigError(f"feats must be a [N, d] array with N >= 4, got shape {x.shape}")
    if not perplexity > 0:
        raise ConfigError(f"perplexity={perplexity!r}; valid: a number > 0")
    perp = float(min(perplexity, (len(x) - 1) / 3.0))
    tsne = TSNE(n_components=2, perplexity=perp, init="pca", learning_rate="auto", random_state=int(seed))
    return tsne.fit_transform(x).astype(np.float32)


_MARKERS = ("o", "s", "^", "v", "D", "P", "X", "*", "<", ">", "p", "h")


def palette(n: int):
    from ..env.style import categorical

    return categorical(n)


def _class_namer(class_names: Sequence[str] | None):
    return (lambda c: str(class_names[c])) if class_names is not None else (lambda c: str(c))


def _client_label(k) -> str:
    return f"client {k}"


def tsne_legend(target, labels: np.ndarray, clients: np.ndarray, class_names: Sequence[str] | None = None,
                markers: bool = True):
    """The keys of :func:`plot_tsne`'s class panel, outside on the right of ``target`` (an Axes, or
    a Figure whose panels were drawn with ``legend=False``): a legend of the classes' colours and,
    with ``markers``, one of the clients' markers (in grey: their colour is their points' class).
    Each names at most 20 categories (past that a legend is a wall of text). Returns the legends."""
    import matplotlib.pyplot as plt

    labels, clients = np.asarray(labels), np.asarray(clients)
    classes, owners = np.unique(labels), np.unique(clients)
    ccol = dict(zip(classes.tolist(), palette(len(classes))))
    name = _class_namer(class_names)
    put = target.legend
    out = []
    if len(classes) <= 20:
        handles = [plt.Line2D([], [], linestyle="", marker="o", color=ccol[c], label=name(c)) for c in classes.tolist()]
        out.append(put(handles=handles, title="class (colour)", loc="upper left", bbox_to_anchor=(1.01, 1.0),
                       frameon=False))
    if markers and len(owners) <= 20:
        if out and hasattr(target, "get_legend"):  # an Axes (a Figure keeps every legend)
            target.add_artist(out[0])  # an axes shows its last legend only, unless the first is added back
        handles = [plt.Line2D([], [], linestyle="", marker=_MARKERS[i % len(_MARKERS)], color="#555555",
                              label=_client_label(k)) for i, k in enumerate(owners.tolist())]
        out.append(put(handles=handles, title="client (marker)", loc="lower left", bbox_to_anchor=(1.01, 0.0),
                       frameon=False))
    return out


def _note_tsne_outlier(ax, emb: np.ndarray) -> None:
    """A note in the corner where one point alone stretches an axis of the panel (t-SNE's distances
    between far clusters mean little, but a reader should not hunt for the lone point)."""
    if len(emb) >= 4 and max(stretch(list(emb[:, 0])), stretch(list(emb[:, 1]))) >= OUTLIER_FACTOR:
        ax.text(0.01, 0.01, "a far outlier stretches this panel", transform=ax.transAxes,
                fontsize=8, va="bottom", ha="left", color="#333333")


def plot_tsne(emb: np.ndarray, labels: np.ndarray, clients: np.ndarray, axes=None,
              class_names: Sequence[str] | None = None, centroids: bool = False, size: float = 6.0,
              title: str | None = None, legend: bool = True):
    """Two panels: (left) colour = class, marker = client, as in Fig. 4; (right) colour = client.

    ``centroids`` adds large markers at each (client, class) centroid on the left panel, as in
    Fig. 5. ``axes`` may be two existing Axes, or one (the left panel alone, as the paper draws
    each method); otherwise a new figure is made. ``legend``: the keys beside the panels (a class
    legend, a client legend); without, the caller draws them once for several panels with
    :func:`tsne_legend`. Every set of points is keyed to the class and client entries that explain
    it (:func:`fedrepro.env.figure_check.keyed_by`). Returns the Figure.
    """
    import matplotlib.pyplot as plt

    emb, labels, clients = np.asarray(emb), np.asarray(labels), np.asarray(clients)
    if emb.ndim != 2 or emb.shape[1] != 2 or not len(emb) == len(labels) == len(clients):
        raise ConfigError(f"emb must be [N, 2] with N labels and N client ids; got {emb.shape}, "
                          f"{labels.shape}, {clients.shape}")
    if axes is None:
        fig, axes = plt.subplots(1, 2, figsize=(10, 4.5))
    else:
        axes = list(axes) if isinstance(axes, (list, tuple, np.ndarray)) else [axes]
        if len(axes) not in (1, 2):
            raise ConfigError(f"axes must be one or two Axes, got {len(axes)}")
        fig = axes[0].figure
    ax_cls, ax_cli = axes if len(axes) == 2 else (axes[0], None)
    classes, owners = np.unique(labels), np.unique(clients)
    ccol = dict(zip(classes.tolist(), palette(len(classes))))
    kcol = dict(zip(owners.tolist(), palette(len(owners))))
    name = _class_namer(class_names)
    for i, k in enumerate(owners.tolist()):
        mine = clients == k
        marker = _MARKERS[i % len(_MARKERS)]
        keyed_by(ax_cls.scatter(emb[mine, 0], emb[mine, 1], c=[ccol[c] for c in labels[mine].tolist()], s=size,
                                marker=marker, linewidths=0, alpha=0.8),
                 *[name(c) for c in np.unique(labels[mine]).tolist()], _client_label(k))
        if ax_cli is not None:
            ax_cli.scatter(emb[mine, 0], emb[mine, 1], color=kcol[k], s=size, marker=marker, linewidths=0,
                           alpha=0.8, label=_client_label(k))
        if centroids:
            for c in np.unique(labels[mine]).tolist():
                pts = emb[mine & (labels == c)]
                keyed_by(ax_cls.scatter(pts[:, 0].mean(), pts[:, 1].mean(), color=ccol[c], s=12 * size, marker=marker,
                                        edgecolors="black", linewidths=0.6), name(c), _client_label(k))
    if legend:
        # The client panel's legend names each client's marker; alone, the class panel names them itself.
        tsne_legend(ax_cls, labels, clients, class_names, markers=ax_cli is None)
        if ax_cli is not None and len(owners) <= 20:
            ax_cli.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, markerscale=1.5,
                          title="client")
    ax_cls.set_title("coloured by class (marker = client)", fontsize=9)
    if ax_cli is not None:
        ax_cli.set_title("coloured by client", fontsize=9)
    for ax in axes:
        ax.set_xticks([])
        ax.set_yticks([])
        _note_tsne_outlier(ax, emb)
    if title:
        fig.suptitle(title)
    return fig


def plot_label_panel(labels: np.ndarray, clients: np.ndarray, ax=None, class_names: Sequence[str] | None = None,
                     size: float = 250.0):
    """The data panel of FedPFT (ICLR) Fig. 4(a): one row per client, one column per class, a bubble
    per (client, class) sized by the count of the images embedded, drawn in the client's t-SNE marker
    (the same marker order as :func:`plot_tsne`) and the class's colour, so that the other panels'
    markers and colours read off it (:func:`tsne_legend` keys them). ``size`` is the largest bubble,
    in points². Returns the Axes."""
    import matplotlib.pyplot as plt

    labels, clients = np.asarray(labels), np.asarray(clients)
    if labels.ndim != 1 or labels.shape != clients.shape or not len(labels):
        raise ConfigError(f"labels and clients must be two equal, non-empty 1-d arrays; got {labels.shape}, "
                          f"{clients.shape}")
    if not size > 0:
        raise ConfigError(f"size={size!r}; valid: a number > 0")
    if ax is None:
        _, ax = plt.subplots(figsize=(5, 4.5))
    classes, owners = np.unique(labels), np.unique(clients)
    ccol = dict(zip(classes.tolist(), palette(len(classes))))
    counts = {(k, c): int(((clients == k) & (labels == c)).sum()) for k in owners.tolist() for c in classes.tolist()}
    top = max(counts.values())
    name = _class_namer(class_names)
    for i, k in enumerate(owners.tolist()):
        for c in classes.tolist():
            if counts[(k, c)]:
                # Keyed to the class (colour) and client (marker) entries of tsne_legend.
                keyed_by(ax.scatter(c, i, s=size * counts[(k, c)] / top, color=ccol[c],
                                    marker=_MARKERS[i % len(_MARKERS)], edgecolors="black", linewidths=0.4),
                         name(c), _client_label(k))
    ax.set_xticks(classes.tolist())
    ax.set_xticklabels([name(c) for c in classes.tolist()], rotation=90 if class_names else 0)
    ax.set_yticks(range(len(owners)))
    ax.set_yticklabels([_client_label(k) for k in owners.tolist()])
    ax.set_xlabel("class")
    ax.set_title("(a) test images per client and class (marker = client)", fontsize=9)
    ax.invert_yaxis()
    ax.grid(alpha=0.2)
    return ax
