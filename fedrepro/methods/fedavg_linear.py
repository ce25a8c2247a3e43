"""FedAvg+Linear (FedPFT (ICLR) App. F, Table 9): FedAvg with a personal m×m linear layer between
the global feature extractor φ and the global classifier h_κ.

ICLR §1 and App. F: "a straightforward approach to address the mismatch problem is to insert a
personalized linear transformation layer between the global feature extractor and the global
classifier", kept on the client and trained during FL. φ and h_κ are FedAvg-aggregated; the layer
never leaves the client.

The schedule is not given (ICLR §1 and App. F say only that the layer is inserted and trained
"during training"); both readings are options, each ours:

- ``alternate=False`` (default): FedAvg with the layer added, φ, h_κ and the layer trained together
  for r_f + r_a = R = 5 epochs a round (ICLR §4.1's R): the plain reading, in which φ gets FedAvg's
  5 epochs a round;
- ``alternate=True``: FedPFT's alternating schedule (:mod:`.pft`): R_f epochs train the layer with
  φ and h_κ frozen (φ under ``no_grad``), then R_a epochs train φ and h_κ with the layer frozen.
  φ then trains R_a = 1 epoch a round, FedPFT's budget (this package's only form before issue 54).

The layer starts as the identity (``linear_init="identity"``), so round 0 is FedAvg; it trains at
``lr_linear`` (``None`` = ``train.lr``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from ..params import hp
from .pft import PFTMethod, ScheduleParams
from .registry import register_method

LINEAR_INITS = ("identity", "random")


@dataclass
class FedAvgLinearParams(ScheduleParams):
    """FedAvg+Linear: the schedule (joint by default) and the personal layer's lr and initialisation."""

    alternate: bool = hp(False)  # ours: the paper gives no schedule (module docstring)
    lr_linear: float | None = hp(None, gt=0)  # None: train.lr
    linear_init: str = hp("identity", choices=LINEAR_INITS)
    linear_bias: bool = hp(True)


@register_method("fedavg_linear")
class FedAvgLinear(PFTMethod):
    """FedAvg+Linear (ICLR App. F): a personal m×m linear layer between the global φ and h_κ."""

    Params = FedAvgLinearParams
    p: FedAvgLinearParams

    def make_extras(self, m: int) -> dict[str, Any]:
        lin = nn.Linear(m, m, bias=self.p.linear_bias)
        if self.p.linear_init == "identity":
            with torch.no_grad():
                lin.weight.copy_(torch.eye(m))
                if lin.bias is not None:
                    lin.bias.zero_()
        return {"linear": lin}

    def personal_modules(self) -> tuple[str, ...]:
        return ("linear",)

    def group_lrs(self) -> dict[str, float]:
        # The layer sits in the "p_kappa" group: the personal part the feature phase trains.
        return {**super().group_lrs(), "p_kappa": self.p.lr_linear or self.ctx.cfg.train.lr}
