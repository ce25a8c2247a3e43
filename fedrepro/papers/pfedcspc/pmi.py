"""pFedCSPC's PMI analyses (pFedCSPC (TNNLS) Fig. 10) on a finished run's final state.

- :func:`pmi_start`: per client, the local test accuracy of the PMI initial model M_k^p
  (personalised encoder, calibrated global head) and of the global model, both *before* any local
  training (Fig. 10a);
- :func:`pmi_finetune`: per client, E epochs of local CE training from each init, with the
  per-epoch training loss and the final local test accuracy (Fig. 10b, c);
- :func:`pmi_weight_correlation`: how closely the final round's PMI weights follow the similarity
  of the clients' label histograms (Fig. 9);
- :func:`pmi_start_table`: all three summarised per run of a ``run_grid`` table, the input of the
  ``pfedcspc.pmi_*`` claims.

Both initial models are scored by their network prediction (no knowledge-based fusion), so the
comparison isolates the encoder PMI changes.
"""
from __future__ import annotations

import pandas as pd
import torch

from ...analysis.alignment import label_similarity
from ...analysis.embedding import analysis_generator
from ...fl.local import evaluate_model, make_sgd, train_epochs


def _inits(method, shared: dict, cid: int) -> dict[str, dict]:
    return {"pmi": method.initial_model(shared, cid), "global": method._sub(shared, "g.")}


def pmi_start(result) -> pd.DataFrame:
    """One row per client: ``pmi_init_acc``, ``global_init_acc`` (local test, before training)."""
    from ...experiment import restore

    method, clients, state = restore(result, "cpu")
    shared = state["shared"]
    rows = []
    for c in clients:
        accs = {k: evaluate_model(method._load(sd), c).acc for k, sd in _inits(method, shared, c.cid).items()}
        rows.append({"client": c.cid, "pmi_init_acc": accs["pmi"], "global_init_acc": accs["global"],
                     "n_test": c.num_test})
    return pd.DataFrame(rows)


def pmi_finetune(result, epochs: int | None = None, seed: int = 0) -> pd.DataFrame:
    """One row per (client, init, epoch): the epoch's mean training loss and, after the epoch, the
    local test accuracy. Training follows the run's local optimiser (``train.*``)."""
    from ...experiment import restore

    method, clients, state = restore(result, "cpu")
    t = method.ctx.cfg.train
    epochs = t.local_epochs if epochs is None else epochs
    shared = state["shared"]
    rows = []
    for c in clients:
        for name, sd in _inits(method, shared, c.cid).items():
            net = method._load(sd)
            opt = make_sgd(net.parameters(), t.lr, t.momentum, t.weight_decay)
            gen = analysis_generator(seed, "pmi_finetune", c.cid)
            for e in range(1, epochs + 1):
                stats = train_epochs(net, c, opt, 1, t.batch_size, gen)
                rows.append({"client": c.cid, "init": name, "epoch": e, "train_loss": stats.loss,
                             "test_acc": evaluate_model(net, c).acc})
    return pd.DataFrame(rows)


def pmi_weight_correlation(result) -> float:
    """Pearson correlation, over ordered client pairs k ≠ k', of the final round's PMI weight
    p_k^k' with the cosine similarity of the two clients' label histograms."""
    from ...experiment import restore

    _, clients, state = restore(result, "cpu")
    w = state["server_state"]["pmi_weights"].double()
    order = state["server_state"]["pmi_clients"].tolist()
    sim = label_similarity(clients)[order][:, order]
    off = ~torch.eye(len(order), dtype=torch.bool)
    return float(torch.corrcoef(torch.stack([w[off], sim[off]]))[0, 1])


def pmi_start_table(table: pd.DataFrame) -> pd.DataFrame:
    """Per run of a grid table (pFedCSPC runs): mean over clients of both inits' accuracy, the
    share of clients for which PMI starts higher, both inits' mean training loss in the first
    local epoch (Fig. 10c's start), and the PMI weights' correlation with label similarity."""
    rows = []
    for _, row in table.iterrows():
        df = pmi_start(row["path"])
        first = pmi_finetune(row["path"], epochs=1).groupby("init")["train_loss"].mean()
        rows.append({**{k: row[k] for k in table.columns if k not in ("path",)},
                     "pmi_init_acc": float(df["pmi_init_acc"].mean()),
                     "global_init_acc": float(df["global_init_acc"].mean()),
                     "pmi_better_share": float((df["pmi_init_acc"] > df["global_init_acc"]).mean()),
                     "pmi_first_epoch_loss": float(first["pmi"]), "global_first_epoch_loss": float(first["global"]),
                     "weight_label_corr": pmi_weight_correlation(row["path"]),
                     "path": row["path"]})
    return pd.DataFrame(rows)
