"""FedALA (Zhang, Hua, Wang, Wang, Guan & Wang, AAAI 2023): adaptive local aggregation.

"FedALA: Adaptive Local Aggregation for Personalized Federated Learning". Every client keeps its
local model θ_i (whole state dict) and element-wise aggregation weights W_i for the top p layers, both
in its client state. Round t, for a sampled client i receiving the global model θ:

1. Adaptive Local Aggregation (ALA): θ̂ = θ_i + (θ − θ_i) ⊙ W on the top p layers; every lower layer
   takes θ directly. W (initialised to 1) is learned on a random s% (``rand_percent``) of the client's
   training data: per mini-batch, W ← clip(W − η ∇_W CE(θ̂), 0, 1), where ∇_W = ∇_θ̂ ⊙ (θ − θ_i). The
   first time ALA runs on a client, W is trained until convergence; afterwards one epoch per round.
2. θ_i ← θ̂, then ``train.local_epochs`` epochs of plain CE SGD on all of the client's data.
3. Upload θ_i; the server's θ is the sample-weighted FedAvg of the uploads. W never leaves the client.

Defaults (the FedALA paper's): ``rand_percent`` s = 80, ``layer_idx`` p = 1 (the head only),
``eta`` η = 1.0. Named options and choices where the paper is silent:

- ``layer_unit``: ``"layer"`` (default) counts p in layers, i.e. parameter-owning modules in
  ``named_parameters`` order (a Linear's weight and bias are one layer), as the paper does.
  ``"tensor"`` counts parameter tensors from the end, as the official code and PFLlib do (their
  ``layer_idx`` default is 2 = the head's weight and bias, "more fine-grained than its original paper";
  ``layer_idx: 1`` there would be the classifier bias alone).
- Convergence of the first ALA: the official code's rule, stop once more than ``num_pre_loss`` (10)
  epoch losses exist and the (population) std of the last 10 is below ``threshold`` (0.1). We use
  each epoch's mean loss (the official code uses its last batch's loss) and cap the loop at
  ``max_init_epochs`` (100, ours; the official loop is uncapped). "First" means the first round in
  which θ differs from θ_i on the top layers: as in the official code, ALA is skipped while they are
  equal (round 0: everyone starts from the same initial model), since W then gets no gradient.
- The s% subset is drawn uniformly (without replacement) from the client's generator each round
  (the official code takes a random contiguous block of the unshuffled data); its batches are
  shuffled, ``train.batch_size`` long. W's forward passes run in train mode, with throw-away copies
  of the global buffers.
- Buffers (BN running statistics) of θ̂ are the global model's, for every layer (the formula is
  written for parameters; the official code copies parameters only and leaves buffers local).
- ``eval_model``: ``"local"`` (default) scores θ_i after its local training (the client's
  personalised model). ``"ala"`` scores θ̂ formed from the latest global model with the client's
  stored W (no further W training), closer to the official code, which evaluates right after ALA and
  before training. A client that never trained is scored with the global model (= θ̂ with W = 1).

``global_model`` returns the FedAvg model (``train.global_eval``). A pFedCSPC (TNNLS)
Table III baseline.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Mapping

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor
from torch.func import functional_call

from ..fl.client_data import ClientData
from ..fl.local import make_sgd, train_epochs
from ..fl.method import ClientUpdate, State
from ..params import hp
from .base import ModelMethod
from .registry import register_method

LAYER_UNITS = ("layer", "tensor")
EVAL_MODELS = ("local", "ala")


@dataclass
class FedALAParams:
    rand_percent: float = hp(80, gt=0, le=100)          # s, the FedALA paper
    layer_idx: int = hp(1, ge=1)                        # p, the FedALA paper (the head only)
    layer_unit: str = hp("layer", choices=LAYER_UNITS)  # the paper counts layers; the official code counts tensors
    eta: float = hp(1.0, gt=0)                          # η, the paper
    threshold: float = hp(0.1, ge=0)                    # official code: std threshold of the first ALA's losses
    num_pre_loss: int = hp(10, ge=1)                    # official code: window of that std
    max_init_epochs: int = hp(100, ge=1)                # ours: a cap on the first ALA
    eval_model: str = hp("local", choices=EVAL_MODELS)


def top_parameters(model, p: int, unit: str = "layer") -> list[str]:
    """Names of the parameters of the top ``p`` layers (or parameter tensors), in model order.

    ``p`` larger than the model has selects everything.
    """
    names = [n for n, _ in model.named_parameters()]
    if unit == "tensor":
        return names[-p:]
    layers: list[str] = []
    for n in names:
        owner = n.rsplit(".", 1)[0] if "." in n else ""
        if not layers or layers[-1] != owner:
            layers.append(owner)
    top = set(layers[-p:])
    return [n for n in names if (n.rsplit(".", 1)[0] if "." in n else "") in top]


def ala_combine(local: Mapping[str, Tensor], glob: Mapping[str, Tensor], weights: Mapping[str, Tensor]) -> dict[str,
                                                                                                                Tensor]:
    """θ̂: the global state dict, with θ_i + (θ − θ_i) ⊙ W on the keys of ``weights``."""
    out = {k: v.detach().clone() for k, v in glob.items()}
    for k, w in weights.items():
        out[k] = (local[k] + (glob[k] - local[k]) * w).detach().clone()
    return out


@register_method("fedala")
class FedALA(ModelMethod):
    """FedALA: element-wise learned mix of the old local and new global model's top layers, then train."""

    Params = FedALAParams

    def __init__(self, ctx, params):
        super().__init__(ctx, params)
        self.top = top_parameters(self.model, int(self.p.layer_idx), self.p.layer_unit)

    # State: shared = the global model (all keys); the client keeps θ_i, W and two flags ----------------
    def init_client(self, cid: int, seed: int) -> State:
        sd = self._initial(seed)
        return {"model": {k: v.clone() for k, v in sd.items()},
                "ala_w": {k: torch.ones_like(sd[k]) for k in self.top},
                "ala_started": False, "trained": False}

    def load(self, shared: State, state: State):
        """The client's personalised model when ``state`` is a client state, else the global model."""
        if "model" not in state:
            sd = shared
        elif not state.get("trained", False):
            sd = shared  # never trained: the ALA combination with W = 1 is the global model
        elif self.p.eval_model == "ala":
            sd = ala_combine(state["model"], shared, state["ala_w"])
        else:
            sd = state["model"]
        self.model.load_state_dict(sd, strict=True)
        for t in self.model.parameters():
            t.requires_grad_(True)
        return self.model

    # ALA --------------------------------------------------------------------------------------
    def adaptive_local_aggregation(self, local: Mapping[str, Tensor], glob: Mapping[str, Tensor],
                                   weights: Mapping[str, Tensor], data: ClientData, gen: torch.Generator,
                                   until_converged: bool) -> tuple[dict[str, Tensor], dict[str, Tensor], list[float]]:
        """Learn W on a random s% of ``data``; returns (θ̂, the new W, the per-epoch mean losses)."""
        t = self.ctx.cfg.train
        n = data.num_train
        n_s = max(1, int(n * float(self.p.rand_percent) / 100.0))
        idx = torch.randperm(n, generator=gen)[:n_s].to(data.train_y.device)
        subset = dataclasses.replace(data, train_x=data.train_x[idx], train_y=data.train_y[idx])
        fixed = {k: v.detach() for k, v in glob.items() if k not in weights}
        diff = {k: (glob[k] - local[k]).detach() for k in weights}
        w = {k: v.detach().clone() for k, v in weights.items()}
        model = self.model
        losses: list[float] = []
        eta = float(self.p.eta)

        def step(x, y):
            nonlocal w
            wg = {k: v.requires_grad_(True) for k, v in w.items()}
            top = {k: local[k].detach() + diff[k] * wg[k] for k in wg}
            # buffers are cloned: a train-mode BN forward updates them in place
            sd = {k: (v.clone() if k not in self.param_set else v) for k, v in fixed.items()}
            out = functional_call(model, {**sd, **top}, (x,))
            loss = F.cross_entropy(out, y)
            grads = torch.autograd.grad(loss, list(wg.values()))
            with torch.no_grad():
                w = {k: (wg[k] - eta * g).clamp_(0.0, 1.0) for k, g in zip(wg, grads)}
            return loss

        while True:
            losses.append(train_epochs(model, subset, None, 1, t.batch_size, gen, step=step).loss)
            if not until_converged:
                break
            k = int(self.p.num_pre_loss)
            if len(losses) > k and float(np.std(losses[-k:])) < float(self.p.threshold):
                break
            if len(losses) >= int(self.p.max_init_epochs):
                break
        return ala_combine(local, glob, w), {k: v.detach() for k, v in w.items()}, losses

    @property
    def param_set(self) -> set[str]:
        if not hasattr(self, "_param_set"):
            self._param_set = {n for n, _ in self.model.named_parameters()}
        return self._param_set

    # Client -----------------------------------------------------------------------------------
    def client_update(self, shared: State, state: State, data: ClientData, gen: torch.Generator,
                      rnd: int) -> ClientUpdate:
        t = self.ctx.cfg.train
        local, weights = state["model"], state["ala_w"]
        started = bool(state.get("ala_started", False))
        metrics: dict[str, float] = {}
        if all(torch.equal(local[k], shared[k]) for k in self.top):
            start = {k: v.detach().clone() for k, v in shared.items()}  # nothing to learn: θ̂ = θ
        else:
            start, weights, losses = self.adaptive_local_aggregation(local, shared, weights, data, gen,
                                                                     until_converged=not started)
            started = True
            metrics["ala_epochs"] = float(len(losses))
            metrics["ala_loss"] = losses[-1]
        self.model.load_state_dict(start, strict=True)
        model = self.model
        for p in model.parameters():
            p.requires_grad_(True)
        opt = make_sgd(model.parameters(), t.lr, t.momentum, t.weight_decay)
        metrics["train_loss"] = train_epochs(model, data, opt, t.local_epochs, t.batch_size, gen).loss
        numel = sum(w.numel() for w in weights.values())
        metrics["ala_w_mean"] = float(sum(float(w.sum()) for w in weights.values()) / max(numel, 1))
        sd = {k: v.detach().clone() for k, v in model.state_dict().items()}
        upload = {k: sd[k].clone() for k in self.shared_keys}
        new_state = {"model": sd, "ala_w": {k: v.clone() for k, v in weights.items()},
                     "ala_started": started, "trained": True}
        return ClientUpdate(upload=upload, state=new_state, num_samples=data.num_train, metrics=metrics)
