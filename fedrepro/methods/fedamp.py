"""FedAMP (Huang et al., AAAI 2021): attentive message passing between personalised models.

"Personalized Cross-Silo Federated Learning on Non-IID Data". One of FedPFT's nine PFL baselines
(FedPFT (ICLR) Table 2).

Every client i owns a personalised model w_i (its whole state dict, kept in the client state and used
for evaluation). Round k:

1. Server (after the previous round's uploads): for every client i it forms the personalised cloud
   model u_i = Σ_j ξ_ij w_j, a convex-style combination of the clients' latest models with
   attention weights ξ (below).
2. Client i: starting from its own w_i it minimises F_i(w) + λ/(2α_k)·‖w − u_i‖² for the local
   epochs (SGD; the proximal gradient (λ/α_k)(w − u_i) is added to every parameter's gradient),
   stores the result as its new w_i and uploads it.

Attention weights, ``attention="exp"`` (default; the paper's FedAMP): with the attention-inducing
function A(x) = 1 − exp(−x/σ) and d_ij = ‖w_i − w_j‖²,

    ξ_ij = α_k·A'(d_ij) = α_k·exp(−d_ij/σ)/σ  (j ≠ i),     ξ_ii = 1 − Σ_{j≠i} ξ_ij,

so every row sums to 1 and a closer model gets a larger weight. Nothing keeps ξ_ii ≥ 0: when
α_k/σ is large against the distances, ξ_ii is negative and u_i extrapolates (the paper's theory
assumes α_k small enough; PFLlib and Fling compute it the same way, unguarded). That is less odd
than it looks: u_i − w_i = Σ_{j≠i} ξ_ij (w_j − w_i), so at the start of local training the proximal
gradient is λ·Σ_{j≠i} A'(d_ij)(w_i − w_j), a pull towards the neighbours in which α_k cancels;
α_k only sets how stiffly w is then held near u_i. With the defaults below the stiffness λ/α_k is
tiny and FedAMP behaves almost like Local training, as its FedPFT table rows do.
``server_state["attention"]`` keeps the last matrix (float64) so this can be inspected.

``attention="cosine"`` is the paper's HeurFedAMP for deep networks: ξ_ii = ``self_weight``
(a hyperparameter; ``None`` = 1/N with N the number of clients in the pool, flgo's default) and
ξ_ij = (1 − ξ_ii)·softmax_{j≠i}(``heur_sigma``·cos(w_i, w_j)).

Defaults. λ = 1, α_k = 10⁴, σ = 100, α_k multiplied by 0.1 every 30 rounds: Fling's
``argzoo/cifar10/cifar10_fedamp_resnet_config.py`` (Fling is the FedPFT authors' framework, same
40-client ResNet-8 protocol). flgo's FedAMP has the same λ, α_k and decay (σ = 25); PFLlib defaults
to λ = α_k = σ = 1 without decay. We could not check the values the paper's text gives.
``heur_sigma = 25`` is flgo's value (it shares σ with the exp form). **Caveat**: with decay the
proximal stiffness λ/α_k grows 10× every ``alpha_decay_every`` rounds. SGD on it is stable only
while lr·λ/α_k < 2(1 + momentum); at lr 0.1, momentum 0.9 that fails from α_k = 0.01, i.e. round
180 on, and training diverges (the best-round score hides it); by round 1000 α_k is 10⁻²⁹ and
λ/α_k overflows. PFLlib adds
0.5·λ/α·‖w − u‖ (the norm, not its square) to the loss; we use the paper's and Fling's square.

The α floor. ``alpha_floor="step"`` holds α_k ≥ λ·lr, so that the proximal term alone moves w by
at most its whole distance to u_i in one plain SGD step (lr·λ/α_k ≤ 1), well inside momentum SGD's
stability bound 2(1 + momentum). Fling's decay is kept until it reaches the floor (round 150 at
lr 0.1) and stops there. The FedPFT tables use it at the paper profile (1000 rounds); at the laptop
profile's 50 rounds the decay never gets near it and the default ("none") stands. Our choice: the
FedAMP paper's analysis assumes α_k small enough for its bound, not a schedule that runs to zero.

Other named options and choices:

- ``start_from``: ``"personal"`` (default: PFLlib and Fling keep training the client's own w_i;
  u_i only enters through the proximal term) or ``"cloud"`` (flgo: start local SGD at u_i).
- Only parameters enter distances, cloud models and the proximal term (PFLlib/Fling use
  ``model.parameters()``); BatchNorm running statistics stay in w_i, i.e. personal.
- Pool: the attention is computed over the clients that have uploaded at least once (their latest
  model). A client that never uploaded (not yet sampled, held out) gets no cloud model and trains
  with u_i = its own w_i (zero proximal pull). With full participation, FedAMP's cross-silo setting,
  this is the paper's scheme from round 1 on; in round 0 every client starts from the same model.
- α_k in round k (0-based) is ``alpha_k · alpha_decay_rate ** (k // alpha_decay_every)``; the
  server uses the next round's α when it forms the cloud models, so ξ and the proximal term of one
  round share the same α_k.

Flower-hostable design: ``shared = {"cloud": {cid: u_cid}}`` holds one cloud model per client
(parameters only). A Flower server sends client i only ``shared["cloud"][i]``; the simulator passes
the whole mapping and the client reads its own entry by ``data.cid``. Each upload is
``{"cid": i, "params": w_i}``; ``server_state = {"models": {cid: latest w}, "attention": ξ,
"attention_ids": the pool's client ids}`` (checkpointed with the run).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import torch
from torch import Tensor

from ..fl.client_data import ClientData
from ..fl.local import make_sgd, proximal_hook, train_epochs
from ..fl.method import ClientUpdate, State
from ..params import hp
from .base import ModelMethod
from .registry import register_method

ATTENTIONS = ("exp", "cosine")
STARTS = ("personal", "cloud")
ALPHA_FLOORS = ("none", "step")


@dataclass
class FedAMPParams:
    attention: str = hp("exp", choices=ATTENTIONS)
    alpha_k: float = hp(1e4, gt=0)
    lam: float = hp(1.0, ge=0)
    sigma: float = hp(100.0, gt=0)
    alpha_decay_rate: float = hp(0.1, gt=0)
    alpha_decay_every: int = hp(30, ge=0)  # 0 = never decay
    self_weight: float | None = hp(None, ge=0, le=1)
    heur_sigma: float = hp(25.0, ge=0)
    start_from: str = hp("personal", choices=STARTS)
    # "step": α_k never falls below λ·lr (see the module docstring, "The α floor"); "none": the
    # decay runs on unbounded.
    alpha_floor: str = hp("none", choices=ALPHA_FLOORS)

    def alpha_at(self, rnd: int, lr: float | None = None) -> float:
        """α_k of round ``rnd`` (0-based); with ``alpha_floor="step"`` at least λ·``lr``."""
        alpha = float(self.alpha_k)
        if self.alpha_decay_every > 0:
            alpha *= float(self.alpha_decay_rate) ** (rnd // self.alpha_decay_every)
        if self.alpha_floor == "step":
            if lr is None:
                raise ValueError("alpha_floor='step' needs the learning rate")
            alpha = max(alpha, float(self.lam) * float(lr))
        return alpha


def pairwise_geometry(models: Sequence[Mapping[str, Tensor]]) -> tuple[Tensor, Tensor]:
    """Squared distances ‖w_i − w_j‖² and cosine similarities of flattened models, in float64.

    Accumulated key by key from Gram matrices, so the flattened models are never materialised.
    """
    n = len(models)
    keys = list(models[0].keys())
    dev = models[0][keys[0]].device if keys else torch.device("cpu")
    gram = torch.zeros(n, n, dtype=torch.float64, device=dev)
    for k in keys:
        x = torch.stack([m[k].detach().reshape(-1).to(torch.float64) for m in models])
        gram += x @ x.T
    sq = gram.diagonal()
    dist = (sq[:, None] + sq[None, :] - 2.0 * gram).clamp_min_(0.0)
    dist.fill_diagonal_(0.0)
    norms = sq.clamp_min(1e-300).sqrt()
    cos = gram / (norms[:, None] * norms[None, :])
    return dist, cos


def attention_weights(models: Sequence[Mapping[str, Tensor]], *, mode: str = "exp", alpha_k: float = 1e4,
                      sigma: float = 100.0, self_weight: float | None = None,
                      heur_sigma: float = 25.0) -> Tensor:
    """FedAMP's message-passing matrix ξ ([n, n], float64, rows sum to 1); see the module docstring."""
    n = len(models)
    if n == 0:
        raise ValueError("attention_weights needs at least one model")
    if n == 1:
        return torch.ones(1, 1, dtype=torch.float64)
    dist, cos = pairwise_geometry(models)
    eye = torch.eye(n, dtype=torch.bool, device=dist.device)
    if mode == "exp":
        xi = float(alpha_k) * torch.exp(-dist / float(sigma)) / float(sigma)
        xi = xi.masked_fill(eye, 0.0)
        return xi + torch.diag(1.0 - xi.sum(dim=1))
    if mode == "cosine":
        s = 1.0 / n if self_weight is None else float(self_weight)
        logits = (float(heur_sigma) * cos).masked_fill(eye, float("-inf"))
        return torch.softmax(logits, dim=1) * (1.0 - s) + s * eye.to(torch.float64)
    raise ValueError(f"unknown attention mode {mode!r}; valid: {', '.join(ATTENTIONS)}")


