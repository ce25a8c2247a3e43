"""FedETF (Li, Shang, He, Lin & Wu, ICCV 2023): a synthetic, fixed simplex-ETF classifier.
"No Fear of Classifier Biases: Neural Collapse Inspired Federated Learning with Synthetic and Fixed
Classifier".

Model: the body φ, a *projection layer* g, L2 normalisation, and a fixed classifier V (a simplex
equiangular tight frame, ETF) scaled by a learnable temperature β:

    logits(x) = β · Vᵀ ĝ(x),   ĝ(x) = g(φ(x)) / ‖g(φ(x))‖,
    V = sqrt(C/(C−1)) · P (I_C − 1 1ᵀ / C),   P ∈ R^{d×C}, PᵀP = I.

V's columns have unit norm and pairwise cosine −1/(C−1). It is built once in ``init_server``
from the class count C and the dimension d, with P the Q factor of a Gaussian d×C matrix drawn from
a generator seeded from the run's (derived) init seed: every client and every resumed run gets the
same V. V is broadcast in ``shared`` but never trained during FL and never aggregated.

One round:

- client: E local epochs of SGD on the *balanced feature loss*
  L = −log( n_y^γ exp(β v_yᵀ ĝ) / Σ_c n_c^γ exp(β v_cᵀ ĝ) ),
  n_c the client's training count of class c (γ = 1, i.e. balanced softmax, as in the official
  code; a class the client lacks gets no probability mass). φ, g and β are trained;
- server: FedAvg of φ, g and β (sample-weighted). The global model is φ, g, β with the fixed V.

Personalisation (the client's "Local" score, ``personalize="paper"``): the paper's local
adaptation, run on a throw-away copy before each evaluation, as the official code does it after
training: E epochs of the balanced loss from the global model, then ``pers_cycles`` (20) cycles of
[``pers_cycle_epochs`` (3) epochs of CE on V alone (plain SGD, lr 0.1), then 3 epochs of CE on
g alone (SGD lr 0.05 with the run's momentum and weight decay)]; φ and β stay frozen in the cycles.
This costs about E + 120 local epochs per client per evaluation: lower ``pers_cycles`` or raise
``train.eval_every`` for long runs. ``personalize="finetune"`` instead fine-tunes the whole model
(V fixed) with CE for ``train.eval_finetune_epochs`` (the generic FedAvg-FT Local score);
``"none"`` scores the global model.

Named choices:

- ``projection="head"`` (default): the run's SplitModel head ``Linear(m, C)`` is FedETF's
  projection layer g, so d = C: the official code's ResNet and LeNet models use exactly
  ``Linear(feature_dim, num_classes)`` with a C×C ETF, and the pFedCSPC baselines keep their
  encoder + projection MLP + one FC layer. ``projection="none"``: no g; the ETF (d = m) acts on the
  normalised φ output directly (needs m ≥ C; the SplitModel head is unused).
- β starts at ``beta_init`` = 1.0 (official code's default; its small CNN uses 10).
- P is drawn from a Gaussian (the official code QR-factorises a uniform matrix; any orthonormal P
  gives an ETF).
- ``personalized_model`` returns the global network (it has no generator to run the adaptation).

A pFedCSPC (TNNLS) Table II baseline.
"""
from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..errors import ConfigError
from ..fl.aggregate import weighted_average
from ..fl.client_data import ClientData
from ..fl.local import TrainStats, evaluate_model, make_sgd, train_epochs
from ..fl.method import ClientUpdate, EvalResult, Method, State
from ..fl.seeding import derive_seed
from ..models.base import SplitModel
from ..params import hp
from .registry import register_method

ETF_KEY = "head.etf"
PROJECTIONS = ("head", "none")
PERSONALIZE = ("paper", "finetune", "none")


