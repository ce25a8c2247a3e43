"""Prompt tuning on a frozen ViT: the model and the round that PEP-FedPT's baselines share.

PEP-FedPT (arXiv) §5.1 compares against Head-Tuning, FedVPT, FedVPT-D, FedPR, SGPT, pFedPG and
P-PT "on the same frozen backbone" with one optimiser (App. A.3.2: SGD, momentum 0.9, lr 0.1 with
an exponential decay per round, gradient clipping at 10). This module holds what they have in
common, so each baseline's file keeps only its own mechanism:

- :class:`PromptNet`: the frozen backbone φ (w_pre), ``shallow`` prompts inserted right after cls
  at the input (VPT-shallow, Jia et al. 2022 Eq. 1), optional ``deep`` prompts that replace the
  prompt tokens at the input of later blocks (VPT-deep, Eq. 2), a linear head on the final-norm
  cls, an optional extra block hook (a method's own tokens) and an optional additive logit term;
- :class:`PromptTuning`: a :class:`~fedrepro.fl.method.Method` whose trainable tensors are named
  (``SHARED`` are FedAvg-ed, ``PERSONAL`` stay with the client); one local round is E epochs of
  cross-entropy with SGD at ``train.lr``·γ^round and the norm clipped.

Prompts start from VPT's uniform(−v, v) with v = sqrt(6 / (3·patch² + d)) (Jia et al. 2022 §3.2
code convention; PEP-FedPT gives no initialisation); the head starts from the configured model's.
"""
from __future__ import annotations

import copy
import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from ..errors import ConfigError
from ..fl.aggregate import weighted_average
from ..fl.client_data import ClientData
from ..fl.local import evaluate_model, train_epochs
from ..fl.method import ClientUpdate, EvalResult, Method, State
from ..fl.seeding import derive_seed
from ..models.backbones import BlockHook, FrozenBackbone, chain_hooks, replace_prompts
from ..params import hp


def block_list(v) -> bool:
    """A ``check`` for block-index options: None, or a non-empty list of distinct ints >= 0."""
    return v is None or (isinstance(v, (list, tuple)) and len(v) > 0
                         and all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in v)
                         and len(set(v)) == len(v))


def prompt_backbone(ctx, method: str) -> tuple[FrozenBackbone, nn.Linear]:
    """The run's frozen ViT φ and its head. w_pre is an input every party holds, so it is never
    communicated: each side builds the same one (the run's initial model)."""
    model = ctx.create_model(seed=derive_seed(ctx.cfg.seed, "init"))
    backbone = getattr(model, "features", None)
    if not isinstance(backbone, FrozenBackbone) or not hasattr(backbone, "vit"):
        raise ConfigError(f"method {method} needs a prompt-tunable ViT, got model.name={ctx.cfg.model.name!r}; "
                          "valid: tiny_vit or vit_b16")
    return backbone.freeze().eval(), model.head


def vpt_bound(backbone: FrozenBackbone) -> float:
    """v of VPT's uniform(−v, v) prompt initialisation: a prompt on the scale of a patch embedding."""
    patch = backbone.vit.patch_embed.patch_size
    ph, pw = patch if isinstance(patch, tuple) else (patch, patch)
    return math.sqrt(6.0 / (3 * ph * pw + backbone.feature_dim))


def vpt_uniform(shape, v: float, gen: torch.Generator) -> Tensor:
    return (torch.rand(shape, generator=gen) * 2 - 1) * v


def prompt_sgd(train, params: list[nn.Parameter], decay: float = 1.0, lr: float | None = None,
               heads: list[nn.Parameter] = ()) -> torch.optim.SGD:
    """A fresh SGD over ``params`` (made trainable): the tensors in ``heads`` at ``lr`` (default
    ``train.lr``), every other one (prompts) at ``train.prompt_lr`` (default: the same), both × ``decay``."""
    base = train.lr if lr is None else lr
    prompt = base if train.prompt_lr is None else train.prompt_lr
    head_ids = {id(h) for h in heads}
    for q in params:
        q.requires_grad_(True)
    groups = [{"params": [q for q in params if q.numel() and id(q) in head_ids], "lr": base * decay},
              {"params": [q for q in params if q.numel() and id(q) not in head_ids], "lr": prompt * decay}]
    return torch.optim.SGD([g for g in groups if g["params"]], lr=base * decay, momentum=train.momentum,
                           weight_decay=train.weight_decay)


