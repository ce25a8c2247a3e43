"""PromptFL+FedProx: PromptFL with FedProx's proximal term on the prompt (Li et al., MLSys 2020; the
"PromptFL + FedProx" adaptation defined in pFedPrompt (Guo et al., WWW 2023); a baseline in every
table of FedOTP (CVPR 2024), §5.1).

Each client minimises CE + (μ/2)·‖P − P_global‖² over its prompt P, where P_global is the prompt
it downloaded this round; the server averages as PromptFL does. μ = 0.5 is the official FedOTP
code's value (the papers give none).

``prox_grad=False`` reproduces the official code: there the term is computed from the prompt
learner's ``state_dict()``, whose tensors are detached, so it is added to the loss (and to the
logged loss) but carries no gradient, and training is exactly PromptFL's (this
fits PromptFL+FedProx ≈ PromptFL in FedOTP's tables). The default is the real proximal gradient.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..params import hp
from .clip_prompt import ClipPromptParams
from .promptfl import PromptFL
from .registry import register_method


@dataclass
class PromptFLFedProxParams(ClipPromptParams):
    mu: float = hp(0.5, ge=0)  # the official FedOTP code's μ
    prox_grad: bool = hp(True)  # False: the official code's term without gradient (module docstring)


@register_method("promptfl_fedprox")
class PromptFLFedProx(PromptFL):
    """PromptFL+FedProx: local CE plus (μ/2)·‖P − P_global‖² on the prompt (Li et al., MLSys 2020)."""

    Params = PromptFLFedProxParams
    p: PromptFLFedProxParams

    def batch_loss(self, ctx, batch, anchor):
        loss = super().batch_loss(ctx, batch, anchor)
        if not self.p.mu or "ctx" not in anchor:
            return loss
        mine, _ = self.split(ctx)
        if not self.p.prox_grad:
            mine = mine.detach()
        return loss + 0.5 * self.p.mu * (mine - anchor["ctx"].detach()).pow(2).sum()
