"""Local CoOp: each client learns its own CoOp prompt on its own data and never communicates
(Zhou et al., "Learning to prompt for vision-language models", IJCV 2022; FedOTP (CVPR 2024)
Table 1's "local training" row).

The classifier is CLIP's (scale · cosine of the pooled image feature with each class's text
feature, CoOp Eq. 2). Two budgets:

- ``session_epochs=None`` (ours, "equal budget"): the private prompt trains ``train.local_epochs``
  epochs every round the client is sampled, so its budget matches the federated methods' (with every
  client taking part, rounds × E epochs: FedOTP's own);
- ``session_epochs=n`` (the official budget): one session of n epochs, the first round the client is
  sampled, and the prompt is kept as it is from then on. The official FedOTP code trains its local
  CoOp once (federated_main.py's local branch ends its round loop after the first round), for the
  MAX_EPOCH of its local.yaml: 10 epochs for GLP_OT, against FedOTP's 10 rounds × 5 epochs.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..fl.method import ClientUpdate
from ..params import hp
from .clip_prompt import ClipPromptMethod, ClipPromptParams, pooled_logits
from .registry import register_method

# The client state's flag of a client whose one session is done (``session_epochs``).
TRAINED = "trained"


@dataclass
class CoOpParams(ClipPromptParams):
    # None (ours): train.local_epochs every round the client is sampled; n: one session of n epochs, the
    # first round it is sampled, then no more training (the official code's local CoOp: 10 epochs).
    session_epochs: int | None = hp(None, ge=1)


@register_method("coop")
class CoOp(ClipPromptMethod):
    """CoOp trained locally: one private prompt per client, nothing averaged (Zhou et al., IJCV 2022)."""

    Params = CoOpParams
    p: CoOpParams
    N_PROMPTS = 1
    SHARED = ()

    def logits(self, text, feats):
        return pooled_logits(self.scale, text[0], feats)

    def client_update(self, shared, state, data, gen, rnd):
        if self.p.session_epochs is None:
            return super().client_update(shared, state, data, gen, rnd)
        if TRAINED in state:  # its one session is done: the prompt stays as it is, nothing to report
            return ClientUpdate(upload={}, state=dict(state), num_samples=data.num_train)
        feats = self.features(data, "train")
        ctx, stats, buf = self.train_ctx(self.assemble(shared, state), feats, self.batch_generator(gen), shared,
                                         epochs=self.p.session_epochs, anchor=self.anchor(shared, state, data))
        _, local = self.split(ctx)
        new_state = {**state, "ctx": local.clone(), TRAINED: torch.ones(())}
        return ClientUpdate(upload=self.with_momentum({}, buf), state=new_state, num_samples=data.num_train,
                            metrics=stats.metrics())
