"""CCVR (Luo, Chen, Hu, Zhang, Liang & Feng, NeurIPS 2021): classifier calibration with virtual
representations. "No Fear of Heterogeneity: Classifier Calibration for Federated Learning with
Non-IID Data".

Training is FedAvg. The paper's finding is that the classifier is the most client-biased layer, so
after aggregation the server re-trains only the classifier on *virtual features* drawn from a
Gaussian per class, estimated from statistics the clients send:

1. client k, for every class c it holds, on the features z = φ(x) of its training set under the
   global model (eval mode): the count N_{c,k}, mean μ_{c,k} and unbiased covariance Σ_{c,k};
2. server, per class (the paper's exact merge of the clients' moments):
   N_c = Σ_k N_{c,k},  μ_c = Σ_k N_{c,k} μ_{c,k} / N_c,
   Σ_c = Σ_k (N_{c,k} − 1)/(N_c − 1) Σ_{c,k} + Σ_k N_{c,k}/(N_c − 1) μ_{c,k}μ_{c,k}ᵀ
   − N_c/(N_c − 1) μ_c μ_cᵀ;
3. server: draw M_c virtual features per class from N(μ_c, Σ_c) and re-train the classifier h
   (starting from the global h, φ untouched) with cross-entropy.

The paper calibrates once, after training. Here (as the pFedCSPC comparison needs an ACC_global per
round) calibration runs every ``calibrate_every`` rounds. The 5-step interface has no extra
client→server exchange after aggregation, so the statistics ride on the next round's upload: in
round r each client first computes them on the global model it *received* (the round r−1 model,
before its local training), then trains as in FedAvg. The server, in round r's aggregation,
calibrates the head of that received model, so features and statistics match exactly.
Consequences, named as options:

- ``apply="eval"`` (default): the calibrated model (round r−1's φ with the calibrated h) is the
  *global model* scored for ACC_global after round r; training continues from the plain FedAvg
  model, as in the paper (calibration is post-hoc and never fed back). The global score therefore
  lags training by one round. In rounds without calibration the global model is the FedAvg model.
- ``apply="broadcast"``: the calibrated h replaces the FedAvg head in the model broadcast for the
  next round (and scored as the global model). That head was fitted to round r−1's features and
  is applied to round r's φ: an approximation of "calibrate, then broadcast" that the one-exchange
  protocol cannot do exactly.
- Calibration starts in round 1 (round 0's received model is the random initialisation);
  ``calibrate_every=0`` never calibrates (FedAvg, an ablation).
- The Local score (``train.eval_finetune_epochs``) fine-tunes the latest broadcast model, as for
  FedAvg-FT.

Defaults: M_c = ``num_virtual`` = 2000 per class (the value the paper's ablation over M_c found
best, as public re-implementations cite it); the re-training optimiser (SGD, lr 0.01, momentum 0.9,
batch 64, 10 epochs, ``calib_*``) is our choice: we could not check the paper's values.
Classes no client holds get no virtual features. Sampling uses the eigendecomposition of Σ_c
(clamped at 0), so a singular covariance (fewer samples than feature dimensions) is fine.
Randomness: torch's global RNG inside ``aggregate`` (seeded per round by the engine).

Only per-class counts, means and covariances of present classes leave a client (float32).

A pFedCSPC (TNNLS) Table II baseline.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from ..fl.client_data import ClientData
from ..fl.local import fit_tensors
from ..fl.method import ClientUpdate, State
from ..params import hp
from .base import ModelMethod
from .registry import register_method

STATS = "ccvr."  # uploaded statistics: ccvr.classes, ccvr.count, ccvr.mean, ccvr.cov
APPLY = ("eval", "broadcast")


@dataclass
class CCVRParams:
    calibrate_every: int = hp(1, ge=0)  # rounds between calibrations; 0 = never [ours: the brief's per-round use]
    num_virtual: int = hp(2000, ge=1)  # M_c, virtual features per class [paper's ablation, as cited]
    calib_epochs: int = hp(10, ge=1)  # [ours]
    calib_lr: float = hp(0.01, gt=0)  # [ours]
    calib_momentum: float = hp(0.9, ge=0)  # [ours]
    calib_batch_size: int = hp(64, ge=1)  # [ours]
    apply: str = hp("eval", choices=APPLY)  # "eval" | "broadcast"


def class_statistics(feats: Tensor, labels: Tensor, num_classes: int) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Per present class: ``(classes [P], counts [P], means [P, m], unbiased covariances [P, m, m])``,
    in float64. A class with one sample has covariance 0 (its weight N − 1 in the merge is 0)."""
    feats = feats.to(torch.float64)
    classes = torch.unique(labels).sort().values
    counts, means, covs = [], [], []
    for c in classes.tolist():
        z = feats[labels == c]
        mu = z.mean(0)
        d = z - mu
        n = z.shape[0]
        covs.append(d.T @ d / (n - 1) if n > 1 else torch.zeros(z.shape[1], z.shape[1], dtype=torch.float64,
                                                                     device=z.device))
        counts.append(n)
        means.append(mu)
    dev = feats.device
    return (classes.to(torch.long), torch.tensor(counts, dtype=torch.long, device=dev), torch.stack(means),
            torch.stack(covs))


