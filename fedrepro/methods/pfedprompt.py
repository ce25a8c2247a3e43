"""pFedPrompt: a shared text prompt and a personalised visual attention module per client (Guo et
al., "pFedPrompt: Learning personalized prompt for vision-language models in federated learning",
WWW 2023; FedOTP (CVPR 2024) Table 1's strongest baseline).

pFedPrompt learns "user consensus" in the language modality (one CoOp prompt, FedAvg-ed as in
PromptFL) and personalises in the vision modality with a non-parametric attention module that each
client keeps to itself. FedOTP describes it only in those words and we have not read its code, so
the module here is **our reading**: a Tip-Adapter-style cache (Zhang et al., ECCV 2022) built from
the client's own few-shot train split,

- keys K: the pooled, L2-normalised CLIP image features of the client's train images [n, d];
- values V: their labels, one-hot over all C classes [n, C];
- logits(x) = s·cos(f(x), text) + w·exp(−β·(1 − f(x)·Kᵀ))·V, with s the logit scale,

with β = 5.5 and the cache's weight w from Tip-Adapter's α = 1 (its defaults). Tip-Adapter sets α
against CLIP's logit scale of 100 (its text logits are 100·cos), so on a CLIP whose s is another (the
stand-in learnt about 15) α = 1 would weigh the cache 100/s times more against the text logits. By
default (``cache_scale="logit"``, our reading) w = α·s/100, Tip-Adapter's balance on CLIP; at s = 100
the two readings agree. ``cache_scale="none"`` keeps w = α whatever the scale (the reading before
this calibration, kept as an option and shown beside it). The cache is fixed (nothing in it is trained,
uploaded or shared); the text prompt is trained through the combined logits, so it learns what the
client's cache does not already explain. As in Tip-Adapter-F, the cache holds the training images
themselves, so each training image also matches its own entry (affinity 1 on its own label).

The cache is rebuilt from the client's data when needed rather than stored in its state: it is a
deterministic function of the frozen CLIP and the train split (with ``misaligned_images`` it holds
the same misaligned pairs the client trains on).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from ..fl.client_data import ClientData
from ..params import hp
from .clip_prompt import ClipFeatures, ClipPromptParams
from .promptfl import PromptFL
from .registry import register_method

CACHE = "cache"
# The logit scale Tip-Adapter's α is set against: CLIP's, clipped at 100 (Radford et al. 2021, §2.5).
TIP_ADAPTER_SCALE = 100.0


@dataclass
class PFedPromptParams(ClipPromptParams):
    alpha: float = hp(1.0, ge=0)  # weight of the cache's logits (Tip-Adapter's α)
    beta: float = hp(5.5, ge=0)  # sharpness of the cache's affinity (Tip-Adapter's β)
    # "logit" (ours): α is relative to CLIP's logit scale of 100, at which Tip-Adapter set it, so the cache
    # weighs α·scale/100; "none": α as is, whatever the scale (the module docstring).
    cache_scale: str = hp("logit", choices=("logit", "none"))


@register_method("pfedprompt")
class PFedPrompt(PromptFL):
    """pFedPrompt: a FedAvg-ed text prompt plus each client's own few-shot cache of image features (our reading)."""

    Params = PFedPromptParams
    p: PFedPromptParams

    def cache(self, data: ClientData) -> tuple[Tensor, Tensor]:
        """(keys [n, d], values [n, C]) of the client's cache, from its own train split only."""
        feats = self.features(data, "train")
        return feats.pooled, F.one_hot(feats.labels.long(), self.num_classes).to(feats.pooled.dtype)

    @property
    def cache_weight(self) -> float:
        """The cache's weight: α·scale/100 (``cache_scale="logit"``), or α (``"none"``)."""
        return self.p.alpha * (self.scale / TIP_ADAPTER_SCALE if self.p.cache_scale == "logit" else 1.0)

    def cache_logits(self, cache: tuple[Tensor, Tensor], feats: ClipFeatures) -> Tensor:
        """weight·exp(−β·(1 − f·Kᵀ))·V: the cache's vote for each class [B, C] (weight: :attr:`cache_weight`)."""
        keys, values = cache
        if not len(keys):
            return feats.pooled.new_zeros(len(feats), self.num_classes)
        return self.cache_weight * torch.exp(-self.p.beta * (1.0 - feats.pooled @ keys.T)) @ values

    def batch_loss(self, ctx, batch, anchor):
        logits = self.logits(self.text_features(ctx), batch) + self.cache_logits(anchor[CACHE], batch)
        return F.cross_entropy(logits, batch.labels)

    def anchor(self, shared, state, data):
        return {CACHE: self.cache(data)}

    @torch.no_grad()
    def evaluate(self, shared, state, data, gen):
        feats = self.features(data, "test")
        logits = self.score(self.eval_ctx(shared, state, data, gen), feats)
        if len(feats):
            logits = logits + self.cache_logits(self.cache(data), feats)
        return self.result(logits, feats.labels)
