"""FedFomo (Zhang, Sapra, Fidler, Yeung & Alvarez, ICLR 2021): first-order model optimisation.

"Personalized Federated Learning with First Order Model Optimization". Every client i owns a
personal model θ_i (its whole state dict, kept in the client state, used for evaluation); there is no
global model. The client's train split is cut once into a local training part and a held-out
validation part D_val (``val_fraction``). Round t, for a sampled client i:

1. Server: it keeps every client's latest uploaded model and an affinity matrix P (N×N, zeros at
   start). It sends client i the models of M = ``num_models`` other clients: with probability ε_t
   M clients drawn uniformly from the pool, otherwise the M with the largest P_i· (ε-greedy).
2. Client: with L = the mean CE on D_val and θ_i its current model (last round's result),
   w_n = max(0, (L(θ_i) − L(θ_n)) / ‖θ_n − θ_i‖) for each downloaded θ_n; if any w_n > 0 they are
   normalised to sum 1 and θ_i ← θ_i + Σ_n w_n (θ_n − θ_i); otherwise θ_i is kept.
3. Client: ``train.local_epochs`` epochs of SGD (CE) on the training part only; upload θ_i and the
   weights w_n.
4. Server: store θ_i as client i's latest model; P_in ← P_in + w_n for the downloaded n.

Defaults and named options (paper's or official code's where known):

- ``num_models`` M = 5: the paper's headline "FedFomo (M = 5)" configuration. M counts the *other*
  clients' models here (as in PFLlib's ``M``); the official README's "5 models" run downloads 4 others
  (``--num_update_clients 4``) plus the client's own model, which gets weight 0 in the formula anyway.
- ``epsilon`` ε_0 = 0.3, ``epsilon_decay`` 0.05: the official README (``--client_weight_epsilon 0.3
  --client_weight_epsilon_decay 0.05``, linear decay per round). The selection for round t ≥ 1
  uses ε_t = max(0, ε_0 − decay·(t − 1)); the coin is tossed once per client (the whole set is either
  explored or greedy). Ties in P (all zero at start) are broken at random.
- ``val_fraction`` = 0.2: the official README's ``--train_split 0.8`` (PFLlib: ``val_ratio 0.2``). The
  split is drawn once, from the client's generator in its first round, and kept in its state (at
  least one sample on each side; a client with fewer than 2 training samples has no D_val and never
  federates). Only the training part trains θ_i: the paper's protocol, at the cost of 20% less data.
- ``norm``: ``"l2"`` (default, the paper's ‖·‖) or ``"l1"`` (the official code's
  ``--model_delta_norm`` default). Distances use the model's parameters only.
- The combination covers every floating state-dict entry (parameters and BN running statistics);
  integer buffers (``num_batches_tracked``) stay the client's own. Losses on D_val are taken in
  eval mode.
- P is accumulated with the normalised weights the client applied.
- Pool: clients that have uploaded at least once (round 0 has none, so every client only trains
  locally, from the same initial model). A client that never trained (not sampled, held out) is
  scored with the initial model.

Communication / Flower mapping: ``shared = {"models": {cid: latest θ}, "download": {cid: LongTensor
of the M ids}}``. The simulator passes the whole mapping, but a client reads only
``shared["models"][n]`` for n in its own ``shared["download"][cid]``: a Flower server would send
exactly those M models. Uploads are ``{"cid", "model", "ids", "weights"}``; ``server_state =
{"affinity": P (float64), "epsilon": the ε used for the current selection}``.

``global_model`` is None (every model is personal). A pFedCSPC (TNNLS) Table III baseline.
"""
from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass
from typing import Mapping, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

from ..fl.client_data import ClientData
from ..fl.local import make_sgd, train_epochs
from ..fl.method import ClientUpdate, State
from ..params import hp
from .base import ModelMethod
from .registry import register_method

NORMS = ("l2", "l1")