def class_prior(labels: Tensor, num_classes: int) -> Tensor:
    """δ_k^c = n_{k,c} / N_k (PEP-FedPT (arXiv) Eq. 14); uniform for a client without labels."""
    counts = torch.bincount(labels.cpu(), minlength=num_classes).float()
    return counts / counts.sum() if counts.sum() > 0 else torch.full((num_classes,), 1.0 / num_classes)


class PromptNet(nn.Module):
    """Frozen φ with ``shallow`` [n, d] prompts at block 0 and ``deep`` [len(deep_blocks), n_deep, d]
    prompts replacing the n_deep tokens after cls at ``deep_blocks``; a linear head on pooled cls."""

    def __init__(self, backbone: FrozenBackbone, head: nn.Linear, n_shallow: int = 0,
                 deep_blocks: tuple[int, ...] = (), n_deep: int = 0):
        super().__init__()
        self.backbone = backbone
        d = backbone.feature_dim
        self.shallow = nn.Parameter(torch.zeros(n_shallow, d))
        self.deep = nn.Parameter(torch.zeros(len(deep_blocks), n_deep, d))
        self.deep_at = {b: j for j, b in enumerate(deep_blocks)}
        if deep_blocks and n_deep > n_shallow:
            raise ConfigError(f"deep prompts replace the {n_shallow} shallow tokens after cls, so n_deep={n_deep} "
                              f"must be <= n_shallow")
        self.head = head
        self.extra_hook: BlockHook | None = None  # a method's own tokens (SGPT's group prompts)
        self.logit_bias: Tensor | None = None  # added to the logits (the prior-adjusted control)

    def train(self, mode: bool = True):
        super().train(mode)
        self.backbone.eval()  # w_pre is frozen: no dropout whatever the mode
        return self

    def _deep_hook(self, i: int, tokens: Tensor) -> Tensor | None:
        j = self.deep_at.get(i)
        if j is None or i == 0:
            return None
        return replace_prompts(tokens, self.deep[j])

    def features(self, x: Tensor, shallow: Tensor | None = None) -> Tensor:
        """The pooled final-norm cls; ``shallow`` overrides the stored shallow prompts (per-sample
        [B, n, d] allowed)."""
        p = self.shallow if shallow is None else shallow
        hooks = [h for h in (self._deep_hook if self.deep_at else None, self.extra_hook) if h is not None]
        hook = chain_hooks(*hooks) if hooks else None
        out = self.backbone.forward_tokens(self.backbone.embed(x), p if p.shape[-2] else None, hook)
        return self.backbone.pool(out)

    def forward(self, x: Tensor) -> Tensor:
        logits = self.head(self.features(x))
        return logits if self.logit_bias is None else logits + self.logit_bias


class _Features(nn.Module):
    def __init__(self, net: PromptNet):
        super().__init__()
        self.net = net

    def forward(self, x: Tensor) -> Tensor:
        return self.net.features(x)


class PromptedSplit(nn.Module):
    """A loaded :class:`PromptNet` as ``features`` (x -> pooled cls) and ``head``, for analyses."""

    def __init__(self, net: PromptNet):
        super().__init__()
        self.net = net
        self.features = _Features(net)
        self.head = net.head

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x)


@dataclass
class PromptParams:
    """The optimiser options PEP-FedPT (arXiv) App. A.3.2 gives every method on its backbone."""

    grad_clip: float | None = hp(10.0, gt=0)  # "gradient clipping at 10", after Acar et al.
    lr_decay: float = hp(0.99, gt=0, le=1)  # "exponential decay" of lr per round; γ unstated (ours)
    # Eq. 3's FedAvg is an unweighted mean over the sampled clients; "samples" weights by size.
    fedavg_weighting: str = hp("uniform", choices=("uniform", "samples"))


