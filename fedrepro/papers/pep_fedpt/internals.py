"""PEP-FedPT's figures that look inside trained runs: the soft weights per class (Fig. 8) as the
table its claim reads."""
from __future__ import annotations

import numpy as np
import pandas as pd

from ...analysis.ccmp import soft_weights_by_class
from ...runs.train import restore


def soft_weight_table(results: pd.DataFrame, row: str = "pep_fedpt") -> tuple[pd.DataFrame, dict[int, np.ndarray]]:
    """For every seed's ``row`` run: the class-averaged soft weights at each CCMP block
    (:func:`~fedrepro.analysis.ccmp.soft_weights_by_class` on the participating clients' test
    splits). Returns the tidy table the Fig. 8 claim reads (``seed``, ``block``, ``true_class``,
    ``peak_class``, ``peak_weight``, ``true_weight``; and ``peak_class_similarity``, the peak of the
    similarity term alone, without the client's prior) and the raw [L, C, C] arrays by seed (with the
    prior, as at inference)."""
    rows, raw = [], {}
    for _, r in results[results["row"] == row].sort_values("seed").iterrows():
        method, clients, state = restore(r["path"])
        part = [c for c in clients if not c.held_out]
        w = soft_weights_by_class(method, state["shared"], part)
        # The prior alone puts a client's own classes first, and its test images come from those
        # classes, so the claim reads the similarity term without it (fedrepro.papers.pep_fedpt.claims).
        sim = soft_weights_by_class(method, state["shared"], part, prior=False)
        raw[int(r["seed"])] = w
        for j, block in enumerate(method.blocks):
            for c in range(w.shape[1]):
                if np.isnan(w[j, c]).any():
                    continue
                rows.append({"seed": int(r["seed"]), "block": block, "true_class": c,
                             "peak_class": int(np.argmax(w[j, c])), "peak_weight": float(w[j, c].max()),
                             "true_weight": float(w[j, c, c]),
                             "peak_class_similarity": int(np.argmax(sim[j, c]))})
    return pd.DataFrame(rows), raw
