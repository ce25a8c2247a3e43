"""SGPT: shared and group prompt tuning on a frozen ViT, a PEP-FedPT (arXiv) baseline.

Paper: Deng, Thrampoulidis, Li, "Unlocking the Potential of Prompt-Tuning in Bridging Generalized
and Personalized Federated Learning" (CVPR 2024); "the code" below is its authors' public release.
One global model, with no client-kept part, that adapts to each sample through a group prompt
chosen by a learned key:

- shared prompts P_S in the early blocks (VPT-deep over blocks 0..S−1, S = 4 of ViT-B/16 in the
  code: ``n_shared`` tokens inserted after cls at block 0 and renewed at each later shared block);
- G groups (20 in the code), each with a key k_g ∈ R^d and one prompt token per group block
  (blocks 4-6 of ViT-B/16; the same relative position on a shallower ViT). A sample's query q(x)
  is compared with every key by cosine similarity and the nearest key's prompts are inserted right
  after cls at the group blocks. The choice is an argmax, so no loss through the network reaches
  the keys;
- a linear head on the final-norm cls.

Training is block coordinate descent (BCD) over two blocks of variables, shared knowledge first,
then group knowledge:

1. The server broadcasts θ = {P_S, group prompts, keys, head} and the cumulative group counts.
2. Stage 1 (shared): a client trains P_S and the head for E epochs of cross-entropy, the group
   prompts and keys fixed.
3. Stage 2 (group): with P_S fixed, it trains the group prompts, the keys and the head for E epochs
   of cross-entropy plus the key pull loss −cos(q(x), k_{g(x)}) (the keys' only gradient),
   counting how often it chooses each group.
4. It uploads θ and its group counts; it keeps nothing.
5. The server averages P_S and the head (FedAvg); averages each key over the clients in proportion
   to how often they chose its group, and the group prompts by FedAvg; then moves keys and group
   prompts with momentum, x ← ρ·x + (1 − ρ)·avg (ρ = 0.5 for both, the code's).

The code runs both stages in every round, about twice FedVPT's local work (as PEP-FedPT (arXiv)
Table 6 measures: 90.8 s against 45.5 s a round). Our default alternates the stages between rounds
(stage 1 in even rounds, stage 2 in odd ones, each for E epochs), which keeps the BCD at a
FedVPT-sized round; ``schedule="sequential"`` is the code's. Where the paper is silent, the gap is
filled as follows (each an option of :class:`SGPTParams`):

- the query: the paper compares the keys with the frozen pretrained ViT's last-layer cls, a second
  forward pass per batch (the code caches it per sample). Our default is the cls entering the first
  group block in the same pass, detached ("prompted"); "frozen" (w_pre's cls entering that block,
  no prompts) and "pretrained" (w_pre's final-norm cls, the paper's) are options, and
  ``query_relu`` is the code's ReLU on the query;
- stage 1 runs with the group prompts in place and frozen, so both stages descend one objective;
  the code's stage 1 has no group prompts at all (``stage1_groups="off"``);
- the head is trained in both stages (the code's stage-2 optimiser includes it);
- selection is the nearest key in training too; the code's rebalancing, which scales the distance
  1 − cos by each group's share of all past selections so that rarely chosen groups win more
  often, is ``balance_groups``;
- G = min(20, number of classes): more groups than classes would only split classes;
- shared prompts are renewed at each shared block (VPT-deep; the code inserts one more token at
  each), group tokens accumulate (a new one after cls at each group block, as in the code), and the
  head reads cls alone (the code averages cls with the group tokens' outputs: ``pool="mean"``);
- keys start orthonormal (the code's Gram-Schmidt), prompts VPT-uniform as in
  :mod:`~fedrepro.methods.prompted`, whose optimiser and FedAvg weighting are used unchanged;
- the reported ``train_loss`` is the cross-entropy of both stages, without the pull loss.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..errors import ConfigError
from ..fl.aggregate import weighted_average
from ..fl.method import ClientUpdate, State
from ..fl.seeding import derive_seed
from ..models.backbones import FrozenBackbone, chain_hooks, insert_prompts, replace_prompts
from ..params import hp
from .pep_fedpt import POSITION_START
from .prompted import PromptNet, PromptParams, PromptTuning, block_list
from .registry import register_method

COS_EPS = 1e-8
# Added to each group's selection frequency when rebalancing, so a never-chosen group's distance
# is small but not zero (the code's constant).
BALANCE_EPS = 5e-4
GROUP = ("group", "group_keys")


@dataclass
class SGPTParams(PromptParams):
    """SGPT (Deng et al., CVPR 2024) on the PEP-FedPT (arXiv) optimiser."""

    n_shared: int = hp(1, ge=1)  # shared tokens at block 0 and each later shared block (the code's n_prompt = 1)
    # Shared blocks 0..S−1; None: every block before the first group block (the code: 0-3 before 4-6).
    shared_depth: int | None = hp(None, ge=1)
    # Group blocks, 0-indexed; None: ``group_count`` blocks at the relative position of 4-6 in ViT-B/16.
    group_blocks: tuple | None = hp(None, check=block_list,
                                    valid="null or a non-empty list of distinct block indices >= 1")
    group_count: int = hp(3, ge=1)  # three group blocks (the code's 4 5 6)
    # G; None: min(20, number of classes): the code's 20 groups for CIFAR-100, never more than classes.
    n_groups: int | None = hp(None, ge=1)
    query: str = hp("prompted", choices=("prompted", "frozen", "pretrained"))  # see the module docstring
    query_relu: bool = hp(False)  # the code applies ReLU to the query before the cosine
    key_loss_weight: float = hp(1.0, ge=0)  # the pull loss is added unweighted in the code
    key_momentum: float = hp(0.5, ge=0, le=1)  # ρ for the keys (the code's moment = 0.5)
    prompt_momentum: float = hp(0.5, ge=0, le=1)  # ρ for the group prompts (the code's moment_p = 0.5)
    # A key is averaged over the clients that chose its group, in proportion (the code).
    key_weighting: str = hp("selections", choices=("selections", "fedavg"))
    # Group prompts are plainly FedAvg-ed (the code's default path).
    prompt_weighting: str = hp("fedavg", choices=("fedavg", "selections"))
    stage1_groups: str = hp("frozen", choices=("frozen", "off"))  # "off": the code's prompt-free stage 1
    stage2_head: bool = hp(True)  # the code's stage 2 also trains the head
    balance_groups: bool = hp(False)  # the code's frequency-scaled selection in training
    group_mode: str = hp("insert", choices=("insert", "replace"))  # "insert": a new token per group block (code)
    pool: str = hp("cls", choices=("cls", "mean"))  # "mean": cls and group tokens averaged (code)
    # "alternate": stage 1 in even rounds, stage 2 in odd ones (a FedVPT-sized round); "sequential":
    # both in every round (the code; about twice the local work).
    schedule: str = hp("alternate", choices=("alternate", "sequential"))
    # Epochs of each stage; None: train.local_epochs (the code gives each stage E); 0 skips a stage.
    shared_epochs: int | None = hp(None, ge=0)
    group_epochs: int | None = hp(None, ge=0)


def select_groups(query: Tensor, keys: Tensor, freq: Tensor | None = None, relu: bool = False) -> Tensor:
    """g(x) = argmax_g cos(q(x), k_g), [B] indices; with ``freq`` (each group's share of past
    selections) argmin_g (1 − cos)·(freq_g + ε) instead. A hard choice: no gradient reaches the keys."""
    with torch.no_grad():
        cos = cosine(query, keys, relu)
        if freq is None:
            return cos.argmax(-1)
        return ((1 - cos) * (freq.to(cos) + BALANCE_EPS)).argmin(-1)


def cosine(query: Tensor, keys: Tensor, relu: bool = False) -> Tensor:
    q = F.relu(query) if relu else query
    return F.normalize(q, dim=-1, eps=COS_EPS) @ F.normalize(keys, dim=-1, eps=COS_EPS).T


def pull_loss(query: Tensor, keys: Tensor, choice: Tensor, relu: bool = False) -> Tensor:
    """−mean_i cos(q_i, k_{g_i}): pulls each chosen key toward its queries (the query is fixed)."""
    q = F.relu(query.detach()) if relu else query.detach()
    k = F.normalize(keys[choice], dim=-1, eps=COS_EPS)
    return -(F.normalize(q, dim=-1, eps=COS_EPS) * k).sum(-1).mean()


def orthonormal_keys(n: int, d: int, gen: torch.Generator) -> Tensor:
    """n keys with orthonormal rows (unit rows when n > d, where orthogonality is impossible)."""
    a = torch.randn(d, n, generator=gen)
    if n <= d:
        return torch.linalg.qr(a).Q.T.contiguous()
    return F.normalize(a.T, dim=-1)


def selection_average(tensors: list[Tensor], counts: Tensor, weights: list[float]) -> Tensor:
    """Average of [..., G, d] tensors where group g's slice is weighted by each client's share of
    that group's selections ``counts`` [K, G]; a group nobody chose falls back to ``weights``."""
    x = torch.stack(tensors)
    fall = torch.as_tensor(weights, dtype=x.dtype, device=x.device)
    fall = fall / fall.sum()
    counts = counts.to(x)
    total = counts.sum(0)
    share = torch.where(total > 0, counts / total.clamp(min=1e-12), fall[:, None].expand_as(counts))
    share = share.view(share.shape[0], *([1] * (x.dim() - 3)), share.shape[1], 1)
    return (share * x).sum(0)


