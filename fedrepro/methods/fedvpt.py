"""FedVPT: VPT-shallow (Jia et al., ECCV 2022, Eq. 1) under FedAvg, PEP-FedPT's "Only Shared"
(arXiv Tables 1-4, 9, 11).

``n_prompts`` tokens go in right after cls at the input of the first block and travel through the
frozen ViT as ordinary tokens; the prompts and the linear head are trained by each sampled client
for E epochs and averaged by the server (PEP-FedPT Eq. 3). ``n_prompts = |C|`` is Table 11's
"FedVPT with more generic prompts".

``prior_logits`` is a control of ours, not a paper method: the same training, and at evaluation the
client adds log δ_k (its label prior, PEP-FedPT Eq. 14) to the logits ("log") or removes the classes
it has no training sample of ("mask"). Beside PEP-FedPT it separates what the class prior alone
buys from what the prompt mixing adds.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..fl.local import evaluate_model
from ..params import hp
from .prompted import PromptNet, PromptParams, PromptTuning, class_prior
from .registry import register_method


@dataclass
class FedVPTParams(PromptParams):
    n_prompts: int = hp(1, ge=1)  # PEP-FedPT's n_S = 1 (App. A.3.2)
    prior_logits: str = hp("none", choices=("none", "log", "mask"))  # ours: the label-prior control


@register_method("fedvpt")
class FedVPT(PromptTuning):
    """FedVPT: shallow visual prompts and a head, FedAvg-ed, on a frozen ViT (PEP-FedPT (arXiv) baseline)."""

    Params = FedVPTParams
    p: FedVPTParams

    def build(self, backbone, head):
        return PromptNet(backbone, head, n_shallow=self.p.n_prompts)

    def evaluate(self, shared, state, data, gen):
        net = self.load(shared, state, data)
        if self.p.prior_logits != "none":
            prior = class_prior(data.train_y, self.num_classes).to(self.ctx.device)
            # log 0 = −inf: both forms rule out the classes the client never saw.
            net.logit_bias = torch.log(prior) if self.p.prior_logits == "log" else torch.log((prior > 0).float())
        try:
            return evaluate_model(net, data)
        finally:
            net.logit_bias = None
