"""Local CoOp: each client learns its own CoOp prompt on its own data and never communicates
(Zhou et al., "Learning to prompt for vision-language models", IJCV 2022; FedOTP (CVPR 2024)
Table 1's "local training" row).

The classifier is CLIP's (scale · cosine of the pooled image feature with each class's text
feature, CoOp Eq. 2). Local training runs every round the client is sampled, for
``train.local_epochs`` epochs, so its budget matches the federated methods' (the official code's
local.yaml runs one longer session; our schedule is the same total number of epochs when every
client takes part).
"""
from __future__ import annotations

from .clip_prompt import ClipPromptMethod, pooled_logits
from .registry import register_method


@register_method("coop")
class CoOp(ClipPromptMethod):
    """CoOp trained locally: one private prompt per client, nothing averaged (Zhou et al., IJCV 2022)."""

    N_PROMPTS = 1
    SHARED = ()

    def logits(self, text, feats):
        return pooled_logits(self.scale, text[0], feats)
