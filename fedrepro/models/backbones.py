"""Frozen pretrained backbones with prompt hooks: the interface and the token helpers.

PEP-FedPT (arXiv) §3.1 and §4.1 (Eqs. 1–7) prompt-tunes a frozen ViT-B/16 and needs to
(i) insert extra tokens after the positional embedding, right after cls (VPT-shallow, no pos-emb
on prompts), (ii) read the cls token at the input of any block (CCMP's soft weights, Eq. 5) and
(iii) replace or insert tokens at the input of given blocks (VPT-deep; CCMP, Eq. 4). FedOTP (CVPR
2024) §4.2 needs a frozen CLIP image encoder whose *every* output token is kept.
:class:`FrozenBackbone` is the common interface; :mod:`fedrepro.models.vit` implements it on timm's
``VisionTransformer`` (imported lazily there, never downloading weights).
"""
from __future__ import annotations

import abc
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from ..data.cache import load_problem
from ..errors import ConfigError

# Called before block i with the current tokens [B, T, d]; returning a tensor replaces them.
BlockHook = Callable[[int, Tensor], "Tensor | None"]
# A prompt at a block: fixed tokens ([P, d] or [B, P, d]) or a function of the tokens entering that
# block (CCMP mixes class prompts with weights from the entering cls token, PEP-FedPT Eq. 6).
BlockPrompt = "Tensor | Callable[[Tensor], Tensor]"


def _batched(prompts: Tensor, tokens: Tensor) -> Tensor:
    if prompts.dim() == 2:
        prompts = prompts.unsqueeze(0).expand(tokens.shape[0], -1, -1)
    if prompts.dim() != 3 or prompts.shape[-1] != tokens.shape[-1] or prompts.shape[0] != tokens.shape[0]:
        raise ConfigError(
            f"prompts must have shape [P, {tokens.shape[-1]}] or [{tokens.shape[0]}, P, {tokens.shape[-1]}], "
            f"got {list(prompts.shape)}"
        )
    return prompts.to(tokens.dtype)


def insert_prompts(tokens: Tensor, prompts: Tensor | None) -> Tensor:
    """Insert prompt tokens ([P, d] shared or [B, P, d] per-sample) right after the cls token."""
    if prompts is None:
        return tokens
    return torch.cat([tokens[:, :1], _batched(prompts, tokens), tokens[:, 1:]], dim=1)


def replace_prompts(tokens: Tensor, prompts: Tensor) -> Tensor:
    """Replace the P tokens right after cls with ``prompts`` (VPT-deep: fresh prompts per block)."""
    prompts = _batched(prompts, tokens)
    if prompts.shape[1] > tokens.shape[1] - 1:
        raise ConfigError(f"cannot replace {prompts.shape[1]} prompt tokens in a sequence of {tokens.shape[1]}")
    return torch.cat([tokens[:, :1], prompts, tokens[:, 1 + prompts.shape[1]:]], dim=1)


PROMPT_MODES: dict[str, Callable[[Tensor, Tensor], Tensor]] = {"insert": insert_prompts, "replace": replace_prompts}


def prompt_hook(at: Mapping[int, BlockPrompt], mode: str = "replace") -> BlockHook:
    """A :data:`BlockHook` that inserts or replaces prompt tokens at the input of the given blocks.

    VPT-deep is ``prompt_hook({i: P_i for i in 1..L-1}, "replace")`` after shallow prompts at block 0;
    CCMP is ``prompt_hook({j: lambda t: mix(t[:, 0])}, "insert")`` (PEP-FedPT Eq. 4, 6).
    """
    if mode not in PROMPT_MODES:
        raise ConfigError(f"mode must be one of {', '.join(PROMPT_MODES)}, got {mode!r}")
    apply = PROMPT_MODES[mode]

    def hook(i: int, tokens: Tensor) -> Tensor | None:
        if i not in at:
            return None
        p = at[i]
        return apply(tokens, p(tokens) if callable(p) else p)

    return hook


def chain_hooks(*hooks: BlockHook | None) -> BlockHook:
    """Run several hooks in order at each block; each sees the previous one's tokens."""

    def hook(i: int, tokens: Tensor) -> Tensor | None:
        changed = None
        for h in hooks:
            if h is None:
                continue
            out = h(i, tokens if changed is None else changed)
            if out is not None:
                changed = out
        return changed

    return hook


