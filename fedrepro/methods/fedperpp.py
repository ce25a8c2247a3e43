"""FedPer++ (Xu, Yan, Huang; IJCNN 2022): FedPer whose shared feature extractor is regularised locally.

"FedPer++: Toward Improved Personalized Federated Learning on Heterogeneous and Imbalanced Data",
reference [29] of pFedCSPC and one of its Table III baselines.

**Uncertainty.** We could not read this paper: it is closed access, we found no public code and no
public text that describes its algorithm. What we know: pFedCSPC files it with the methods that
"split the network into personalized and global layers"; its name makes it an extension of FedPer
(shared body, personal classifier head); its title targets heterogeneous, imbalanced client data;
and its authors' later paper FedPAC (Xu, Tong, Huang, ICLR 2023, "Personalized Federated Learning
with Feature Alignment and Classifier Collaboration", most likely the same first author) keeps that
split and adds a term that aligns the local features with global knowledge while the body trains.
This implementation is therefore **FedPer plus a regulariser that keeps the locally trained feature
extractor near the global one**, with the regulariser's form a named option. It is our
reconstruction, not a transcription of the paper.

One round for client k (z = φ(x) the output of ``features``, h_k the personal head):

- the server sends the shared feature extractor φ_g (and, for ``reg="prototype"``, class centroids);
- the client assembles (φ_g, h_k) and trains both jointly, as FedPer, for ``train.local_epochs``
  epochs of SGD on  CE(h_k(z), y) + R,  with R one of (``reg``):

  - ``"feature"`` (default): R = (μ/2)·(1/B)·Σ_i ‖φ(x_i) − φ_g(x_i)‖², the squared distance of each
    sample's feature to the one the received global extractor gives it (frozen copy, no gradient;
    run in training mode, so at the start of a round both sides are identical, BatchNorm included);
  - ``"prototype"`` (FedPAC-style): R = (μ/2)·(1/B)·Σ_i ‖φ(x_i) − c_{y_i}‖², c_j the global centroid
    of class j's features; samples of a class without a centroid yet add nothing. After training,
    each client uploads its per-class feature sums and counts (computed with its new φ in eval mode
    on its train split) and the server sets c_j = Σ_k sum_kj / Σ_k count_kj for every class seen this
    round, keeping older centroids for the rest. No centroid exists in round 0, so R = 0 there;
  - ``"param"``: R = (μ/2)·‖φ − φ_g‖² over the extractor's parameters (FedProx on the body);
  - ``"none"``: R = 0, exactly FedPer (a test checks the uploads are identical);
- it keeps h_k and uploads φ; the server FedAvg-averages φ (sample-weighted).

Evaluation uses (φ_g, h_k), after ``train.eval_finetune_epochs`` of CE fine-tuning when that is
set (the :class:`ModelMethod` behaviour, as FedPer). ``global_model`` returns None (personal heads).

Defaults: ``reg="feature"``, ``mu=1.0``: our choices (the paper's values are unknown to us).

A pFedCSPC (TNNLS) Table III baseline.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from ..fl.client_data import ClientData
from ..fl.local import make_sgd, train_epochs
from ..fl.method import ClientUpdate, State
from ..models import head_keys
from ..params import hp
from .base import ModelMethod
from .registry import register_method

REGS = ("feature", "prototype", "param", "none")
PROTOS, PROTO_MASK = "protos", "proto_mask"  # extra ``shared`` entries for reg="prototype"
PROTO_SUM, PROTO_COUNT = "proto_sum", "proto_count"  # extra upload entries for reg="prototype"


@dataclass
class FedPerPPParams:
    reg: str = hp("feature", choices=REGS)  # our reconstruction; see the module docstring
    mu: float = hp(1.0, ge=0)  # our choice


@torch.no_grad()
def class_feature_sums(features: torch.nn.Module, data: ClientData, num_classes: int,
                       batch_size: int = 500) -> tuple[Tensor, Tensor]:
    """Per-class sums of φ(x) over the client's train split ([C, m]) and class counts ([C], long)."""
    was_training = features.training
    features.eval()
    sums, counts = None, None
    for x, y in data.eval_train_batches(batch_size):
        z = features(x)
        if sums is None:
            sums = torch.zeros(num_classes, z.shape[1], dtype=z.dtype, device=z.device)
            counts = torch.zeros(num_classes, dtype=torch.long, device=z.device)
        sums.index_add_(0, y, z)
        counts += torch.bincount(y, minlength=num_classes)
    features.train(was_training)
    return sums, counts


