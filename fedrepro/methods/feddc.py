"""FedDC (Gao, Fu, Li, Chen, Xu & Xu, CVPR 2022): "FedDC: Federated Learning with Non-IID Data via
Local Drift Decoupling and Correction".

Each client i keeps a *local drift* h_i that tracks the gap between its local parameters θ_i and
the global ones w, and a SCAFFOLD-style gradient correction. One round (the paper's Algorithm 1):

- client i downloads w and the global update direction; θ_i starts at w;
- local SGD for K steps on F_i(θ) = L_i(θ) + (α/2)·‖θ + h_i − w‖² + ⟨θ, c − c_i⟩. The last term is
  the paper's G(θ_i; g_i, g) = (1/(ηK))·⟨θ_i, g_i − g⟩ with the update directions g_i, g written
  in gradient units, c_i = −g_i/(ηK) (as SCAFFOLD's control variates): its gradient c − c_i
  replaces the client's gradient drift by the global one;
- h_i ← h_i + (θ_i − w);
- the client's update direction is refreshed (``correction_update``, below) and the client uploads
  the drift-corrected model θ_i + h_i and the change of c_i;
- the server: w ← average of the uploaded θ_i + h_i; c ← c + (1/N)·Σ_uploads Δc_i, i.e. c stays
  the mean of all N clients' c_i (a client that has not trained yet counts with c_i = 0, as in
  SCAFFOLD and the official code). N counts the clients that can train (held-out ones excluded).

Client state: h_i and c_i (created at zero on the client's first round). Server (broadcast): w
and c. Only θ_i + h_i and Δc_i leave the client. Drift and correction act on parameters only;
buffers (BatchNorm running statistics) are uploaded as they are and averaged with the same weights.

Named options and choices the paper leaves open:

- ``alpha`` (α) = 0.01: the official code's CIFAR-10/100 setting (``alpha_coef = 1e-2``). The
  official code further divides α by the client's relative dataset size n_i/n̄ (inherited from
  FedDyn's code) and divides c by it on the client; neither is in the paper and neither is done here.
- ``correction_update``: how c_i is refreshed after local training, with Δθ = θ_i − w and S the
  effective number of lr-sized steps (below).
  ``"scaffold"`` (default, the official code): c_i ← c_i − c + (−Δθ)/S, SCAFFOLD's option II:
  the correction's own contribution to Δθ is taken out again, so c_i estimates the client's mean
  gradient of L_i + the drift penalty. ``"raw"``: c_i ← (−Δθ)/S, the literal "local update value
  of the last round"; it feeds the previous correction back into the next one (with a fixed
  gradient it alternates between full and no correction).
- ``step_count``: S in the conversion from an update to a gradient. ``"plain"`` is the paper's
  ηK (K = local_epochs·⌈n_i/B⌉ this client's steps), exact for plain SGD. ``"momentum"`` (default)
  counts momentum's amplification: with the run's momentum β and a fresh optimiser each round, K
  steps of a constant gradient g move the weights by η·g·Σ_{k=1..K}(1−β^k)/(1−β), so
  S = η·(K − β(1−β^K)/(1−β))/(1−β). It equals ηK when β = 0. With β = 0.9 (the pFedCSPC protocol)
  ``"plain"`` overestimates every c_i about tenfold and the correction oscillates and diverges.
- ``weighting``: ``"uniform"`` (default; the paper's average over the participating clients and the
  official ``np.mean``) or ``"samples"`` (FedAvg's sample weights) for the model average. The
  official code averages θ_i over this round's clients and adds the mean h_i over *all* clients;
  with full participation (pFedCSPC's C = 1.0) that is the same as averaging θ_i + h_i.
- η is ``train.lr``; weight decay is part of the local optimiser, so it enters Δθ and hence c_i, as
  in the official code.

Evaluation: a global-FL method: ``global_model`` is w; a client's score is w on its test split,
after ``train.eval_finetune_epochs`` of CE fine-tuning when set (plain CE, no drift terms).

A pFedCSPC (TNNLS) Table II baseline.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ..fl.client_data import ClientData
from ..fl.local import make_sgd, proximal_hook, train_epochs
from ..fl.method import ClientUpdate, State
from ..params import hp
from .base import ModelMethod
from .registry import register_method

H = "h."  # client state: local drift h_i
C = "c."  # client state: c_i; shared: the global c
DC = "dc."  # upload: the change of c_i
CORRECTION_UPDATES = ("scaffold", "raw")
STEP_COUNTS = ("momentum", "plain")
WEIGHTINGS = ("uniform", "samples")


@dataclass
class FedDCParams:
    alpha: float = hp(0.01, ge=0)  # official code, CIFAR-10/100 (alpha_coef = 1e-2)
    correction_update: str = hp("scaffold", choices=CORRECTION_UPDATES)  # official code: SCAFFOLD option II
    step_count: str = hp("momentum", choices=STEP_COUNTS)  # equals the paper's ηK without momentum
    weighting: str = hp("uniform", choices=WEIGHTINGS)  # paper / official code: plain mean over clients


def effective_steps(k: int, momentum: float) -> float:
    """How many lr-sized steps K SGD steps with heavy-ball ``momentum`` make on a constant gradient
    (fresh momentum buffer): Σ_{j=1..K} (1 − β^j)/(1 − β); K when β = 0."""
    b = float(momentum)
    if b == 0.0:
        return float(k)
    return (k - b * (1.0 - b ** k) / (1.0 - b)) / (1.0 - b)


@register_method("feddc")
class FedDC(ModelMethod):
    """FedDC: local drift variables decouple local from global models; SCAFFOLD-like gradient correction."""

    Params = FedDCParams

    def __init__(self, ctx, params):
        super().__init__(ctx, params)
        self.param_names = [n for n, _ in self.model.named_parameters()]
        d = ctx.cfg.data
        self.num_trainable = max(int(ctx.num_clients) - int(getattr(d, "holdout_clients", 0) or 0), 1)

    # State --------------------------------------------------------------------------------
    def init_server(self, seed: int) -> tuple[State, State]:
        shared, server = super().init_server(seed)
        shared.update({C + n: torch.zeros_like(shared[n]) for n in self.param_names})
        return shared, server

    def init_client(self, cid: int, seed: int) -> State:
        return {}  # h_i = c_i = 0, created on the client's first round

    def load(self, shared: State, state: State):
        return super().load({k: shared[k] for k in self.shared_keys}, state)

    def local_step_count(self, data: ClientData) -> int:
        t = self.ctx.cfg.train
        return int(t.local_epochs) * math.ceil(data.num_train / int(t.batch_size))

    # Client -------------------------------------------------------------------------------
    def client_update(self, shared: State, state: State, data: ClientData, gen: torch.Generator,
                      rnd: int) -> ClientUpdate:
        t = self.ctx.cfg.train
        model = self.load(shared, state)
        params = dict(model.named_parameters())
        w = {n: shared[n].detach().clone() for n in self.param_names}
        h = {n: state.get(H + n, torch.zeros_like(w[n])) for n in self.param_names}
        c_i = {n: state.get(C + n, torch.zeros_like(w[n])) for n in self.param_names}
        c = {n: shared[C + n] for n in self.param_names}
        # (α/2)‖θ + h − w‖² = (α/2)‖θ − (w − h)‖²: FedProx's term with the anchor w − h
        prox = proximal_hook([(params[n], w[n] - h[n]) for n in self.param_names], float(self.p.alpha))
        shift = {n: c[n] - c_i[n] for n in self.param_names}  # ∇⟨θ, c − c_i⟩

        def hook() -> None:
            if prox is not None:
                prox()
            with torch.no_grad():
                for n in self.param_names:
                    if params[n].grad is not None:
                        params[n].grad.add_(shift[n])

        opt = make_sgd(model.parameters(), t.lr, t.momentum, t.weight_decay)
        stats = train_epochs(model, data, opt, t.local_epochs, t.batch_size, gen, grad_hook=hook)

        k = self.local_step_count(data)
        steps = effective_steps(k, t.momentum) if self.p.step_count == "momentum" else float(k)
        scale = 1.0 / (float(t.lr) * max(steps, 1e-12))
        sd = model.state_dict()
        upload, new_state = {}, dict(state)
        for key in self.shared_keys:
            upload[key] = sd[key].detach().clone()
        for n in self.param_names:
            theta = sd[n].detach()
            delta = theta - w[n]
            h_new = h[n] + delta
            grad_est = -delta * scale
            c_new = c_i[n] - c[n] + grad_est if self.p.correction_update == "scaffold" else grad_est
            upload[n] = theta + h_new
            upload[DC + n] = c_new - c_i[n]
            new_state[H + n] = h_new.clone()
            new_state[C + n] = c_new.clone()
        return ClientUpdate(upload=upload, state=new_state, num_samples=data.num_train,
                            metrics=stats.metrics())

    # Server -------------------------------------------------------------------------------
    def aggregate(self, shared: State, updates: list[ClientUpdate], server_state: State,
                  rnd: int) -> tuple[State, State]:
        if not updates:
            return shared, server_state
        weights = [u.num_samples if self.p.weighting == "samples" else 1.0 for u in updates]
        new = self.average_shared(updates, weights)
        for n in self.param_names:
            dc = sum(u.upload[DC + n] for u in updates)
            new[C + n] = shared[C + n] + dc / self.num_trainable
        return new, server_state
