"""GRACE (Zhang, Fan, Xu, Yao, Zhang & Wang, MICCAI 2023): generalized and personalized gradient
correction. "GRACE: A Generalized and Personalized Federated Learning Method for Medical Imaging"
(pFedCSPC (TNNLS) reference [65], a Table II baseline).

**Uncertainty.** The public repository (MediaBrain-SJTU/GPFL-GRACE) releases the server side only
(``grace_server.py``); its client file is missing and we could not read the paper's client
equations. The server below follows that code; the client is our reconstruction of the abstract's
"feature alignment regularization under a meta-learning framework ... to correct the personalized
gradients from overfitting", using the repository's alignment options (``--align_type CORAL
--align_weight 0.1 --align_warmup 0``) in an MLDG-style meta objective.

Client k, round t (starts from the global model θ_g; the trained model is its personalised model):
for every mini-batch (x, y)

- meta-train (the personalised step): L_in(θ) = CE(f_θ(x), y), θ' = θ − α ∇_θ L_in(θ);
- meta-test (the correction): L_al(θ') = CORAL(φ_θ'(x), φ_θg(x)), the alignment of the
  personalised features with the (frozen) global model's features on the same batch;
- one SGD step on L_in(θ) + λ · L_al(θ − α ∇L_in(θ)), differentiated through the inner step
  (``first_order=True`` drops the second-order term, as first-order MAML).

CORAL (Sun & Saenko 2016): ‖Cov(a) − Cov(b)‖²_F / (4 d²) with unbiased batch covariances;
``align_type="mse"`` uses the mean squared feature difference instead. Because of the 1/(4d²),
the term is small at λ = 0.1 unless the features have a large spread (on the 64-d synthetic test
model it barely moves the gradient); we keep the repository's values.

Server, consistency-enhanced re-weighting aggregation (CRA) [code ``grace_server.py``]: with the
updates g_k = θ_g − θ_k of the sampled clients,

- c_k = mean_{j≠k} cos(g_k, g_j) (``similarity``: ``"total"`` = cosine of the flattened update, the
  code's default; ``"layer"`` = mean of per-parameter-tensor cosines; ``"layer_reweight"`` = those
  weighted linearly from 1 (first tensor) to 0 (last), normalised to mean 1);
- if min c < 0: c ← c − min c + 10⁻³; then if max c > 1: c ← c / max c;
- w_k = c_k n_k / Σ_j c_j n_j (n_k the client's sample count);
- θ_g ← θ_g − η Σ_k w_k g_k (``server_lr`` η = 1: the re-weighted average); buffers (BatchNorm
  running statistics) are the w-weighted average. ``server_state["cra_weights"]`` keeps w.

Named choices: α = ``inner_lr`` (None = ``train.lr``); the meta-test reuses the meta-train batch
(a single local domain has no second one); the global model's features are taken in train mode on
a throw-away copy, like the local model's; the fast weights' forward updates BatchNorm running
statistics a second time per step. ``eval_model="personal"`` (default) scores a client with its
model after its last local training (GRACE's local metric); a client that has not trained yet, or
``"global"``, is scored like FedAvg-FT (the global model after ``train.eval_finetune_epochs``).
The global model (ACC_global) is the CRA-aggregated model.

A pFedCSPC (TNNLS) Table II baseline.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.func import functional_call

from ..fl.aggregate import weighted_average
from ..fl.client_data import ClientData
from ..fl.local import TrainStats, make_sgd, train_epochs
from ..fl.method import ClientUpdate, State
from ..params import hp
from .base import OwnModelMethod
from .registry import register_method

PERSONAL = OwnModelMethod.OWN_PREFIX  # the client's own model in its state
ALIGN_TYPES = ("coral", "mse")
SIMILARITIES = ("total", "layer", "layer_reweight")
EVAL_MODELS = ("personal", "global")


@dataclass
class GRACEParams:
    align_weight: float = hp(0.1, ge=0)  # λ [repository README command]
    align_type: str = hp("coral", choices=ALIGN_TYPES)  # [repository README command]
    align_warmup: int = hp(0, ge=0)  # rounds without the alignment term [repository default]
    inner_lr: float | None = hp(None, gt=0)  # α; None = train.lr [ours]
    first_order: bool = hp(False)
    similarity: str = hp("total", choices=SIMILARITIES)  # [repository default gm_type]
    server_lr: float = hp(1.0, gt=0)  # η [repository default]
    eval_model: str = hp("personal", choices=EVAL_MODELS)


def _cov(a: Tensor) -> Tensor:
    n = a.shape[0]
    if n < 2:
        return torch.zeros(a.shape[1], a.shape[1], dtype=a.dtype, device=a.device)
    d = a - a.mean(0, keepdim=True)
    return d.T @ d / (n - 1)


def coral_loss(a: Tensor, b: Tensor) -> Tensor:
    """Deep CORAL: ‖Cov(a) − Cov(b)‖²_F / (4 d²)."""
    d = a.shape[1]
    return (_cov(a) - _cov(b)).pow(2).sum() / (4 * d * d)


def align_loss(kind: str, a: Tensor, b: Tensor) -> Tensor:
    return coral_loss(a, b) if kind == "coral" else F.mse_loss(a, b)


def _cos(x: Tensor, y: Tensor, eps: float = 1e-6) -> float:
    return float((x * y).sum() / (x.norm().clamp_min(eps) * y.norm().clamp_min(eps)))


def consistency(updates: list[list[Tensor]], mode: str = "total") -> list[float]:
    """c_k = mean over j ≠ k of the similarity of update k with update j (module docstring);
    ``updates[k]`` is client k's list of per-parameter updates. One update: [1.0]."""
    K = len(updates)
    if K == 1:
        return [1.0]
    L = len(updates[0])
    reweight = torch.linspace(1.0, 0.0, L, dtype=torch.float64) if L > 1 else torch.ones(1, dtype=torch.float64)
    reweight = reweight / reweight.mean()
    flat = [torch.cat([t.reshape(-1) for t in u]) for u in updates] if mode == "total" else None

    def sim(i: int, j: int) -> float:
        if mode == "total":
            return _cos(flat[i], flat[j])
        per = torch.tensor([_cos(a.reshape(-1), b.reshape(-1)) for a, b in zip(updates[i], updates[j])],
                           dtype=torch.float64)
        return float((per * reweight).mean()) if mode == "layer_reweight" else float(per.mean())

    return [sum(sim(k, j) for j in range(K) if j != k) / (K - 1) for k in range(K)]


