"""pFedCSPC's PMI analyses (specs/pfedcspc.md Fig. 10, §9 item 6) on a finished run's final state.

- :func:`pmi_start`: per client, the local test accuracy of the PMI initial model M_k^p
  (personalised encoder, calibrated global head) and of the global model, both *before* any local
  training (Fig. 10a), with the PMI weights' row for the client;
- :func:`pmi_finetune`: per client, E epochs of local CE training from each init, with the
  per-epoch training loss and the final local test accuracy (Fig. 10b, c);
- :func:`pmi_start_table`: :func:`pmi_start` summarised per run of a ``run_grid`` table, the
  input of the ``pfedcspc.pmi_starts_better`` claim;
- :func:`run_ablation`: the rows of Table IV or V, those a claim reads over the claim seeds and
  the others over the table seeds, as one table in the rows' order;
- :func:`alignment_ratio`: spec §9 item 7's measure of how far the same class sits apart across
  clients, relative to how far classes sit apart (Figs. 7, 8);
- :func:`with_local_finetune`: the config Table II's global baselines run on (their Local score
  after CE fine-tuning), shared by the notebooks that run those baselines so they share the runs.

Both initial models are scored by their network prediction (no knowledge-based fusion), so the
comparison isolates the encoder PMI changes.
"""
from __future__ import annotations

import pandas as pd
import torch

from ..fl.local import evaluate_model, make_sgd
from .embedding import analysis_generator


def _inits(method, shared: dict, cid: int) -> dict[str, dict]:
    return {"pmi": method.initial_model(shared, cid), "global": method._sub(shared, "g.")}


def pmi_start(result) -> pd.DataFrame:
    """One row per client: ``pmi_init_acc``, ``global_init_acc`` (local test, before training)."""
    from ..experiment import restore

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
    from ..experiment import restore

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
                net.train()
                total, n = 0.0, 0
                for x, y in c.train_batches(t.batch_size, gen):
                    loss = torch.nn.functional.cross_entropy(net(x), y)
                    opt.zero_grad(set_to_none=True)
                    loss.backward()
                    opt.step()
                    total, n = total + float(loss.detach()) * len(y), n + len(y)
                rows.append({"client": c.cid, "init": name, "epoch": e, "train_loss": total / max(n, 1),
                             "test_acc": evaluate_model(net, c).acc})
    return pd.DataFrame(rows)


def pmi_start_table(table: pd.DataFrame) -> pd.DataFrame:
    """Per run of a grid table (pFedCSPC runs): mean over clients of both inits' accuracy, and the
    share of clients for which PMI starts higher."""
    rows = []
    for _, row in table.iterrows():
        df = pmi_start(row["path"])
        rows.append({**{k: row[k] for k in table.columns if k not in ("path",)},
                     "pmi_init_acc": float(df["pmi_init_acc"].mean()),
                     "global_init_acc": float(df["global_init_acc"].mean()),
                     "pmi_better_share": float((df["pmi_init_acc"] > df["global_init_acc"]).mean()),
                     "path": row["path"]})
    return pd.DataFrame(rows)


def rounds_to_target(result, target: float, metric: str = "global_acc") -> int | None:
    """The first round whose ``metric`` reaches ``target`` (Table VII), or None if none does."""
    from ..store import RunResult

    rounds = (result if isinstance(result, RunResult) else RunResult(result)).rounds
    if metric not in rounds:
        return None
    hit = rounds[rounds[metric] >= target]
    return int(hit["round"].iloc[0]) if len(hit) else None


def label_similarity(clients) -> torch.Tensor:
    """Cosine similarity of the clients' training label histograms (§9 item 6's derived check of
    the PMI weights)."""
    c = int(max(int(cl.train_y.max()) for cl in clients if cl.num_train)) + 1
    h = torch.stack([torch.bincount(cl.train_y.cpu(), minlength=c).double() for cl in clients])
    h = torch.nn.functional.normalize(h, dim=1)
    return h @ h.t()


def run_ablation(base, rows: dict, settings, seeds, table_seeds=None, claim_settings=None,
                 **grid_kw) -> pd.DataFrame:
    """Run the ablation ``settings`` (names of ``rows``: :data:`~fedrepro.methods.pfedcspc.ABLATION_GLOBAL`
    or ``ABLATION_PERSONAL``) on ``base``: the names in ``claim_settings`` (default: every one) over
    ``seeds``, the rest over ``table_seeds`` (default ``seeds``), so a time budget can thin the rows
    no claim reads. Returns one :func:`fedrepro.run_grid` table with a ``setting`` column, in the
    order of ``settings``."""
    from ..experiment import run_grid
    from ..methods.pfedcspc import setting_overrides

    settings = list(settings)
    unknown = [k for k in settings if k not in rows]
    if unknown:
        from ..errors import ConfigError

        raise ConfigError(f"unknown ablation setting(s) {unknown}; valid: {', '.join(rows)}")
    claim = set(settings if claim_settings is None else claim_settings)
    groups = [([k for k in settings if k in claim], seeds),
              ([k for k in settings if k not in claim], seeds if table_seeds is None else table_seeds)]
    parts = [run_grid(base, seeds=s, variant_col="setting", variants={k: setting_overrides(rows[k]) for k in ks},
                      **grid_kw) for ks, s in groups if ks]
    table = pd.concat(parts, ignore_index=True)
    order = {k: i for i, k in enumerate(settings)}
    return table.sort_values("setting", key=lambda c: c.map(order), kind="stable").reset_index(drop=True)


# Table II's global baselines (specs/pfedcspc.md §8): scored Local after CE fine-tuning.
GLOBAL_BASELINES = ("moon", "feddc", "fedntd", "fedasam", "fedproc", "feddecorr", "ccvr", "fedsoup", "grace",
                    "fedetf")


def with_local_finetune(base, profile: str, epochs: int | None = None):
    """``base`` with ``train.eval_finetune_epochs``: a global method's Local score (Table II) is its
    model after ``epochs`` of CE fine-tuning on the client (default: E at the paper profile, 1 at
    laptop and smoke, where E local epochs would cost more than the run itself).

    Any notebook that runs a :data:`GLOBAL_BASELINES` method runs it on this config, so the runs are
    shared (04 reuses 01's). That is sound because the fine-tuning touches only the Local score:
    evaluation draws from its own seeded stream, so the training trajectory and the global accuracy
    per round are those of ``base``."""
    ft = epochs if epochs is not None else (base.train.local_epochs if profile == "paper" else 1)
    return base.replace(**{"train.eval_finetune_epochs": ft})


def alignment_ratio(feats, labels, clients) -> float:
    """Mean distance between same-class features of *different* clients over the mean distance
    between features of different classes (specs/pfedcspc.md §9 item 7). Below 1: a class from all
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
