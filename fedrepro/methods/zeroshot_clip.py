"""Zero-shot CLIP: no training, a hand-written template per class (Radford et al., ICML 2021;
FedOTP (CVPR 2024) Table 1's first row, "a photo of a {class}." in the official code).

Every client scores its test images with scale · cosine(pooled image feature, text feature of the
filled template); nothing is trained or communicated. The class names are the dataset's in label
order (``class_order="set"`` reproduces the official code's set order, see
:mod:`fedrepro.methods.clip_prompt`).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from ..errors import ConfigError
from ..fl.method import ClientUpdate
from ..params import hp
from .clip_prompt import ClipPromptMethod, ClipPromptParams, pooled_logits
from .registry import register_method


def _template(v) -> bool:
    return isinstance(v, str) and v.count("{}") == 1


@dataclass
class ZeroShotParams(ClipPromptParams):
    template: str = hp("a photo of a {}.", check=_template, valid="a string with exactly one '{}'")


@register_method("zeroshot_clip")
class ZeroShotCLIP(ClipPromptMethod):
    """Zero-shot CLIP with a hand-written template (no training)."""

    Params = ZeroShotParams
    p: ZeroShotParams
    N_PROMPTS = 1
    SHARED = ()

    def __init__(self, ctx, params):
        super().__init__(ctx, params)
        try:
            with torch.no_grad():
                self.text = F.normalize(self.clip.encode_text([self.p.template.format(n) for n in self.class_names]),
                                        dim=-1)
        except ConfigError as e:
            raise ConfigError(f"method.args.template: {e}") from None

    def init_client(self, cid, seed):
        return {}

    def client_update(self, shared, state, data, gen, rnd):
        return ClientUpdate(upload={}, state=state, num_samples=data.num_train, metrics={})

    def score(self, ctx, feats, batch_size=500):
        return pooled_logits(self.scale, self.text, feats) if len(feats) else torch.zeros(0, self.num_classes)

    def eval_ctx(self, shared, state, data, gen):
        return self.prompts.ctx.detach()  # unused: the text features are the template's

    def logits(self, text, feats):
        return pooled_logits(self.scale, self.text, feats)
