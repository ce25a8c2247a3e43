"""PromptFL+FedAMP: FedAMP's attentive message passing on the prompt (Huang et al., "Personalized
cross-silo federated learning on non-IID data", AAAI 2021; the "PromptFL + FedAMP" adaptation
defined in pFedPrompt (Guo et al., WWW 2023); one of the PFL baselines of FedOTP (CVPR 2024) §5.1
and Table 1).

Every client owns a personal CoOp prompt P_k (its state; scored with CLIP's classifier as in
PromptFL). Round r:

1. the server, from each client's last uploaded prompt, forms client k's cloud prompt
   u_k = Σ_j ξ_kj P_j (attention weights ξ below), and sends it;
2. client k trains its own P_k for the local epochs on CE + λ/(2α_r)·‖P_k − u_k‖², keeps it and
   uploads it.

The attention is :mod:`fedrepro.methods.fedamp`'s (same formulas and options, applied to the
flattened prompt):

- ``attention="cosine"`` (default here): FedAMP's heuristic form for deep networks,
  ξ_kk = ``self_weight`` (None: 1/N over the pool) and ξ_kj = (1 − ξ_kk)·softmax_{j≠k}(σ·cos(P_k, P_j))
  with σ = ``heur_sigma``, so each u_k is a convex combination of the clients' prompts;
- ``attention="exp"``: the paper's ξ_kj = α_r·exp(−‖P_k − P_j‖²/σ)/σ, ξ_kk = 1 − Σ_{j≠k} ξ_kj (rows
  sum to 1, ξ_kk may be negative).

Defaults (neither pFedPrompt nor FedOTP gives any): the cosine form, because the exp form's scale
depends on the norm of the weights (at N(0, 0.02²) prompts, α/σ = 100 in fedamp's defaults makes
ξ_kk ≪ 0); flgo's σ = 25 and ξ_kk = 1/N; λ = α = 1 without decay (PFLlib's), a pull
(λ/α)·(P − u) of the order of PromptFL+FedProx's (μ = 0.5). ``start_from`` as in fedamp.py.

Every client starts from the same prompt (PromptFL's initial draw; FedAMP's clients start from one
model). A client not yet in the pool (never uploaded) trains with u_k = P_k, i.e. without pull.

Steps stay pure: ``shared = {"cloud": {cid: u_cid}}`` (a Flower server would send each client its
own entry), uploads are ``{"cid", "ctx"}``, and ``server_state = {"prompts": {cid: last P},
"attention": ξ, "attention_ids": the pool's ids}``.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..fl.method import ClientUpdate
from ..params import hp
from .clip_prompt import ClipPromptParams
from .fedamp import ATTENTIONS, FedAMPParams, attention_weights, combine
from .promptfl import PromptFL
from .registry import register_method

CLOUD = "cloud"


@dataclass
class PromptFLFedAMPParams(ClipPromptParams, FedAMPParams):
    # FedAMPParams' fields and α-schedule, with defaults for prompts (module docstring).
    attention: str = hp("cosine", choices=ATTENTIONS)
    alpha_k: float = hp(1.0, gt=0)
    lam: float = hp(1.0, ge=0)
    alpha_decay_every: int = hp(0, ge=0)  # 0 = never decay


@register_method("promptfl_fedamp")
class PromptFLFedAMP(PromptFL):
    """PromptFL+FedAMP: each client's prompt is pulled towards an attention-weighted mix of similar clients' prompts."""

    Params = PromptFLFedAMPParams
    p: PromptFLFedAMPParams
    SHARED = ()  # nothing is averaged: the server builds one cloud prompt per client

    def init_server(self, seed):
        return {CLOUD: {}}, {"prompts": {}}

    def init_client(self, cid, seed):
        return {"ctx": self.initial_ctx(seed)}

    def batch_loss(self, ctx, batch, anchor):
        loss = super().batch_loss(ctx, batch, anchor)
        coef = anchor.get("coef", 0.0)
        if not coef:
            return loss
        return loss + 0.5 * coef * (ctx - anchor[CLOUD]).pow(2).sum()  # λ/(2α)·‖P − u‖²

    def client_update(self, shared, state, data, gen, rnd):
        own = state["ctx"]
        cloud = shared.get(CLOUD, {}).get(int(data.cid))
        coef = float(self.p.lam) / self.p.alpha_at(rnd, self.ctx.cfg.train.lr)
        if cloud is None:  # not in the pool yet: u_k = P_k, no pull
            cloud, coef = own, 0.0
        start = cloud if self.p.start_from == "cloud" else own
        ctx, stats, buf = self.train_ctx(start, self.features(data, "train"), self.batch_generator(gen), shared,
                                         anchor={CLOUD: cloud.detach(), "coef": coef})
        upload = self.with_momentum({"cid": int(data.cid), "ctx": ctx.clone()}, buf)
        return ClientUpdate(upload=upload, state={**state, "ctx": ctx.clone()}, num_samples=data.num_train,
                            metrics=stats.metrics())

    def aggregate(self, shared, updates, server_state, rnd):
        prompts = dict(server_state.get("prompts", {}))
        for u in updates:
            prompts[int(u.upload["cid"])] = u.upload["ctx"]
        if not prompts:
            return shared, server_state
        ids = sorted(prompts)
        pool = [{"ctx": prompts[i]} for i in ids]
        # The next round's α, so ξ and that round's proximal term share one α (as fedamp.py).
        xi = attention_weights(pool, mode=self.p.attention, alpha_k=self.p.alpha_at(rnd + 1, self.ctx.cfg.train.lr),
                               sigma=self.p.sigma,
                               self_weight=self.p.self_weight, heur_sigma=self.p.heur_sigma)
        clouds = combine(pool, xi)
        new_shared = self.carry_momentum({CLOUD: {i: c["ctx"] for i, c in zip(ids, clouds)}}, shared, updates)
        return new_shared, {"prompts": prompts, "attention": xi.cpu(),
                            "attention_ids": torch.tensor(ids, dtype=torch.long)}