def merge_statistics(stats: list[tuple[Tensor, Tensor, Tensor, Tensor]], num_classes: int,
                     dim: int) -> tuple[Tensor, Tensor, Tensor]:
    """CCVR's global per-class ``(N [C], μ [C, m], Σ [C, m, m])`` from the clients' statistics
    (module docstring, step 2); Σ_c = 0 for classes with fewer than two samples in total."""
    dev = stats[0][2].device if stats else torch.device("cpu")
    n = torch.zeros(num_classes, dtype=torch.float64, device=dev)
    s1 = torch.zeros(num_classes, dim, dtype=torch.float64, device=dev)
    s2 = torch.zeros(num_classes, dim, dim, dtype=torch.float64, device=dev)
    for classes, counts, means, covs in stats:
        cnt = counts.to(torch.float64).to(dev)
        means, covs = means.to(torch.float64).to(dev), covs.to(torch.float64).to(dev)
        idx = classes.to(dev)
        n.index_add_(0, idx, cnt)
        s1.index_add_(0, idx, cnt[:, None] * means)
        # (N_ck − 1) Σ_ck + N_ck μ_ck μ_ckᵀ: the client's within-class scatter plus its mean's share
        s2.index_add_(0, idx, (cnt - 1).clamp_min(0)[:, None, None] * covs
                      + cnt[:, None, None] * means[:, :, None] * means[:, None, :])
    mu = s1 / n.clamp_min(1)[:, None]
    denom = (n - 1).clamp_min(1)[:, None, None]
    cov = (s2 - n[:, None, None] * mu[:, :, None] * mu[:, None, :]) / denom
    cov[n < 2] = 0.0
    return n, mu, cov


def sample_virtual(n: Tensor, mu: Tensor, cov: Tensor, per_class: int) -> tuple[Tensor, Tensor]:
    """``per_class`` draws from N(μ_c, Σ_c) for every class with N_c > 0 (torch's global RNG)."""
    feats, labels = [], []
    for c in torch.nonzero(n > 0).flatten().tolist():
        evals, evecs = torch.linalg.eigh(0.5 * (cov[c] + cov[c].T))
        root = evecs * evals.clamp_min(0).sqrt()  # root @ rootᵀ = Σ_c
        eps = torch.randn(per_class, mu.shape[1], dtype=torch.float64, device=mu.device)
        feats.append(mu[c] + eps @ root.T)
        labels.append(torch.full((per_class,), c, dtype=torch.long, device=mu.device))
    return torch.cat(feats), torch.cat(labels)