class PromptTuning(Method):
    """A prompt-tuning method: ``build`` makes the :class:`PromptNet`; tensors named in ``SHARED``
    are FedAvg-ed, those in ``PERSONAL`` never leave the client (held-out clients keep their
    initial values)."""

    Params = PromptParams
    # Runs only on a prompt-tunable ViT (tests and tools pick the model from this).
    requires_prompt_vit = True
    SHARED: tuple[str, ...] = ("shallow", "head.weight", "head.bias")
    PERSONAL: tuple[str, ...] = ()

    def __init__(self, ctx, params):
        super().__init__(ctx, params)
        backbone, head = prompt_backbone(ctx, self.name)
        self.num_classes = ctx.num_classes
        self.dim = backbone.feature_dim
        self.v = vpt_bound(backbone)
        self.net = self.build(backbone, head).to(ctx.device)

    def build(self, backbone: FrozenBackbone, head: nn.Linear) -> PromptNet:
        raise NotImplementedError

    @property
    def keys(self) -> tuple[str, ...]:
        return self.SHARED + self.PERSONAL

    def initial(self, seed: int) -> State:
        """Every trainable tensor at its start: prompts VPT-uniform, the head the model's own."""
        head = self.ctx.create_model(seed).head.state_dict()
        gen = torch.Generator().manual_seed(derive_seed(seed, "init", 1))
        out = {}
        for k in self.keys:
            if k.startswith("head."):
                out[k] = head[k.removeprefix("head.")].clone()
            else:
                out[k] = vpt_uniform(self.net.get_parameter(k).shape, self.v, gen).to(self.ctx.device)
        return out

    def init_server(self, seed: int) -> tuple[State, State]:
        start = self.initial(seed)
        return {k: start[k] for k in self.SHARED}, {}

    def init_client(self, cid: int, seed: int) -> State:
        # Every client's personal tensors start where the server's do (the run seed, not the
        # client's), so a held-out client holds the common initial prompt.
        if not self.PERSONAL:
            return {}
        start = self.initial(self.ctx.cfg.seed)
        return {k: start[k] for k in self.PERSONAL}

    def load(self, shared: State, state: State, data: ClientData | None = None) -> PromptNet:
        """The client's model: the shared and personal tensors copied into the one :class:`PromptNet`."""
        net = self.net
        with torch.no_grad():
            for k in self.keys:
                src = shared[k] if k in self.SHARED else state[k]
                net.get_parameter(k).copy_(src)
        net.logit_bias = None
        return net

    def optimizer(self, params: list[nn.Parameter], rnd: int, lr: float | None = None) -> torch.optim.SGD:
        """SGD at lr·γ^round, prompts at ``train.prompt_lr`` (default ``train.lr``), the head at ``train.lr``."""
        return prompt_sgd(self.ctx.cfg.train, params, self.p.lr_decay ** rnd, lr,
                          heads=list(self.net.head.parameters()))

    def clipper(self, params: list[nn.Parameter]) -> Callable[[], None] | None:
        if self.p.grad_clip is None:
            return None
        return lambda: torch.nn.utils.clip_grad_norm_(params, self.p.grad_clip)

    def local_train(self, net: PromptNet, keys: tuple[str, ...], data: ClientData, gen: torch.Generator,
                    rnd: int, epochs: int | None = None, **kw):
        """E epochs of cross-entropy on the tensors ``keys`` (the others frozen for this pass)."""
        params = [net.get_parameter(k) for k in keys]
        for k in self.keys:
            net.get_parameter(k).requires_grad_(k in keys)
        t = self.ctx.cfg.train
        return train_epochs(net, data, self.optimizer(params, rnd), t.local_epochs if epochs is None else epochs,
                            t.batch_size, gen, grad_hook=self.clipper(params), **kw)

    def client_update(self, shared: State, state: State, data: ClientData, gen: torch.Generator,
                      rnd: int) -> ClientUpdate:
        net = self.load(shared, state, data)
        stats = self.local_train(net, self.keys, data, gen, rnd)
        return ClientUpdate(upload={k: net.get_parameter(k).detach().clone() for k in self.SHARED},
                            state={k: net.get_parameter(k).detach().clone() for k in self.PERSONAL},
                            num_samples=data.num_train, metrics=stats.metrics())

    def weights(self, updates: list[ClientUpdate]) -> list[float]:
        return [1.0] * len(updates) if self.p.fedavg_weighting == "uniform" else [u.num_samples for u in updates]

    def aggregate(self, shared: State, updates: list[ClientUpdate], server_state: State,
                  rnd: int) -> tuple[State, State]:
        if not updates:
            return shared, server_state
        avg = weighted_average([{k: u.upload[k] for k in self.SHARED} for u in updates], self.weights(updates))
        return {**shared, **avg}, server_state

    def evaluate(self, shared: State, state: State, data: ClientData, gen: torch.Generator) -> EvalResult:
        return evaluate_model(self.load(shared, state, data), data)

    def global_model(self, shared: State, server_state: State):
        if self.PERSONAL:
            return None
        return copy.deepcopy(self.load(shared, {})).eval()

    def personalized_model(self, shared: State, state: State):
        return PromptedSplit(copy.deepcopy(self.load(shared, state)))