def combine(models: Sequence[Mapping[str, Tensor]], weights: Tensor) -> list[dict[str, Tensor]]:
    """u_i = Σ_j weights[i, j]·w_j for every row i, key by key."""
    out: list[dict[str, Tensor]] = [{} for _ in range(weights.shape[0])]
    for k in models[0]:
        ref = models[0][k]
        x = torch.stack([m[k].reshape(-1).to(torch.float64) for m in models])
        u = (weights.to(x.device) @ x).to(ref.dtype)
        for i in range(len(out)):
            out[i][k] = u[i].reshape(ref.shape).clone()
    return out


@register_method("fedamp")
class FedAMP(ModelMethod):
    """FedAMP: each client is pulled towards an attention-weighted mix of similar clients' models."""

    Params = FedAMPParams

    def __init__(self, ctx, params):
        super().__init__(ctx, params)
        self.param_keys = [name for name, _ in self.model.named_parameters()]

    def personal_keys(self, model) -> set[str]:
        return set(model.state_dict().keys())  # the whole model w_i is the client's

    def load(self, shared: State, state: State):
        self.model.load_state_dict(state, strict=True)
        for t in self.model.parameters():
            t.requires_grad_(True)
        return self.model

    # The five steps ---------------------------------------------------------------------------
    def init_server(self, seed: int) -> tuple[State, State]:
        return {"cloud": {}}, {"models": {}}

    def client_update(self, shared: State, state: State, data: ClientData, gen: torch.Generator,
                      rnd: int) -> ClientUpdate:
        t = self.ctx.cfg.train
        model = self.load(shared, state)
        params = dict(model.named_parameters())
        cloud = shared.get("cloud", {}).get(data.cid)
        if cloud is None:  # never uploaded: the pool is the client alone, so u_i = w_i
            cloud = {k: params[k].detach().clone() for k in self.param_keys}
        if self.p.start_from == "cloud":
            with torch.no_grad():
                for k in self.param_keys:
                    params[k].copy_(cloud[k])
        coef = float(self.p.lam) / self.p.alpha_at(rnd, t.lr)  # d/dw of λ/(2α_k)·‖w − u‖²
        anchors = [(params[k], cloud[k]) for k in self.param_keys]
        opt = make_sgd(model.parameters(), t.lr, t.momentum, t.weight_decay)
        stats = train_epochs(model, data, opt, t.local_epochs, t.batch_size, gen,
                             grad_hook=proximal_hook(anchors, coef))
        sd = model.state_dict()
        new_state = {k: v.detach().clone() for k, v in sd.items()}
        upload = {"cid": int(data.cid), "params": {k: sd[k].detach().clone() for k in self.param_keys}}
        return ClientUpdate(upload=upload, state=new_state, num_samples=data.num_train, metrics=stats.metrics())

    def aggregate(self, shared: State, updates: list, server_state: State, rnd: int) -> tuple[State, State]:
        models = dict(server_state.get("models", {}))
        for u in updates:
            models[int(u.upload["cid"])] = u.upload["params"]
        if not models:
            return shared, server_state
        ids = sorted(models)
        pool = [models[i] for i in ids]
        xi = attention_weights(pool, mode=self.p.attention, alpha_k=self.p.alpha_at(rnd + 1, self.ctx.cfg.train.lr),
                               sigma=self.p.sigma,
                               self_weight=self.p.self_weight, heur_sigma=self.p.heur_sigma)
        clouds = combine(pool, xi)
        new_shared = {"cloud": dict(zip(ids, clouds))}
        new_server = {"models": models, "attention": xi.cpu(),
                      "attention_ids": torch.tensor(ids, dtype=torch.long)}
        return new_shared, new_server