class FrozenBackbone(nn.Module, abc.ABC):
    """A token-based backbone that prompt methods drive step by step.

    ``embed`` → ``forward_tokens`` (optionally with prompts / a per-block hook) → ``pool``.
    ``forward(x)`` composes them, so a backbone is also a plain φ for a :class:`SplitModel`.
    """

    feature_dim: int
    depth: int

    @abc.abstractmethod
    def embed(self, x: Tensor) -> Tensor:
        """Images → tokens [B, 1 + N, d]: cls first, positional embedding already added."""

    @abc.abstractmethod
    def forward_tokens(
        self, tokens: Tensor, prompts: Tensor | None = None, block_hook: BlockHook | None = None,
        start_block: int = 0,
    ) -> Tensor:
        """Run blocks ``start_block``.. and the final norm; return **all** output tokens [B, T, d].

        ``tokens`` are the input of block ``start_block`` (the output of :meth:`embed` for 0);
        ``prompts`` are inserted right after cls there. ``block_hook`` gets absolute block indices.
        """

    def pool(self, tokens: Tensor) -> Tensor:
        """Output tokens → feature vector [B, feature_dim]; the cls token by default."""
        return tokens[:, 0]

    def forward(self, x: Tensor, prompts: Tensor | None = None, block_hook: BlockHook | None = None) -> Tensor:
        return self.pool(self.forward_tokens(self.embed(x), prompts, block_hook))

    def freeze(self) -> FrozenBackbone:
        """Stop gradients into every backbone parameter (prompts and heads live elsewhere)."""
        for p in self.parameters():
            p.requires_grad_(False)
        return self


def read_weights(path: str | Path, what: str = "pretrained weights", fix: str = "",
                 error: type[Exception] = ConfigError) -> Any:
    """What the local weights file ``path`` holds, read with ``torch.load(weights_only=True)``:
    tensors, numbers and containers only, so that a file from elsewhere cannot run code as it is
    read. Any failure (a refused pickled object, a truncated file) is one ``error`` naming ``what``
    and ``path``, then ``fix``."""
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # pickle/zip errors come in many types; the path is what the user needs
        raise error(f"{what} {path} {load_problem(e)}" + (f"; {fix}" if fix else "")) from e


def load_pretrained(model: nn.Module, path: str | Path) -> nn.Module:
    """Load a local state-dict file into ``model`` strictly; never downloads.

    Accepts a raw state dict or a dict holding one under ``"state_dict"``; fp16 tensors are cast to
    the model's dtype by ``load_state_dict``. Raises FileNotFoundError for a missing file and
    ConfigError (naming the path and the offending keys) for an unreadable file or any missing,
    unexpected or wrongly shaped key.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"pretrained weights not found: {path} (load_pretrained never downloads)")
    state = read_weights(path)
    if isinstance(state, dict) and isinstance(state.get("state_dict"), dict):
        state = state["state_dict"]
    if not isinstance(state, dict):
        raise ConfigError(f"pretrained weights {path} hold a {type(state).__name__}, not a state dict")
    check_state_dict(model, state, str(path))
    model.load_state_dict(state, strict=True)
    return model


def check_state_dict(model: nn.Module, state: Mapping[str, Tensor], source: str) -> None:
    """Raise ConfigError naming ``source`` and the missing / unexpected / wrongly shaped keys."""
    own = model.state_dict()
    missing = sorted(set(own) - set(state))
    unexpected = sorted(set(state) - set(own))
    shape = sorted(
        f"{k} {list(state[k].shape)} vs model {list(own[k].shape)}"
        for k in set(own) & set(state)
        if hasattr(state[k], "shape") and state[k].shape != own[k].shape
    )
    problems = [
        f"{label}: {', '.join(keys[:5])}{' ...' if len(keys) > 5 else ''} ({len(keys)})"
        for label, keys in (("missing", missing), ("unexpected", unexpected), ("shape mismatch", shape))
        if keys
    ]
    if problems:
        raise ConfigError(f"pretrained weights {source} do not match the model; " + "; ".join(problems))