def simplex_etf(dim: int, num_classes: int, generator: torch.Generator) -> Tensor:
    """A ``[dim, num_classes]`` simplex ETF: unit columns with pairwise cosine −1/(C−1)."""
    if num_classes < 2:
        raise ValueError("a simplex ETF needs at least 2 classes")
    if dim < num_classes:
        raise ValueError(f"a simplex ETF of {num_classes} classes needs dim >= {num_classes}, got {dim}")
    a = torch.randn(dim, num_classes, generator=generator, dtype=torch.float64)
    p, _ = torch.linalg.qr(a)  # [dim, C], orthonormal columns
    c = num_classes
    center = torch.eye(c, dtype=torch.float64) - torch.full((c, c), 1.0 / c, dtype=torch.float64)
    return (math.sqrt(c / (c - 1)) * p @ center).to(torch.float32)


class ETFHead(nn.Module):
    """β · Vᵀ normalize(g(z)); V (``etf``) is a parameter that is frozen except in personalisation."""

    def __init__(self, proj: nn.Module, etf: Tensor, beta: float):
        super().__init__()
        self.proj = proj
        self.etf = nn.Parameter(etf.clone(), requires_grad=False)
        self.beta = nn.Parameter(torch.tensor(float(beta)))

    def normalized(self, z: Tensor) -> Tensor:
        return F.normalize(self.proj(z), dim=1, eps=1e-12)

    def forward(self, z: Tensor) -> Tensor:
        return self.beta * (self.normalized(z) @ self.etf)


def balanced_feature_loss(logits: Tensor, y: Tensor, counts: Tensor, power: float) -> Tensor:
    """CE of ``logits + power · log n_c`` (n_c = client class counts); plain CE for ``power = 0``."""
    if power == 0:
        return F.cross_entropy(logits, y)
    log_n = torch.log(counts.to(logits.dtype).to(logits.device))  # −inf for absent classes
    return F.cross_entropy(logits + power * log_n, y)


@dataclass
class FedETFParams:
    projection: str = hp("head", choices=PROJECTIONS)  # "head" (g = the SplitModel head, d = C) | "none" (d = m)
    beta_init: float = hp(1.0, gt=0)  # [official code default]
    prior_power: float = hp(1.0, ge=0)  # γ of the balanced loss [official code: balanced softmax]
    personalize: str = hp("paper", choices=PERSONALIZE)  # "paper" | "finetune" | "none"
    pers_epochs: int | None = hp(None, ge=0)  # balanced-loss epochs before the cycles; None = train.local_epochs
    pers_cycles: int = hp(20, ge=0)  # [official code]
    pers_cycle_epochs: int = hp(3, ge=0)  # [official code]
    pers_etf_lr: float = hp(0.1, gt=0)  # [official code]
    pers_proj_lr: float = hp(0.05, gt=0)  # [official code]


