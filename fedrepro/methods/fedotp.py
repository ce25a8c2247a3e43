"""FedOTP: global and local prompts cooperating through optimal transport (Li et al., CVPR 2024).

Algorithm 2 of the paper (App. A.2), one round:

1. each sampled client k starts from {P_G (downloaded), P_{L,k} (its own)};
2. for E local epochs, for each mini-batch: the frozen image encoder gives the M feature-map tokens
   F (§4.2); the frozen text encoder gives, for every class c, the features of both prompts
   G_c = [g(P_G, c), g(P_{L,k}, c)]; the cost is C_c = 1 − F G_cᵀ (Eq. 6); the plan T*_c solves
   the unbalanced problem with patch marginal 1/M (an inequality) and prompt marginal γ/N
   (Algorithm 1, fast-scaling Dykstra, λ, at most 100 iterations), held fixed;
   the class score is Σ T*_c ⊙ (1 − C_c) times CLIP's logit scale (Eq. 10), and both prompts take
   an SGD step on the cross-entropy (Eq. 2);
3. the client uploads P_G only; the server averages the uploads weighted by sample count (Eq. 4);
   P_{L,k} never leaves the client.

The transport plans are :mod:`fedrepro.ot.transport`'s (log domain, batched over images and classes).

Options:

- ``ot``: ``"uot"`` (the paper's method), ``"ot"`` (balanced Sinkhorn, "Classical OT" in Table 4),
  ``"average"`` (the uniform plan, "Similarity Averaging" in Table 4) and ``"kl_uot"`` (KL-penalised
  unbalanced OT, Chizat et al. 2018; ours, not in the paper);
- ``prompts``: ``"global_local"`` (the paper), ``"local_only"`` or ``"global_only"`` (one prompt,
  never or always averaged, OT over patches kept: ablations of ours, not in the paper);
- ``gamma`` (the paper's "top_percent"; 0.8 in the official scripts), ``lam`` (λ = 0.1, the official
  default; the few-shot script's 0.01 is stable here as the solver works in the log domain),
  ``max_iter``/``thresh`` (Algorithm 1: 100 and 1e-3 in the official code), ``reg_m`` (kl_uot only).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from ..params import hp
from ..ot.transport import PLANS, ot_score
from .clip_prompt import ClipFeatures, ClipPromptMethod, ClipPromptParams
from .registry import register_method

PROMPT_SETS = {"global_local": (2, (0,)), "local_only": (1, ()), "global_only": (1, (0,))}


@dataclass
class FedOTPParams(ClipPromptParams):
    ot: str = hp("uot", choices=tuple(PLANS))
    prompts: str = hp("global_local", choices=tuple(PROMPT_SETS))
    gamma: float = hp(0.8, gt=0, le=1)  # γ: the fraction of the feature map the prompts take
    lam: float = hp(0.1, gt=0)  # λ, the entropic regulariser (Eq. 7)
    max_iter: int = hp(100, ge=1)
    thresh: float = hp(1e-3, ge=0)
    reg_m: float = hp(1.0, gt=0)  # kl_uot's marginal penalty (ours)


@register_method("fedotp")
class FedOTP(ClipPromptMethod):
    """FedOTP: a shared global and a private local CoOp prompt, matched to image patches by
    unbalanced OT (Li et al., CVPR 2024)."""

    Params = FedOTPParams
    p: FedOTPParams

    def __init__(self, ctx, params):
        # The prompt set decides the shape of the context tensor, so it is fixed before it is built.
        self.N_PROMPTS, self.SHARED = PROMPT_SETS[params.prompts]
        super().__init__(ctx, params)

    def plan_scores(self, text: Tensor, feats: ClipFeatures, return_plan: bool = False):
        """Eq. 10 before the scale: Σ_{m,n} T*[m,n] S[m,n] per (image, class), with
        S[b, c, m, n] = cos(patch m of image b, prompt n of class c); optionally the plans too."""
        sim = torch.einsum("bmd,ncd->bcmn", feats.patches, text)
        return ot_score(sim, self.p.ot, self.p.gamma, self.p.lam, max_iter=self.p.max_iter,
                        thresh=self.p.thresh, reg_m=self.p.reg_m, return_plan=return_plan)

    def logits(self, text: Tensor, feats: ClipFeatures) -> Tensor:
        return self.scale * self.plan_scores(text, feats)
