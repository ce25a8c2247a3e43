"""PromptFL: one CoOp prompt learned federatedly on a frozen CLIP (Guo et al., "PromptFL: Let
federated participants cooperatively learn prompts instead of models", IEEE TMC 2023).

Each sampled client trains the shared context vectors for E epochs with CLIP's classifier
(scale · cosine between the pooled image feature and each class's text feature, CoOp Eq. 2); the
server averages them weighted by sample count (FedAvg). FedOTP (CVPR 2024) Tables 1-3: the
prompt-based FL baseline with a single global prompt.
"""
from __future__ import annotations

from .clip_prompt import ClipPromptMethod, pooled_logits
from .registry import register_method


@register_method("promptfl")
class PromptFL(ClipPromptMethod):
    """PromptFL: one global CoOp prompt, FedAvg-ed (Guo et al., TMC 2023)."""

    N_PROMPTS = 1
    SHARED = (0,)

    def logits(self, text, feats):
        return pooled_logits(self.scale, text[0], feats)
