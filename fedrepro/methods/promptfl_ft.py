"""PromptFL+FT: PromptFL, then each client fine-tunes the global prompt on its own data before it is
scored (the "PromptFL + FT" adaptation defined in pFedPrompt (Guo et al., WWW 2023); one of the PFL
baselines of FedOTP (CVPR 2024) §5.1 and Table 1).

Training is PromptFL's (one CoOp prompt, FedAvg-ed; :mod:`fedrepro.methods.promptfl`). At
evaluation each client copies the global prompt, runs ``ft_epochs`` epochs of the same local SGD on
its own train split (cross-entropy on CLIP's classifier), scores its test split with the copy and
throws it away, so the next round starts from the global prompt as in PromptFL. Neither pFedPrompt
nor FedOTP gives the fine-tuning budget; one epoch (the default) is our choice. The fine-tuning
optimiser is a fresh one even with ``optimizer_scope="shared"``: it is the client's own pass, not
part of the shared training run.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..params import hp
from .clip_prompt import ClipPromptParams
from .promptfl import PromptFL
from .registry import register_method


@dataclass
class PromptFLFTParams(ClipPromptParams):
    ft_epochs: int = hp(1, ge=1)  # local fine-tuning epochs before each score (ours: not given)


@register_method("promptfl_ft")
class PromptFLFT(PromptFL):
    """PromptFL+FT: the global prompt fine-tuned for ``ft_epochs`` on the client's train split, then tested."""

    Params = PromptFLFTParams
    p: PromptFLFTParams

    def eval_ctx(self, shared, state, data, gen):
        ctx = self.assemble(shared, state)
        feats = self.features(data, "train")
        # shared={} gives the fine-tuning its own optimiser (no momentum carried in the broadcast).
        tuned, _, _ = self.train_ctx(ctx, feats, self.batch_generator(gen), {}, epochs=self.p.ft_epochs)
        return tuned