@dataclass
class FedFomoParams:
    num_models: int = hp(5, ge=1)                # M; the paper's headline M = 5
    epsilon: float = hp(0.3, ge=0, le=1)         # official README --client_weight_epsilon
    epsilon_decay: float = hp(0.05, ge=0, le=1)  # official README --client_weight_epsilon_decay (per round, linear)
    val_fraction: float = hp(0.2, gt=0, lt=1)    # official README --train_split 0.8
    norm: str = hp("l2", choices=NORMS)          # the paper's ||θ_n − θ_i||; "l1" = the official code's default

    def epsilon_at(self, rnd: int) -> float:
        """ε used for the downloads of round ``rnd`` (0-based; round 0 has nothing to download)."""
        return max(0.0, float(self.epsilon) - float(self.epsilon_decay) * max(rnd - 1, 0))


def fomo_weights(loss_self: float, losses: Sequence[float], dists: Sequence[float]) -> Tensor:
    """FedFomo's normalised first-order weights (float64): max(0, (L_i − L_n)/d_n), then / Σ.

    A model at distance 0 (identical to θ_i) gets 0. All zeros when no model lowers the loss.
    """
    w = torch.zeros(len(losses), dtype=torch.float64)
    for j, (ln, d) in enumerate(zip(losses, dists)):
        if d > 0:
            w[j] = max(0.0, (float(loss_self) - float(ln)) / float(d))
    s = float(w.sum())
    return w / s if s > 0 else w


def model_distance(a: Mapping[str, Tensor], b: Mapping[str, Tensor], keys: Sequence[str], norm: str = "l2") -> float:
    """‖a − b‖ over ``keys`` (flattened, float64), L2 or L1."""
    total = 0.0
    for k in keys:
        diff = a[k].detach().to(torch.float64) - b[k].detach().to(torch.float64)
        total += float(diff.abs().sum()) if norm == "l1" else float(diff.pow(2).sum())
    return total if norm == "l1" else total ** 0.5


def combine_towards(base: Mapping[str, Tensor], others: Sequence[Mapping[str, Tensor]],
                    weights: Tensor) -> dict[str, Tensor]:
    """θ + Σ_n w_n (θ_n − θ) for floating entries; integer entries are the base's."""
    out = {}
    for k, v in base.items():
        if not v.is_floating_point() or not others:
            out[k] = v.detach().clone()
            continue
        acc = v.detach().to(torch.float64).clone()
        for m, w in zip(others, weights.tolist()):
            if w != 0.0:
                acc.add_(m[k].detach().to(torch.float64) - v.detach().to(torch.float64), alpha=w)
        out[k] = acc.to(v.dtype)
    return out