def default_group_blocks(p: SGPTParams, depth: int) -> list[int]:
    """The 0-indexed group blocks: explicit, or ``group_count`` from 4/12 of the depth (4-6 of 12)."""
    if p.group_blocks is not None:
        bad = [b for b in p.group_blocks if not 1 <= b < depth]
        if bad:
            raise ConfigError(f"invalid method.args.group_blocks={list(p.group_blocks)!r}: the model has {depth} "
                              f"blocks; valid: distinct indices in [1, {depth - 1}] (block 0 holds shared prompts)")
        return sorted(p.group_blocks)
    if depth < 2:
        raise ConfigError(f"method sgpt needs a ViT of at least 2 blocks (shared, then group), got {depth}")
    n = min(p.group_count, depth - 1)
    start = max(1, min(int(POSITION_START["middle"] * depth + 0.5), depth - n))
    return list(range(start, start + n))


class SGPTNet(PromptNet):
    """:class:`PromptNet` (shared prompts VPT-deep over blocks 0..S−1, head) with a pool of G
    groups: ``group`` [L, G, d] (one token per group block) and ``group_keys`` [G, d]."""

    def __init__(self, backbone: FrozenBackbone, head: nn.Linear, n_shared: int, shared_depth: int,
                 group_blocks: list[int], n_groups: int, p: SGPTParams):
        super().__init__(backbone, head, n_shallow=n_shared, deep_blocks=tuple(range(1, shared_depth)),
                         n_deep=n_shared)
        d = backbone.feature_dim
        self.group = nn.Parameter(torch.zeros(len(group_blocks), n_groups, d))
        self.group_keys = nn.Parameter(torch.zeros(n_groups, d))
        self.group_at = {b: j for j, b in enumerate(group_blocks)}
        self.p = p
        self.use_groups = True
        self.freq: Tensor | None = None  # groups' global selection shares, for rebalancing
        self.last_query: Tensor | None = None
        self.last_choice: Tensor | None = None
        self._query: Tensor | None = None
        self._n_group = 0

    def _outside_query(self, x: Tensor, tokens: Tensor) -> Tensor | None:
        if self.p.query == "prompted":
            return None
        with torch.no_grad():
            bb = self.backbone
            if self.p.query == "pretrained":
                return bb.pool(bb.forward_tokens(tokens))
            t = tokens
            for i in range(min(self.group_at)):
                t = bb.vit.blocks[i](t)
            return t[:, 0]

    def _group_hook(self, i: int, tokens: Tensor) -> Tensor | None:
        j = self.group_at.get(i)
        if j is None:
            return None
        if self.last_choice is None:  # the first group block: choose once per sample
            q = tokens[:, 0].detach() if self._query is None else self._query
            freq = self.freq if self.training and self.p.balance_groups else None
            self.last_query, self.last_choice = q, select_groups(q, self.group_keys, freq, self.p.query_relu)
        m = self.group[j][self.last_choice].unsqueeze(1)
        if self.p.group_mode == "replace" and self._n_group:
            return replace_prompts(tokens, m)
        self._n_group += 1
        return insert_prompts(tokens, m)

    def features(self, x: Tensor, shallow: Tensor | None = None) -> Tensor:
        p = self.shallow if shallow is None else shallow
        tokens = self.backbone.embed(x)
        self.last_query = self.last_choice = None
        self._n_group = 0
        self._query = self._outside_query(x, tokens) if self.use_groups else None
        hooks = [h for h in (self._deep_hook if self.deep_at else None,
                             self._group_hook if self.use_groups else None) if h is not None]
        out = self.backbone.forward_tokens(tokens, p if p.shape[-2] else None, chain_hooks(*hooks) if hooks else None)
        if self.p.pool == "mean" and self._n_group:
            return out[:, :1 + self._n_group].mean(1)
        return self.backbone.pool(out)


