"""Whether clients' features of one class land together: label-histogram similarity between
clients, and the cross-client alignment ratio of a feature set."""
from __future__ import annotations

import torch


def label_similarity(clients) -> torch.Tensor:
    """Cosine similarity of the clients' training label histograms (what personalised
    aggregation weights such as pFedCSPC's PMI should follow)."""
    c = int(max(int(cl.train_y.max()) for cl in clients if cl.num_train)) + 1
    h = torch.stack([torch.bincount(cl.train_y.cpu(), minlength=c).double() for cl in clients])
    h = torch.nn.functional.normalize(h, dim=1)
    return h @ h.t()


def alignment_ratio(feats, labels, clients) -> float:
    """Mean distance between same-class features of *different* clients over the mean distance
    between features of different classes (our measure of the cross-client alignment that
    pFedCSPC (TNNLS) Figs. 7–8 show by t-SNE). Below 1: a class from all
    clients lands together; FedAvg's local drift should show as a higher ratio than pFedCSPC's.

    Features are L2-normalised first, so models whose features differ in scale compare on
    direction alone (the classifier's input is compared by angle in PTA's node loss, too)."""
    import numpy as np

    x = np.asarray(feats, dtype=np.float64)
    x = x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
    y, c = np.asarray(labels), np.asarray(clients)
    d = np.sqrt(np.maximum(2.0 - 2.0 * x @ x.T, 0.0))
    same_y, same_c = y[:, None] == y[None, :], c[:, None] == c[None, :]
    cross = same_y & ~same_c
    if not cross.any() or same_y.all():
        raise ValueError("alignment_ratio needs a class held by two clients and two classes")
    return float(d[cross].mean() / d[~same_y].mean())