@register_method("ccvr")
class CCVR(ModelMethod):
    """CCVR: FedAvg, then the head is re-trained on virtual features from clients' class Gaussians."""

    Params = CCVRParams

    def calibrates(self, rnd: int) -> bool:
        k = self.p.calibrate_every
        return k > 0 and rnd >= 1 and rnd % k == 0

    @torch.no_grad()
    def feature_statistics(self, model, data: ClientData) -> dict[str, Tensor]:
        model.eval()
        feats = [model.features(x) for x, _ in data.eval_train_batches(500)]
        labels = [y for _, y in data.eval_train_batches(500)]
        classes, counts, means, covs = class_statistics(torch.cat(feats), torch.cat(labels), model.num_classes)
        return {STATS + "classes": classes, STATS + "count": counts, STATS + "mean": means.float(),
                STATS + "cov": covs.float()}

    def client_update(self, shared: State, state: State, data: ClientData, gen: torch.Generator,
                      rnd: int) -> ClientUpdate:
        model = self.load(shared, state)
        stats = self.feature_statistics(model, data) if self.calibrates(rnd) and data.num_train else {}
        train = self.local_train(model, data, gen, shared, rnd)
        sd = model.state_dict()
        upload = {**{k: sd[k].detach().clone() for k in self.shared_keys}, **stats}
        return ClientUpdate(upload=upload, state=dict(state), num_samples=data.num_train,
                            metrics=train.metrics())

    def calibrate_head(self, model, feats: Tensor, labels: Tensor) -> dict[str, Tensor]:
        """Re-train (a copy of) ``model.head`` on the virtual features with CE; returns its new
        state dict, prefixed ``head.``. Shuffling uses torch's global RNG."""
        head = model.head
        for t in model.parameters():
            t.requires_grad_(False)
        for t in head.parameters():
            t.requires_grad_(True)
        head.train()
        p = self.p
        opt = torch.optim.SGD(head.parameters(), lr=p.calib_lr, momentum=p.calib_momentum)
        dtype = next(head.parameters()).dtype
        x_all = feats.to(dtype)
        fit_tensors(opt, feats.shape[0], p.calib_epochs, p.calib_batch_size,
                    lambda idx: F.cross_entropy(head(x_all[idx]), labels[idx]), device=feats.device)
        return {"head." + k: v.detach().clone() for k, v in head.state_dict().items()}

    def aggregate(self, shared: State, updates: list[ClientUpdate], server_state: State,
                  rnd: int) -> tuple[State, State]:
        server_state = {k: v for k, v in server_state.items() if k != "calibrated"}
        if not updates:
            return shared, server_state
        new = self.average_shared(updates)
        with_stats = [u.upload for u in updates if STATS + "count" in u.upload]
        if not with_stats:
            return new, server_state
        # The statistics describe the model the clients received (``shared``): calibrate its head.
        model = self.load(shared, {})
        dev = next(model.parameters()).device
        stats = [(u[STATS + "classes"].to(dev), u[STATS + "count"].to(dev), u[STATS + "mean"].to(dev),
                  u[STATS + "cov"].to(dev)) for u in with_stats]
        n, mu, cov = merge_statistics(stats, model.num_classes, model.feature_dim)
        feats, labels = sample_virtual(n, mu, cov, self.p.num_virtual)
        head = self.calibrate_head(model, feats, labels)
        if self.p.apply == "broadcast":
            new = {**new, **{k: v.to(new[k].dtype) for k, v in head.items()}}
        else:
            server_state["calibrated"] = {**{k: shared[k].clone() for k in self.shared_keys}, **head}
        return new, server_state

    def global_model(self, shared: State, server_state: State):
        """The calibrated model when this round calibrated (``apply="eval"``), else the broadcast one."""
        calibrated = server_state.get("calibrated")
        return self.load(calibrated if calibrated is not None else shared, {})