@register_method("fedperpp")
class FedPerPP(ModelMethod):
    """FedPer++: FedPer (shared body, personal head) with the local body held near the global one."""

    Params = FedPerPPParams

    def __init__(self, ctx, params):
        super().__init__(ctx, params)
        # Scratch copy of the extractor for the "feature" anchor φ_g (loaded from ``shared`` each round).
        self.anchor = copy.deepcopy(self.model.features)
        for p in self.anchor.parameters():
            p.requires_grad_(False)

    def personal_keys(self, model) -> set[str]:
        return head_keys(model)

    @property
    def active(self) -> bool:
        return self.p.reg != "none" and float(self.p.mu) > 0

    # State ------------------------------------------------------------------------------------
    def init_server(self, seed: int) -> tuple[State, State]:
        shared, server = super().init_server(seed)
        if self.p.reg == "prototype":
            ref = next(iter(shared.values()))
            m, c = self.model.feature_dim, self.model.num_classes
            shared[PROTOS] = torch.zeros(c, m, device=ref.device)
            shared[PROTO_MASK] = torch.zeros(c, dtype=torch.bool, device=ref.device)
        return shared, server

    def load(self, shared: State, state: State):
        sd = {k: shared[k] for k in self.shared_keys}
        sd.update({k: state[k] for k in self.personal})
        self.model.load_state_dict(sd, strict=True)
        for p in self.model.parameters():
            p.requires_grad_(True)
        return self.model

    def load_anchor(self, shared: State) -> torch.nn.Module:
        n = len("features.")
        self.anchor.load_state_dict({k[n:]: shared[k] for k in self.shared_keys}, strict=True)
        return self.anchor.train()

    # The regulariser --------------------------------------------------------------------------
    def regularizer(self, model, x: Tensor, y: Tensor, z: Tensor, shared: State) -> Tensor:
        """R for one batch (module docstring); ``z = model.features(x)`` with its graph.
        For ``"feature"`` the anchor must have been loaded with :meth:`load_anchor`."""
        mu = float(self.p.mu)
        if self.p.reg == "feature":
            with torch.no_grad():
                target = self.anchor(x)
            return 0.5 * mu * (z - target).pow(2).sum(1).mean()
        if self.p.reg == "prototype":
            has = shared[PROTO_MASK][y]
            dist = (z - shared[PROTOS][y]).pow(2).sum(1)
            return 0.5 * mu * torch.where(has, dist, torch.zeros_like(dist)).sum() / y.numel()
        if self.p.reg == "param":
            total = z.new_zeros(())
            for name, p in model.features.named_parameters(prefix="features"):
                total = total + (p - shared[name]).pow(2).sum()
            return 0.5 * mu * total
        return z.new_zeros(())

    # The five steps ---------------------------------------------------------------------------
    def client_update(self, shared: State, state: State, data: ClientData, gen: torch.Generator,
                      rnd: int) -> ClientUpdate:
        t = self.ctx.cfg.train
        model = self.load(shared, state)
        if self.active and self.p.reg == "feature":
            self.load_anchor(shared)
        opt = make_sgd(model.parameters(), t.lr, t.momentum, t.weight_decay)
        # train_loss is (Σ CE·n + Σ R·n) / N: the two sums are kept apart, as they are logged.
        sums = {"ce": 0.0, "reg": 0.0}

        def batch_loss(m, x, y):
            z = m.features(x)
            ce = F.cross_entropy(m.head(z), y)
            sums["ce"] += float(ce.detach()) * y.numel()
            if not self.active:
                return ce, {"loss_ce": ce, "loss_reg": 0.0}
            reg = self.regularizer(m, x, y, z, shared)
            sums["reg"] += float(reg.detach()) * y.numel()
            return ce + reg, {"loss_ce": ce, "loss_reg": reg}

        stats = train_epochs(model, data, opt, t.local_epochs, t.batch_size, gen, batch_loss=batch_loss)
        stats.loss = (sums["ce"] + sums["reg"]) / max(stats.samples, 1)
        sd = model.state_dict()
        upload = {k: sd[k].detach().clone() for k in self.shared_keys}
        if self.p.reg == "prototype":
            upload[PROTO_SUM], upload[PROTO_COUNT] = class_feature_sums(model.features, data, model.num_classes)
        new_state = {**state, **{k: sd[k].detach().clone() for k in self.personal}}
        return ClientUpdate(upload=upload, state=new_state, num_samples=data.num_train, metrics=stats.metrics())

    def aggregate(self, shared: State, updates: list[ClientUpdate], server_state: State,
                  rnd: int) -> tuple[State, State]:
        if not updates:
            return shared, server_state
        new = self.average_shared(updates)
        if self.p.reg == "prototype":
            total = sum(u.upload[PROTO_SUM].to(torch.float64) for u in updates)
            count = sum(u.upload[PROTO_COUNT] for u in updates)
            seen = count > 0
            protos = shared[PROTOS].clone()
            protos[seen] = (total[seen] / count[seen, None].to(torch.float64)).to(protos.dtype)
            new[PROTOS] = protos
            new[PROTO_MASK] = shared[PROTO_MASK] | seen
        return new, server_state