@register_method("fedfomo")
class FedFomo(ModelMethod):
    """FedFomo: each client mixes in downloaded peer models by their first-order validation gain."""

    Params = FedFomoParams

    def __init__(self, ctx, params):
        super().__init__(ctx, params)
        self.param_keys = [n for n, _ in self.model.named_parameters()]
        self.peer = copy.deepcopy(self.model)  # scratch model for the downloaded θ_n

    def personal_keys(self, model) -> set[str]:
        return set(model.state_dict().keys())  # the whole model is the client's

    # State ------------------------------------------------------------------------------------
    def init_server(self, seed: int) -> tuple[State, State]:
        n = self.ctx.num_clients
        return {"models": {}, "download": {}}, {"affinity": torch.zeros(n, n, dtype=torch.float64),
                                                "epsilon": float(self.p.epsilon)}

    def init_client(self, cid: int, seed: int) -> State:
        sd = self._initial(seed)
        return {"model": {k: v.clone() for k, v in sd.items()}, "val_mask": None}

    def load(self, shared: State, state: State):
        self.model.load_state_dict(state["model"], strict=True)
        for t in self.model.parameters():
            t.requires_grad_(True)
        return self.model

    def global_model(self, shared: State, server_state: State):
        return None

    # Client -----------------------------------------------------------------------------------
    def split(self, data: ClientData, state: State, gen: torch.Generator) -> Tensor:
        """The client's validation mask over its train split (drawn once, then kept)."""
        mask = state.get("val_mask")
        if mask is not None:
            return mask
        n = data.num_train
        mask = torch.zeros(n, dtype=torch.bool)
        if n >= 2:
            n_val = min(max(int(round(self.p.val_fraction * n)), 1), n - 1)
            mask[torch.randperm(n, generator=gen)[:n_val]] = True
        return mask

    @torch.no_grad()
    def val_loss(self, model, x: Tensor, y: Tensor, batch_size: int = 500) -> float:
        model.eval()
        total = 0.0
        for s in range(0, y.numel(), batch_size):
            total += float(F.cross_entropy(model(x[s:s + batch_size]), y[s:s + batch_size], reduction="sum"))
        return total / max(y.numel(), 1)

    def federate(self, own: Mapping[str, Tensor], peers: Sequence[Mapping[str, Tensor]], val_x: Tensor,
                 val_y: Tensor) -> tuple[dict[str, Tensor], Tensor]:
        """Step 2: (the new θ_i, the normalised weights w) from θ_i, the downloads and D_val."""
        if not peers or val_y.numel() == 0:
            return {k: v.detach().clone() for k, v in own.items()}, torch.zeros(len(peers), dtype=torch.float64)
        self.peer.load_state_dict(own, strict=True)
        loss_self = self.val_loss(self.peer, val_x, val_y)
        losses, dists = [], []
        for m in peers:
            self.peer.load_state_dict(m, strict=True)
            losses.append(self.val_loss(self.peer, val_x, val_y))
            dists.append(model_distance(m, own, self.param_keys, self.p.norm))
        w = fomo_weights(loss_self, losses, dists)
        return combine_towards(own, peers, w), w

    def client_update(self, shared: State, state: State, data: ClientData, gen: torch.Generator,
                      rnd: int) -> ClientUpdate:
        t = self.ctx.cfg.train
        mask = self.split(data, state, gen)
        idx_val = mask.nonzero().squeeze(1).to(data.train_y.device)
        idx_tr = (~mask).nonzero().squeeze(1).to(data.train_y.device)
        val_x, val_y = data.normalize(data.train_x[idx_val]), data.train_y[idx_val]
        train_part = dataclasses.replace(data, train_x=data.train_x[idx_tr], train_y=data.train_y[idx_tr])

        ids = [int(i) for i in shared.get("download", {}).get(data.cid, torch.zeros(0, dtype=torch.long))]
        peers = [shared["models"][i] for i in ids]
        new_sd, w = self.federate(state["model"], peers, val_x, val_y)

        model = self.load(shared, {"model": new_sd})
        opt = make_sgd(model.parameters(), t.lr, t.momentum, t.weight_decay)
        loss = train_epochs(model, train_part, opt, t.local_epochs, t.batch_size, gen).loss
        sd = {k: v.detach().clone() for k, v in model.state_dict().items()}
        upload = {"cid": int(data.cid), "model": sd, "ids": torch.tensor(ids, dtype=torch.long), "weights": w}
        metrics = {"train_loss": loss, "fomo_num_downloaded": float(len(ids)),
                   "fomo_num_positive": float((w > 0).sum())}
        return ClientUpdate(upload=upload, state={"model": sd, "val_mask": mask},
                            num_samples=train_part.num_train, metrics=metrics)

    # Server -----------------------------------------------------------------------------------
    def select(self, affinity: Tensor, cid: int, pool: Sequence[int], eps: float) -> list[int]:
        """ε-greedy choice of M ids from ``pool`` (other clients) for client ``cid`` (torch global RNG)."""
        pool = [p for p in pool if p != cid]
        m = min(int(self.p.num_models), len(pool))
        if m == 0:
            return []
        if m == len(pool):
            return sorted(pool)
        perm = torch.randperm(len(pool))
        if float(torch.rand(())) < eps:
            chosen = perm[:m]
        else:
            scores = affinity[cid, torch.tensor(pool)[perm]]
            chosen = perm[torch.argsort(-scores, stable=True)[:m]]
        return sorted(pool[int(i)] for i in chosen)

    def aggregate(self, shared: State, updates: list, server_state: State, rnd: int) -> tuple[State, State]:
        models = dict(shared.get("models", {}))
        affinity = server_state["affinity"].clone()
        for u in updates:
            cid = int(u.upload["cid"])
            models[cid] = u.upload["model"]
            ids = u.upload["ids"]
            if ids.numel():
                affinity[cid, ids] += u.upload["weights"].to(affinity.dtype)
        eps = self.p.epsilon_at(rnd + 1)
        pool = sorted(models)
        download = {c: torch.tensor(self.select(affinity, c, pool, eps), dtype=torch.long)
                    for c in range(affinity.shape[0])}
        return {"models": models, "download": download}, {"affinity": affinity, "epsilon": eps}
