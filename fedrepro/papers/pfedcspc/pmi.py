"""pFedCSPC's PMI analyses (pFedCSPC (TNNLS) Fig. 10) on a finished run's final state.

- :func:`pmi_start`: per client, the local test accuracy of the PMI initial model M_k^p
  (personalised encoder, calibrated global head) and of the global model, both *before* any local
  training (Fig. 10a);
- :func:`pmi_finetune`: per client, E epochs of local CE training from each init, with the
  per-epoch training loss and the final local test accuracy (Fig. 10b, c);
- :func:`pmi_weight_stats`: how closely the final round's PMI weights follow the similarity of the
  clients' label histograms (Fig. 9), and how much of them is which client they come from;
- :func:`pmi_start_table`: all three summarised per run of a ``run_grid`` table, the input of the
  ``pfedcspc.pmi_*`` claims;
- :func:`select_tau_p`: the PMI temperature chosen on the validation sweep (rule: :data:`TAU_P_RULE`),
  :func:`tau_p_sweep`: the sweep summarised per τ_p.

Both initial models are scored by their network prediction (no knowledge-based fusion), so the
comparison isolates the encoder PMI changes.
"""
from __future__ import annotations

import pandas as pd
import torch

from ...analysis.alignment import label_similarity
from ...analysis.embedding import analysis_generator
from ...fl.local import evaluate_model, make_sgd, train_epochs
from ...runs.train import restore
from ...methods.pfedcspc import PFedCSPCParams
from .. import setup


def _inits(method, shared: dict, cid: int) -> dict[str, dict]:
    return {"pmi": method.initial_model(shared, cid), "global": method._sub(shared, "g.")}


def pmi_start(result) -> pd.DataFrame:
    """One row per client: ``pmi_init_acc``, ``global_init_acc`` (local test, before training)."""
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


def pmi_weight_stats(result) -> dict[str, float]:
    """Two readings of the final round's PMI weights p_k^k' over ordered client pairs k ≠ k':

    - ``weight_label_corr``: their Pearson correlation with the cosine similarity of the two
      clients' label histograms (what Fig. 9 shows);
    - ``weight_source_share``: the share of their variance that lies between source clients k'
      (the column means): near 1 when a client's head draws the same weight from every client,
      whoever k is, so the weights rank heads rather than match label distributions."""
    _, clients, state = restore(result, "cpu")
    w = state["server_state"]["pmi_weights"].double()
    order = state["server_state"]["pmi_clients"].tolist()
    return weight_stats(w, label_similarity(clients)[order][:, order].double())


def weight_stats(w: torch.Tensor, sim: torch.Tensor) -> dict[str, float]:
    """:func:`pmi_weight_stats` of a weight matrix ``w`` (row k: client k's weights over k') and the
    label similarity ``sim`` of the same clients in the same order."""
    n = len(w)
    off = ~torch.eye(n, dtype=torch.bool)
    values = w[off]
    source = torch.arange(n).expand(n, -1)[off]  # k' of each off-diagonal entry
    means = torch.zeros(n, dtype=w.dtype).index_add_(0, source, values) / (n - 1)
    total = float(((values - values.mean()) ** 2).sum())
    between = float(((means[source] - values.mean()) ** 2).sum())
    return {"weight_label_corr": float(torch.corrcoef(torch.stack([values, sim[off].to(w.dtype)]))[0, 1]),
            "weight_source_share": between / total if total > 0 else float("nan")}


def pmi_start_table(table: pd.DataFrame) -> pd.DataFrame:
    """Per run of a grid table (pFedCSPC runs): mean over clients of both inits' accuracy, the
    share of clients for which PMI starts higher, both inits' mean training loss in the first
    local epoch (Fig. 10c's start), and the PMI weights' readings (:func:`pmi_weight_stats`)."""
    rows = []
    for _, row in table.iterrows():
        df = pmi_start(row["path"])
        first = pmi_finetune(row["path"], epochs=1).groupby("init")["train_loss"].mean()
        rows.append({**{k: row[k] for k in table.columns if k not in ("path",)},
                     "pmi_init_acc": float(df["pmi_init_acc"].mean()),
                     "global_init_acc": float(df["global_init_acc"].mean()),
                     "pmi_better_share": float((df["pmi_init_acc"] > df["global_init_acc"]).mean()),
                     "pmi_first_epoch_loss": float(first["pmi"]), "global_first_epoch_loss": float(first["global"]),
                     **pmi_weight_stats(row["path"]), "path": row["path"]})
    return pd.DataFrame(rows)


TAU_P = "method.args.tau_p"
VALIDATION_METRIC = "final_i_local_mean"
# pFedCSPC (TNNLS) gives no τ_p (Eq. 4). PMI serves the personalised objective (§IV-B1), so the rule
# reads the personalised models' accuracy, on validation splits only.
TAU_P_RULE = ("τ_p = the grid value with the highest mean over seeds of the final round's I_local on the "
              "clients' validation splits (held out of the training images); a tie goes to the larger τ_p, "
              "the less selective weighting; a diverged run counts as 0")


def select_tau_p(validation: pd.DataFrame, metric: str = VALIDATION_METRIC) -> float:
    """:data:`TAU_P_RULE` on the rows of the ``pmi_tau_p_validation`` table (one per τ_p and seed)."""
    for col in (TAU_P, metric):
        if col not in validation:
            raise ValueError(f"select_tau_p: column {col!r} absent; valid input: the pmi_tau_p_validation table")
    if validation.empty:
        raise ValueError("select_tau_p: no validation runs")
    means = validation.assign(_v=validation[metric].fillna(0.0)).groupby(TAU_P)["_v"].mean()
    return float(max(means.index[means == means.max()]))


def setup_tau_p(profile: str) -> float:
    """The τ_p that the profile's pFedCSPC runs use: its setup's method arguments
    (:data:`fedrepro.papers.pfedcspc.setup.TAU_P`) over the method's defaults."""
    return float(PFedCSPCParams(**setup("pfedcspc", profile).method.args).tau_p)


def tau_p_sweep(validation: pd.DataFrame, test: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per τ_p (mean over seeds): the validation runs' I_local and global accuracy and their PMI
    weights' correlation with label similarity; with ``test`` (the ``pmi_tau_p`` table) the same
    columns of the test-split runs, which the choice never reads, and ``chosen`` marking the
    :func:`select_tau_p` pick."""
    def summary(t: pd.DataFrame, tag: str) -> pd.DataFrame:
        r = t.assign(weight_label_corr=[pmi_weight_stats(p)["weight_label_corr"] for p in t["path"]])
        cols = {VALIDATION_METRIC: f"{tag} I_local", "final_global_acc": f"{tag} ACC_global",
                "weight_label_corr": f"{tag} r(weights, labels)"}
        return r.groupby(TAU_P)[list(cols)].mean().rename(columns=cols)

    out = summary(validation, "validation")
    if test is not None:
        out = out.join(summary(test, "test"))
    out["chosen"] = out.index == select_tau_p(validation)
    return out.sort_index(ascending=False)
