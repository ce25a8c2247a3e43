"""P-PT, "personalised prompt tuning": PEP-FedPT (arXiv) §5's own baseline that "personalizes the
prompts".

The paper gives no more than that; our reading: FedVPT whose shallow prompts never leave the
client (each client trains and keeps its own ``n_prompts`` tokens) while the head is FedAvg-ed.
A held-out client has trained nothing, so it scores with the common initial prompt and the global
head. Scored on the client's own prompt (the model it would deploy).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..params import hp
from .prompted import PromptNet, PromptParams, PromptTuning
from .registry import register_method


@dataclass
class PPTParams(PromptParams):
    n_prompts: int = hp(1, ge=1)


@register_method("p_pt")
class PPT(PromptTuning):
    """P-PT: client-kept visual prompts, FedAvg-ed head, on a frozen ViT (PEP-FedPT (arXiv) baseline)."""

    Params = PPTParams
    p: PPTParams
    SHARED = ("head.weight", "head.bias")
    PERSONAL = ("shallow",)

    def build(self, backbone, head):
        return PromptNet(backbone, head, n_shallow=self.p.n_prompts)
