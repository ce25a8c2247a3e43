"""The two-stage baseline (FedPFT (ICLR) App. G, Fig. 9; arXiv App. E, Fig. 5): federated
contrastive learning first, then FedPFT.

ICLR App. G compares FedPFT+Con's joint training with a "Two-stage" baseline "similar to Wang et
al. (2023)": 1000 rounds of contrastive learning, then 1000 rounds of classification training.
Here (how each stage trains is ours, in FedPFT+Con's terms, :mod:`.fedpft_con`):

- stage 1, rounds ``rnd < stage1_rounds``: φ, τ, h_ρ and p_ρ are trained with L_Con only, for
  r_f + r_a epochs a round (the two-stage row of :data:`.pft.CON_ROUTES`); with no clean forward,
  the views write φ's BatchNorm running statistics, as in MoCo's pretraining (FedPFT+Con's
  ``view_bn_stats`` applies to the phases that also train L_CE);
- stage 2, the later rounds: FedPFT's alternating L_CE schedule, with the contrastive branch off;
  h_ρ is still uploaded, unchanged.

``stage1_rounds=None`` means half of ``train.rounds`` (the paper's 1000 + 1000).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..params import hp
from .fedpft_con import FedPFTCon, FedPFTConParams
from .registry import register_method


@dataclass
class FedPFTTwoStageParams(FedPFTConParams):
    """FedPFT+Con's parameters and the length of the contrastive stage."""

    stage1_rounds: int | None = hp(None, ge=0)  # None: half of train.rounds


@register_method("fedpft_two_stage")
class FedPFTTwoStage(FedPFTCon):
    """Two-stage baseline (ICLR App. G / arXiv App. E): federated L_Con first, then FedPFT."""

    Params = FedPFTTwoStageParams
    p: FedPFTTwoStageParams

    def stage1_rounds(self) -> int:
        s = self.p.stage1_rounds
        return self.ctx.cfg.train.rounds // 2 if s is None else s

    def plan(self, rnd: int) -> list[tuple[str, int, bool]]:
        if rnd < self.stage1_rounds():
            r_f, r_a = self.epoch_split()
            return [("con_only", r_f + r_a, True)]
        return [(phase, epochs, False) for phase, epochs, _ in super().plan(rnd)]