@register_method("fedetf")
class FedETF(Method):
    """FedETF: a fixed simplex-ETF classifier on normalised projected features; φ, g, β averaged."""

    Params = FedETFParams

    def __init__(self, ctx, params):
        super().__init__(ctx, params)
        base = ctx.create_model(seed=0)
        self._check_dims(base)
        # Scratch network: states are loaded into it, never kept in it.
        self.net = self._wrap(base, torch.zeros(self._dim(base), base.num_classes))
        self.keys = list(self.net.state_dict().keys())
        self.upload_keys = [k for k in self.keys if k != ETF_KEY]

    # Model --------------------------------------------------------------------------------------
    def _check_dims(self, base: SplitModel) -> None:
        if base.num_classes < 2:
            raise ConfigError("FedETF needs at least 2 classes")
        if self.p.projection == "none" and base.feature_dim < base.num_classes:
            raise ConfigError(f"method.args.projection='none' needs feature_dim >= num_classes "
                              f"({base.feature_dim} < {base.num_classes}); valid: head")

    def _dim(self, base: SplitModel) -> int:
        return base.num_classes if self.p.projection == "head" else base.feature_dim

    def _etf(self, base: SplitModel, seed: int) -> Tensor:
        gen = torch.Generator().manual_seed(derive_seed(seed, "init", 0xE7F))
        return simplex_etf(self._dim(base), base.num_classes, gen)

    def _wrap(self, base: SplitModel, etf: Tensor) -> SplitModel:
        proj = base.head if self.p.projection == "head" else nn.Identity()
        head = ETFHead(proj, etf.to(next(base.parameters()).device), self.p.beta_init)
        return SplitModel(base.features, head, base.feature_dim, base.num_classes).to(self.ctx.device)

    def load(self, shared: State) -> SplitModel:
        self.net.load_state_dict(shared, strict=True)
        for name, t in self.net.named_parameters():
            t.requires_grad_(name != ETF_KEY)
        return self.net

    # The five steps -----------------------------------------------------------------------------
    def init_server(self, seed: int) -> tuple[State, State]:
        base = self.ctx.create_model(seed)
        net = self._wrap(base, self._etf(base, seed))
        return {k: v.detach().clone() for k, v in net.state_dict().items()}, {}

    def init_client(self, cid: int, seed: int) -> State:
        return {}

    def train_balanced(self, net: SplitModel, data: ClientData, gen: torch.Generator, epochs: int) -> TrainStats:
        t = self.ctx.cfg.train
        counts = torch.bincount(data.train_y.long(), minlength=net.num_classes)
        opt = make_sgd(net.parameters(), t.lr, t.momentum, t.weight_decay)  # V is frozen: not in opt
        power = float(self.p.prior_power)
        return train_epochs(net, data, opt, epochs, t.batch_size, gen,
                            loss_fn=lambda out, y: balanced_feature_loss(out, y, counts, power))

    def client_update(self, shared: State, state: State, data: ClientData, gen: torch.Generator,
                      rnd: int) -> ClientUpdate:
        net = self.load(shared)
        stats = self.train_balanced(net, data, gen, self.ctx.cfg.train.local_epochs)
        sd = net.state_dict()
        upload = {k: sd[k].detach().clone() for k in self.upload_keys}
        return ClientUpdate(upload=upload, state=state, num_samples=data.num_train, metrics=stats.metrics())

    def aggregate(self, shared: State, updates: list[ClientUpdate], server_state: State,
                  rnd: int) -> tuple[State, State]:
        if not updates:
            return shared, server_state
        new = weighted_average([u.upload for u in updates], [u.num_samples for u in updates])
        new[ETF_KEY] = shared[ETF_KEY]  # fixed: never aggregated
        return new, server_state

    # Personalisation and evaluation --------------------------------------------------------------
    def personalize(self, net: SplitModel, data: ClientData, gen: torch.Generator) -> None:
        """The paper's local adaptation (module docstring) on ``net`` in place."""
        t = self.ctx.cfg.train
        p = self.p
        epochs = t.local_epochs if p.pers_epochs is None else p.pers_epochs
        if epochs:
            self.train_balanced(net, data, gen, epochs)
        head: ETFHead = net.head
        for _ in range(p.pers_cycles):
            for params, opt_of in (([head.etf], lambda ps: torch.optim.SGD(ps, lr=p.pers_etf_lr)),
                                   (list(head.proj.parameters()),
                                    lambda ps: make_sgd(ps, p.pers_proj_lr, t.momentum, t.weight_decay))):
                if not params:  # projection="none": no g to adapt
                    continue
                for q in net.parameters():
                    q.requires_grad_(False)
                for q in params:
                    q.requires_grad_(True)
                train_epochs(net, data, opt_of(params), p.pers_cycle_epochs, t.batch_size, gen)

    def evaluate(self, shared: State, state: State, data: ClientData, gen: torch.Generator) -> EvalResult:
        net = self.load(shared)
        if self.p.personalize == "paper" and data.num_train:
            self.personalize(net, data, gen)
        elif self.p.personalize == "finetune":
            t = self.ctx.cfg.train
            if t.eval_finetune_epochs and data.num_train:
                opt = make_sgd(net.parameters(), t.lr, t.momentum, t.weight_decay)
                train_epochs(net, data, opt, t.eval_finetune_epochs, t.batch_size, gen)
        return evaluate_model(net, data)

    def global_model(self, shared: State, server_state: State):
        return self.load(shared)

    def personalized_model(self, shared: State, state: State):
        return copy.deepcopy(self.load(shared))
