"""pFedCSPC (TNNLS) Table I: the datasets' sizes, ours beside the paper's, and how the profile's
partition spreads the training images over the clients."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd

from ...errors import DataNotFoundError
from ...runs.pipeline import load_cached, prepare_data
from .. import setup
from .reference import TABLE_I
from .setup import VARIANTS

COLUMNS = ("classes", "train", "test")


def _variants(profile: str) -> tuple[str, ...]:

    # Table I lists the datasets of Table II; beta0.1 re-partitions the default one.
    return tuple(v for v in VARIANTS if v != "beta0.1" and (profile == "paper" or v == "default"))


def dataset_table(profile: str, variants=None) -> pd.DataFrame:
    """One row per dataset the profile's Table II uses: the number of classes and of training and
    test images as loaded from the data root, then as the profile's config caps them (``max_train``,
    ``max_test``), beside the paper's Table I. A dataset missing from the data root keeps the paper's
    numbers and says so in ``status``, and the paper's datasets that the profile does not use follow
    with the paper's numbers alone."""
    rows = []
    for v in variants or _variants(profile):
        cfg = setup("pfedcspc", profile, v)
        d = cfg.data
        name = d.dataset_args.get("domains", [d.dataset])[0] if d.dataset == "image_folder" else d.dataset
        paper = TABLE_I.get(name, {})
        row = {"dataset": name, **{f"paper {c}": paper.get(c) for c in COLUMNS}}
        try:
            ds = load_cached(d.dataset, json.dumps(d.dataset_args, sort_keys=True))
        except DataNotFoundError:
            rows.append({**row, "status": "not under the data root (docs/data.md)"})
            continue
        row.update(classes=len(ds.classes), train=len(ds.train_y), test=len(ds.test_y),
                   **{"used train": min(len(ds.train_y), d.max_train or len(ds.train_y)),
                      "used test": min(len(ds.test_y), d.max_test or len(ds.test_y)), "status": "loaded"})
        rows.append(row)
    seen = {r["dataset"] for r in rows}
    rows += [{"dataset": name, **{f"paper {c}": n[c] for c in COLUMNS}, "status": "the paper's numbers only"}
             for name, n in TABLE_I.items() if name not in seen]
    order = ["classes", "train", "test", "used train", "used test", *(f"paper {c}" for c in COLUMNS), "status"]
    table = pd.DataFrame(rows).set_index("dataset").reindex(columns=order)
    return table.astype({c: "Int64" for c in order if c != "status"})


def client_table(profile: str, variant: str = "default", seed: int = 0) -> pd.DataFrame:
    """Per client: training and test images and the number of classes it holds, under the
    profile's Dirichlet partition (pFedCSPC (TNNLS) §V-A1: test splits shaped like the train splits)."""
    ds, part = prepare_data(setup("pfedcspc", profile, variant, seed=seed))
    y = ds.train_y.numpy()
    return pd.DataFrame({
        "train": [len(ix) for ix in part.train],
        "test": [len(ix) for ix in part.test],
        "classes": [len(np.unique(y[ix])) for ix in part.train],
    }, index=pd.RangeIndex(len(part.train), name="client"))
