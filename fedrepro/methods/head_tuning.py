"""Head-Tuning (Sun et al. 2022, as run by PEP-FedPT (arXiv) Tables 1-3): FedAvg of a linear head
on a frozen pretrained ViT, no prompts.

One round: each sampled client trains the head for E epochs of cross-entropy on the frozen cls
feature; the server averages the heads (PEP-FedPT Eq. 3, unweighted by default).
"""
from __future__ import annotations

from .prompted import PromptNet, PromptTuning
from .registry import register_method


@register_method("head_tuning")
class HeadTuning(PromptTuning):
    """Head-Tuning: FedAvg of a linear head on a frozen ViT (PEP-FedPT (arXiv) baseline)."""

    SHARED = ("head.weight", "head.bias")

    def build(self, backbone, head):
        return PromptNet(backbone, head)
