"""PromptFL+FedPer: FedPer's base/personal split applied to the prompt's context vectors
(Arivazhagan et al., 2019; the "PromptFL + FedPer" adaptation defined in pFedPrompt (Guo et al.,
WWW 2023), which "splits the learnable prompt vector into base + personalized vectors", FedOTP
(CVPR 2024) §5.2; a baseline of its Table 1).

One CoOp prompt [v_1 … v_L, CLASS, "."] per client, scored with CLIP's classifier as in PromptFL.
Its first L − ``n_personal`` context vectors are the base: uploaded and FedAvg-ed by sample count.
The last ``n_personal`` stay on the client. Both parts train jointly, as FedPer trains body and head
together.

Our reading where the papers are silent:

- which vectors are personal: the last ones, those next to the class name. FedPer keeps the layers
  nearest the output; the vectors nearest the class token are the prompt's analogue;
- how many: half of the context by default (``n_personal=None`` means L // 2);
- the start: the prompt is drawn once, as PromptFL's, and split, so every client's personal vectors
  begin equal (FedPer's heads all begin as the initial model's head).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..errors import ConfigError
from ..params import hp
from .clip_prompt import ClipPromptParams
from .promptfl import PromptFL
from .registry import register_method


@dataclass
class PromptFLFedPerParams(ClipPromptParams):
    n_personal: int | None = hp(None, ge=1)  # personal context vectors; None: L // 2 (ours)


@register_method("promptfl_fedper")
class PromptFLFedPer(PromptFL):
    """PromptFL+FedPer: the prompt's first context vectors are FedAvg-ed, its last ``n_personal`` stay local."""

    Params = PromptFLFedPerParams
    p: PromptFLFedPerParams

    def __init__(self, ctx, params):
        super().__init__(ctx, params)
        length = self.prompts.n_ctx
        self.n_personal = length // 2 if self.p.n_personal is None else self.p.n_personal
        if not 1 <= self.n_personal < length:
            raise ConfigError(f"method.args.n_personal must leave at least one base and one personal vector of "
                              f"the {length} context vectors (1 <= n_personal <= {length - 1}), got "
                              f"{self.p.n_personal!r}" + ("; set method.args.n_ctx >= 2" if length < 2 else ""))
        self.n_base = length - self.n_personal

    # The split runs along the context-token axis of the single prompt, not along the prompt axis.
    def init_server(self, seed):
        return {"ctx": self.initial_ctx(seed)[:, :self.n_base].clone()}, {}

    def init_client(self, cid, seed):
        return {"ctx": self.initial_ctx(seed)[:, self.n_base:].clone()}

    def assemble(self, shared, state):
        return torch.cat([shared["ctx"], state["ctx"]], dim=1)

    def split(self, ctx):
        return ctx[:, :self.n_base], ctx[:, self.n_base:]