def cra_weights(cons: list[float], num_samples: list[int]) -> list[float]:
    """Shift the consistencies positive (if any is negative), cap them at 1, multiply by the sample
    counts and normalise: GRACE's aggregation weights."""
    c = list(cons)
    lo = min(c)
    if lo < 0:
        c = [v - lo + 1e-3 for v in c]
    hi = max(c)
    if hi > 1:
        c = [v / hi for v in c]
    w = [v * n for v, n in zip(c, num_samples)]
    s = sum(w)
    return [v / s for v in w] if s > 0 else [1.0 / len(w)] * len(w)


@register_method("grace")
class GRACE(OwnModelMethod):
    """GRACE: meta-learned feature alignment to the global model locally; consistency-reweighted aggregation."""

    Params = GRACEParams

    def __init__(self, ctx, params):
        super().__init__(ctx, params)
        self.param_keys = [name for name, _ in self.model.named_parameters()]
        self.global_copy = copy.deepcopy(self.model)  # scratch for the frozen global features

    # Client -------------------------------------------------------------------------------------
    def meta_step(self, model, gmodel, x: Tensor, y: Tensor, lam: float, alpha: float) -> tuple[Tensor, Tensor]:
        """Set the parameters' ``.grad`` to ∇_θ [L_in(θ) + λ L_al(θ − α∇L_in(θ))]; returns (L_in, L_al)."""
        names = self.param_keys
        params = [p for _, p in model.named_parameters()]
        loss_in = F.cross_entropy(model(x), y)
        if lam == 0:
            grads = torch.autograd.grad(loss_in, params, allow_unused=True)
            for p, g in zip(params, grads):
                p.grad = torch.zeros_like(p) if g is None else g
            return loss_in.detach(), torch.zeros(())
        with torch.no_grad():
            target = gmodel.features(x)
        second = not self.p.first_order
        grads = torch.autograd.grad(loss_in, params, create_graph=second, retain_graph=second, allow_unused=True)
        grads = [torch.zeros_like(p) if g is None else g for p, g in zip(params, grads)]
        if second:
            fast = {n: p - alpha * g for n, p, g in zip(names, params, grads)}
        else:
            fast = {n: (p - alpha * g).detach().requires_grad_(True) for n, p, g in zip(names, params, grads)}
        feat_fast = functional_call(model.features, {n[len("features."):]: v for n, v in fast.items()
                                                     if n.startswith("features.")}, (x,))
        loss_al = align_loss(self.p.align_type, feat_fast, target)
        if second:
            total = loss_in + lam * loss_al
            new = torch.autograd.grad(total, params, allow_unused=True)
            for p, g in zip(params, new):
                p.grad = torch.zeros_like(p) if g is None else g.detach()
        else:
            fast_list = [fast[n] for n in names]
            g_al = torch.autograd.grad(loss_al, fast_list, allow_unused=True)
            for p, g, ga in zip(params, grads, g_al):
                p.grad = g.detach() + (0 if ga is None else lam * ga)
        return loss_in.detach(), loss_al.detach()

    def local_train(self, model, data: ClientData, gen: torch.Generator, shared: State, rnd: int) -> TrainStats:
        t = self.ctx.cfg.train
        lam = float(self.p.align_weight) if rnd >= self.p.align_warmup else 0.0
        alpha = float(t.lr if self.p.inner_lr is None else self.p.inner_lr)
        gmodel = self.global_copy
        gmodel.load_state_dict(shared, strict=True)
        gmodel.train()
        opt = make_sgd(model.parameters(), t.lr, t.momentum, t.weight_decay)

        def step(x, y):
            opt.zero_grad(set_to_none=True)
            loss_in, _ = self.meta_step(model, gmodel, x, y, lam, alpha)
            opt.step()
            return loss_in

        return train_epochs(model, data, None, t.local_epochs, t.batch_size, gen, step=step)

    def client_update(self, shared: State, state: State, data: ClientData, gen: torch.Generator,
                      rnd: int) -> ClientUpdate:
        upd = super().client_update(shared, state, data, gen, rnd)
        upd.state = {**{k: v for k, v in state.items() if not k.startswith(PERSONAL)},
                     **{PERSONAL + k: v.clone() for k, v in upd.upload.items()}}
        return upd

    # Server -------------------------------------------------------------------------------------
    def aggregate(self, shared: State, updates: list[ClientUpdate], server_state: State,
                  rnd: int) -> tuple[State, State]:
        if not updates:
            return shared, server_state
        deltas = [[(shared[k].to(torch.float64) - u.upload[k].to(torch.float64)) for k in self.param_keys]
                  for u in updates]
        w = cra_weights(consistency(deltas, self.p.similarity), [u.num_samples for u in updates])
        eta = float(self.p.server_lr)
        new = weighted_average([u.upload for u in updates], w)  # buffers (and params at η = 1)
        for i, k in enumerate(self.param_keys):
            step = sum(wk * d[i] for wk, d in zip(w, deltas))
            new[k] = (shared[k].to(torch.float64) - eta * step).to(shared[k].dtype)
        return new, {**server_state, "cra_weights": torch.tensor(w, dtype=torch.float64)}

