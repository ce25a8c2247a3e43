"""pFedCSPC's cross-silo calibration seen in feature space (pFedCSPC (TNNLS) Fig. 8, §V-E1).

The server's calibration (CSPC, §IV-C2) retrains only the global head H_g and classifier F_g; the
encoders are untouched. Fig. 8 passes the same test images of two easily confused classes through
two randomly chosen clients' local models and shows, by t-SNE, the features before and after the
calibration, with the model's accuracy before and after. Our reading: each chosen client's encoder
(its model after the round's local training, as it uploaded it) followed by the round's aggregated
head (before) or the calibrated head (after), taken at the classifier's input; the accuracies are
the same round's global model on the whole test split, before and after the calibration
(``global_acc_before_calibration`` and ``global_acc`` of the run's rows).

The two classes are chosen by a rule, not by hand: the pair the round's aggregated (uncalibrated)
global model confuses most on the clients' test splits (errors either way). The two clients are
drawn by a generator seeded with ``seed`` among the clients that trained in the round.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from ...methods.pfedcspc import MODEL, PRECAL
from ...runs.train import restore
from ...runs.store import RunResult


@dataclass
class CalibrationView:
    """Features of ``n`` test images under two clients' encoders, before and after the calibration."""

    feats: np.ndarray        # [4n, d]: (client a, before), (client b, before), (a, after), (b, after)
    labels: np.ndarray       # [4n] class ids
    client: np.ndarray       # [4n] client ids
    stage: np.ndarray        # [4n] "before" / "after"
    classes: tuple[int, int]
    clients: tuple[int, int]
    round: int
    acc_before: float        # the round's global model on the whole test split, before the calibration
    acc_after: float


def _pooled_test(clients, classes: tuple[int, int], per_class: int, gen: torch.Generator):
    xs, ys = [], []
    for x, y in _batches(clients):
        keep = (y == classes[0]) | (y == classes[1])
        xs.append(x[keep])
        ys.append(y[keep])
    x, y = torch.cat(xs), torch.cat(ys)
    pick = []
    for c in classes:
        idx = (y == c).nonzero().flatten()
        pick.append(idx[torch.randperm(len(idx), generator=gen)[:per_class]].sort().values)
    idx = torch.cat(pick)
    return x[idx], y[idx]


def _batches(clients):
    for c in clients:
        if c.num_test:
            yield from c.test_batches(500)


@torch.no_grad()
def _confused_pair(net, clients, num_classes: int) -> tuple[int, int]:
    conf = torch.zeros(num_classes, num_classes, dtype=torch.long)
    net.eval()
    for x, y in _batches(clients):
        pred = net(x).argmax(1)
        conf += torch.bincount(y * num_classes + pred, minlength=num_classes ** 2).view(num_classes, num_classes).cpu()
    both = conf + conf.T
    both.fill_diagonal_(-1)
    i, j = divmod(int(both.argmax()), num_classes)
    return (min(i, j), max(i, j))


def calibration_view(result, per_class: int = 200, seed: int = 0) -> CalibrationView:
    """Fig. 8 on a finished pFedCSPC run (``train.global_eval`` on, so that the round's aggregate is
    kept): its last round, ``per_class`` test images of each of the two classes."""
    result = result if isinstance(result, RunResult) else RunResult(result)
    method, clients, state = restore(result, "cpu")
    shared, server = state["shared"], state["server_state"]
    before_head = method._sub(server, PRECAL)
    if not before_head:
        raise ValueError(f"{result.path}: no pre-calibration head stored; valid: a pFedCSPC run with "
                         "method.args.calibrate=True and train.global_eval=True")
    after_head = {k: v for k, v in method._sub(shared, "g.").items() if k.startswith(("proj.", "cls."))}
    trained = [int(c) for c in server["pmi_clients"].tolist()] if len(server.get("pmi_clients", [])) else \
        [k for k, s in enumerate(state["client_states"]) if method._sub(s, MODEL)]
    gen = torch.Generator().manual_seed(int(seed))
    pair = sorted(trained[i] for i in torch.randperm(len(trained), generator=gen)[:2].tolist())

    uncalibrated = method._load({**method._sub(shared, "g."), **before_head})
    classes = _confused_pair(uncalibrated, clients, method.ctx.num_classes)
    x, y = _pooled_test(clients, classes, per_class, gen)

    feats, labels, owner, stage = [], [], [], []
    for name, head in (("before", before_head), ("after", after_head)):
        for k in pair:
            enc = {n: v for n, v in method._sub(state["client_states"][k],
                                                MODEL).items() if not n.startswith(("proj.", "cls."))}
            net = method._load({**enc, **head})
            net.eval()
            with torch.no_grad():
                feats.append(net.features(x).float().cpu().numpy())
            labels.append(y.cpu().numpy())
            owner.append(np.full(len(y), k))
            stage.append(np.full(len(y), name))
    rows = result.rounds
    last = rows.dropna(subset=["global_acc"]).iloc[-1]
    return CalibrationView(np.concatenate(feats), np.concatenate(labels), np.concatenate(owner), np.concatenate(stage),
                           classes, (pair[0],
                                     pair[1]), int(last["round"]), float(last["global_acc_before_calibration"]),
                           float(last["global_acc"]))


def calibration_table(views: dict[str, CalibrationView]) -> pd.DataFrame:
    """One row per view: its round, the two classes and clients, the global accuracy before and after."""
    return pd.DataFrame([{"view": name, "round": v.round, "classes": v.classes, "clients": v.clients,
                          "global acc before (%)": 100 * v.acc_before, "global acc after (%)": 100 * v.acc_after}
                         for name, v in views.items()]).set_index("view")


__all__ = ["CalibrationView", "calibration_table", "calibration_view"]