@register_method("sgpt")
class SGPT(PromptTuning):
    """SGPT: shared prompts and key-selected group prompts, all FedAvg-ed (Deng et al., CVPR 2024)."""

    Params = SGPTParams
    p: SGPTParams
    SHARED = ("shallow", "deep", "group", "group_keys", "head.weight", "head.bias")
    STAGE1 = ("shallow", "deep", "head.weight", "head.bias")

    def build(self, backbone, head):
        self.group_blocks = default_group_blocks(self.p, backbone.depth)
        first = self.group_blocks[0]
        depth = first if self.p.shared_depth is None else self.p.shared_depth
        if depth > first:
            raise ConfigError(f"invalid method.args.shared_depth={depth}: shared prompts come before the first "
                              f"group block ({first}); valid: an integer in [1, {first}]")
        self.n_groups = min(20, self.num_classes) if self.p.n_groups is None else self.p.n_groups
        return SGPTNet(backbone, head, self.p.n_shared, depth, self.group_blocks, self.n_groups, self.p)

    def initial(self, seed: int) -> State:
        out = super().initial(seed)
        gen = torch.Generator().manual_seed(derive_seed(seed, "init", 2))
        out["group_keys"] = orthonormal_keys(self.n_groups, self.dim, gen).to(self.ctx.device)
        return out

    def init_server(self, seed: int) -> tuple[State, State]:
        shared, server = super().init_server(seed)
        # Selections per group over the whole run (the code's global counts), for rebalancing.
        shared["group_count"] = torch.zeros(self.n_groups, device=self.ctx.device)
        return shared, server

    def load(self, shared, state, data=None):
        net = super().load(shared, state, data)
        counts = shared.get("group_count")
        net.freq = counts / counts.sum() if counts is not None and counts.sum() > 0 else None
        net.use_groups = True
        return net

    def client_update(self, shared: State, state: State, data, gen: torch.Generator, rnd: int) -> ClientUpdate:
        net = self.load(shared, state, data)
        e = self.ctx.cfg.train.local_epochs
        e1 = e if self.p.shared_epochs is None else self.p.shared_epochs
        e2 = e if self.p.group_epochs is None else self.p.group_epochs
        if self.p.schedule == "alternate":
            e1, e2 = (0, e2) if rnd % 2 else (e1, 0)
        metrics: dict[str, float] = {}
        ce_sum, seen = 0.0, 0
        if e1:
            net.use_groups = self.p.stage1_groups == "frozen"
            s1 = self.local_train(net, self.STAGE1, data, gen, rnd, epochs=e1)
            metrics["loss_stage1"] = s1.loss
            ce_sum, seen = s1.loss * s1.samples, s1.samples
        net.use_groups = True
        counts = torch.zeros(self.n_groups, device=self.ctx.device)
        if e2:
            def batch_loss(model: SGPTNet, x: Tensor, y: Tensor):
                ce = F.cross_entropy(model(x), y)
                pull = pull_loss(model.last_query, model.group_keys, model.last_choice, self.p.query_relu)
                counts.add_(torch.bincount(model.last_choice, minlength=self.n_groups).to(counts))
                return ce + self.p.key_loss_weight * pull, {"loss_stage2_ce": ce, "loss_key": pull}

            keys = GROUP + (("head.weight", "head.bias") if self.p.stage2_head else ())
            s2 = self.local_train(net, keys, data, gen, rnd, epochs=e2, batch_loss=batch_loss)
            metrics.update(s2.parts)
            ce_sum, seen = ce_sum + s2.parts["loss_stage2_ce"] * s2.samples, seen + s2.samples
        if seen:
            # Cross-entropy alone, over both stages: comparable with the other methods' training loss.
            metrics["train_loss"] = ce_sum / seen
        upload = {k: net.get_parameter(k).detach().clone() for k in self.SHARED}
        upload["group_count"] = counts
        return ClientUpdate(upload=upload, state={}, num_samples=data.num_train, metrics=metrics)

    def aggregate(self, shared: State, updates: list[ClientUpdate], server_state: State,
                  rnd: int) -> tuple[State, State]:
        if not updates:
            return shared, server_state
        w = self.weights(updates)
        new = {**shared, **weighted_average([{k: u.upload[k] for k in self.SHARED} for u in updates], w)}
        counts = torch.stack([u.upload["group_count"] for u in updates])
        for k, how, rho in (("group_keys", self.p.key_weighting, self.p.key_momentum),
                            ("group", self.p.prompt_weighting, self.p.prompt_momentum)):
            avg = selection_average([u.upload[k] for u in updates], counts, w) if how == "selections" else new[k]
            new[k] = rho * shared[k] + (1 - rho) * avg
        new["group_count"] = shared["group_count"] + counts.sum(0)
        return new, server_state
