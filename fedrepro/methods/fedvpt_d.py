"""FedVPT-D: VPT-deep (Jia et al., ECCV 2022, Eq. 2) under FedAvg, a PEP-FedPT (arXiv) baseline.

``n_prompts`` fresh tokens at the input of every block: inserted after cls at the first block and
replacing the previous block's prompt outputs at every later one; prompts and head are trained
locally and averaged (PEP-FedPT Eq. 3). The paper does not give the count; one token per block fits
its communication figure (§5.2.2: 7.67 M over 90 rounds is the head plus one token at each of 11
blocks), so ``n_prompts = 1`` at every block is the default, and ``blocks`` can restrict where the
deep tokens are renewed.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import ConfigError
from ..params import hp
from .prompted import PromptNet, PromptParams, PromptTuning, block_list
from .registry import register_method


@dataclass
class FedVPTDParams(PromptParams):
    n_prompts: int = hp(1, ge=1)
    # Blocks (0-indexed, > 0) whose prompt tokens are renewed; None: every block after the first.
    blocks: tuple | None = hp(None, check=block_list, valid="null or a non-empty list of distinct block indices >= 1")


@register_method("fedvpt_d")
class FedVPTD(PromptTuning):
    """FedVPT-D: deep visual prompts at every block and a head, FedAvg-ed (PEP-FedPT (arXiv) baseline)."""

    Params = FedVPTDParams
    p: FedVPTDParams
    SHARED = ("shallow", "deep", "head.weight", "head.bias")

    def build(self, backbone, head):
        blocks = tuple(range(1, backbone.depth)) if self.p.blocks is None else tuple(sorted(self.p.blocks))
        bad = [b for b in blocks if not 1 <= b < backbone.depth]
        if bad:
            raise ConfigError(f"invalid method.args.blocks={list(blocks)!r}: valid: distinct indices in "
                              f"[1, {backbone.depth - 1}] (block 0 gets the inserted prompts)")
        return PromptNet(backbone, head, n_shallow=self.p.n_prompts, deep_blocks=blocks, n_deep=self.p.n_prompts)
