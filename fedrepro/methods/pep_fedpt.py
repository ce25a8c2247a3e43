"""PEP-FedPT (Yashwanth, Ghosh, Tripathi, Chakraborty): class-contextualised mixed prompts on a frozen ViT.

Paper: "Prompt Estimation from Prototypes for Federated Prompt Tuning of Vision Transformers"
(arXiv 2510.25372), implemented from its text (§4, Alg. 1, App. A.2-A.4); no code is public.

The model (§4.1-4.2): a frozen pretrained ViT w_pre; n_S shared prompts P_S inserted once at the
input (VPT-shallow, Eq. 5); a bank of class prompts P_C, one d-vector per class; at each CCMP block
the cls token entering it is compared (cosine) with that block's global class prototypes, the
softmax at temperature τ is multiplied by the client's class prior δ_k and renormalised
(Eqs. 13-15), and the mixed token m = P_C s (Eq. 6/25) goes in right after cls; a linear head on
the final-norm cls (Eq. 8). P_S, P_C and the head are global and FedAvg-ed; a client keeps nothing
of its own: its prior comes from its own labels whenever it trains or is scored, so a held-out
client needs only the download (global θ and prototypes) and its labels.

One round, as :class:`PEPFedPT`'s steps (Alg. 1):

- ``client_update`` = LocalTrain: local prototypes of the received model (Eq. 10), then E epochs
  of CE on {P_S, P_C, head}; upload θ_k and the prototypes with which classes are present;
- ``aggregate``: FedAvg of θ; warm start (Eq. 19) on the first uploads, then every R rounds the
  mean of the non-zero uploads (Eq. 20) mixed in with momentum ρ (Eq. 21).

Choices the paper leaves open, each an option of :class:`PEPFedPTParams`; the
defaults and why are given beside each field. Two more that are not options:

- S_0 is the first round's sampled clients (``train.participation`` = 1 makes it all of them), and
  that round also trains: its μ is still 0, so every cosine is 0 and s reduces to the prior, the
  τ ≫ 1 limit of PEP-FedPT (arXiv) Prop. 1, rather than spending a round on prototypes alone.
- SGD with ``train.momentum``/``train.weight_decay`` at ``train.lr``·γ^round, re-created each round
  (the paper follows SGPT's optimiser, whose code does so); E = ``train.local_epochs``.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..errors import ConfigError
from ..fl.aggregate import weighted_average
from ..fl.client_data import ClientData
from ..fl.local import evaluate_model, train_epochs
from ..fl.method import ClientUpdate, EvalResult, Method, State
from ..fl.seeding import derive_seed
from ..models.backbones import FrozenBackbone, insert_prompts, replace_prompts
from ..params import hp
from .prompted import block_list, class_prior, prompt_backbone, prompt_sgd, vpt_bound, vpt_uniform
from .registry import register_method

POSITIONS = ("first", "middle", "late")
# Table 12's placements on ViT-B/16 (1-indexed layers 1-3, 5-7, 8-10) as fractions of the depth, so a
# shallower stand-in keeps the same relative position.
POSITION_START = {"first": 0 / 12, "middle": 4 / 12, "late": 7 / 12}
# The last block of each of Table 12's arms on ViT-B/16's 12 blocks (0-indexed 2, 6 and 9: layers 3, 7
# and 10), for single-block arms (single_ccmp_block).
PAPER_DEPTH = 12
POSITION_LAST = {"first": 2, "middle": 6, "late": 9}
WARM_STARTS = ("pretrained", "none")
THETA = ("P_S", "P_C", "head.weight", "head.bias")
COS_EPS = 1e-8


@dataclass
class PEPFedPTParams:
    """PEP-FedPT (arXiv §4, Alg. 1, App. A.3.2)."""

    n_shared: int = hp(1, ge=0)  # n_S = 1 in every experiment but Tiny-ImageNet Dir(0.3) (App. A.3.2)
    # CCMP blocks, 0-indexed; None: ``ccmp_count`` blocks at ``ccmp_position``. Paper layers 5,6,7
    # (1-indexed TL_5..TL_7) are blocks 4,5,6 of ViT-B/16, SGPT's layers too.
    ccmp_blocks: tuple | None = hp(None, check=block_list,
                                   valid="null or a non-empty list of distinct block indices >= 0")
    ccmp_position: str = hp("middle", choices=POSITIONS)  # Table 12: the middle is the paper's best
    ccmp_count: int = hp(3, ge=1)  # three CCMP layers, "for a fair comparison with SGPT" (App. A.3.2)
    tau: float = hp(0.05, gt=0)  # τ in all experiments (App. A.3.2)
    use_prior: bool = hp(True)  # False: "CCMP without CP" (Tables 5, 8)
    # False: s is the client's prior alone, the τ → ∞ limit of Prop. 1 (ours: a control with the
    # same prompts, prototypes and budget whose mix cannot depend on the image, so that it measures
    # what the cls-prototype similarity adds beyond the label set).
    similarity: bool = hp(True)
    # "replace": one CCMP slot after cls, overwritten at each CCMP block (Eq. 4/7 have one slot m);
    # "accumulate": a new token at each CCMP block (SGPT's code).
    ccmp_mode: str = hp("replace", choices=("replace", "accumulate"))
    # "raw": the residual-stream cls entering the block, literally "the cls token at the input of
    # layer l" (Eq. 10, 13); "ln": after that block's pre-attention LayerNorm.
    cls_feature: str = hp("raw", choices=("raw", "ln"))
    # One P_C reused at every CCMP block: the paper's communication count has one 100×768 P_C but
    # three prototype sets (§5.2.2); "per_layer" gives each block its own bank.
    class_prompts: str = hp("single", choices=("single", "per_layer"))
    detach_scores: bool = hp(False)  # the paper calls CCMP differentiable (A.6.3): gradients flow through s
    # R and ρ: the paper gives no values; every round with ρ = 0.9 is our choice.
    proto_period: int = hp(1, ge=1)
    proto_momentum: float = hp(0.9, ge=0, le=1)
    # "pretrained": the first round's clients (S_0) send prototypes of w_pre alone ("WarmStartUp(w_pre,
    # S_0)"), which become μ_0 by Eq. 19 without momentum; "none": μ starts at 0 and the first
    # uploads go through Eq. 21 like any other.
    warm_start: str = hp("pretrained", choices=WARM_STARTS)
    # Eq. 19 averages over all of S_0, shrinking classes a client lacks toward 0; masking them as
    # Eq. 20 does is our default.
    warm_start_mask: bool = hp(True)
    # Eq. 3's FedAvg is an unweighted mean over the sampled clients; "samples" weights by size (SGPT code).
    fedavg_weighting: str = hp("uniform", choices=("uniform", "samples"))
    grad_clip: float | None = hp(10.0, gt=0)  # "gradient clipping at 10", after Acar et al. (App. A.3.2)
    lr_decay: float = hp(0.99, gt=0, le=1)  # "exponential decay" of lr per round; γ unstated (ours)
    shared_init: str = hp("uniform", choices=("uniform", "zeros"))  # VPT's uniform, as for P_C
    # Class-level DP (App. A.4.1, Table 7): Laplace noise on each uploaded prototype, added by the
    # client before upload (the only place S_c is computable). None: off.
    dp_epsilon: float | None = hp(None, gt=0)
    # None: the paper's S_c = 2·max_i ||cls_i − μ_c||_1 / N_c from the client's own class-c samples.
    dp_sensitivity: float | None = hp(None, gt=0)


def laplace_scale(sensitivity: Tensor | float, epsilon: float) -> Tensor | float:
    """The Laplace mechanism's scale b = S/ε (PEP-FedPT (arXiv) App. A.4.1)."""
    return sensitivity / epsilon


def sample_laplace(shape, scale: Tensor, gen: torch.Generator) -> Tensor:
    """Laplace(0, scale) by inverse CDF from ``gen`` (torch's Laplace sampler takes no generator)."""
    u = torch.rand(shape, generator=gen, dtype=torch.float64) - 0.5
    noise = -torch.sign(u) * torch.log1p(-2 * u.abs())
    return noise.to(scale.dtype if isinstance(scale, Tensor) else torch.float32).to(
        scale.device if isinstance(scale, Tensor) else "cpu") * scale


def soft_weights(feat: Tensor, mu: Tensor, log_prior: Tensor | None, tau: float, similarity: bool = True) -> Tensor:
    """s = softmax(cos(cls, μ)/τ + log δ) (PEP-FedPT (arXiv) Eqs. 13-15): exp(cos/τ)·δ, renormalised; log 0 = −∞, so
    classes absent at the client get exactly zero weight. A zero prototype (a class nobody has
    reported yet) has cosine 0 thanks to the ε in the norms. ``similarity=False`` drops the cosine
    term: s = δ for every image (uniform without a prior)."""
    cos = F.normalize(feat, dim=-1, eps=COS_EPS) @ F.normalize(mu, dim=-1, eps=COS_EPS).T
    logits = cos / tau if similarity else torch.zeros_like(cos)
    if log_prior is not None:
        logits = logits + log_prior
    return torch.softmax(logits, dim=-1)


class PEPNet(nn.Module):
    """The prompted model of one client: frozen φ, P_S, P_C, head, with the prototypes μ and the
    client's log-prior as buffers set per call (they are never trained)."""

    def __init__(self, backbone: FrozenBackbone, head: nn.Linear, n_shared: int, banks: int, blocks: list[int],
                 p: PEPFedPTParams):
        super().__init__()
        self.backbone = backbone.freeze().eval()
        d, c = backbone.feature_dim, head.out_features
        self.P_S = nn.Parameter(torch.zeros(n_shared, d))
        self.P_C = nn.Parameter(torch.zeros(banks, c, d))
        self.head = head
        self.blocks = blocks
        self.p = p
        self.mu = torch.zeros(len(blocks), c, d)
        self.log_prior: Tensor | None = None

    def train(self, mode: bool = True):
        super().train(mode)
        self.backbone.eval()  # w_pre is frozen: no dropout, whatever the mode
        return self

    def set_context(self, mu: Tensor, prior: Tensor | None) -> None:
        self.mu = mu
        self.log_prior = None if prior is None else torch.log(prior.to(mu.device))

    def _feature(self, block: int, cls: Tensor) -> Tensor:
        if self.p.cls_feature == "ln":
            return self.backbone.vit.blocks[block].norm1(cls)
        return cls

    def forward(self, x: Tensor, record: list[Tensor] | None = None, bare: bool = False) -> Tensor:
        """Logits; ``record`` receives the similarity feature at each CCMP block (Eq. 10's cls).
        ``bare``: w_pre alone, no prompts (the warm start's "WarmStartUp(w_pre, S_0)")."""
        return self.head(self.backbone.pool(self._tokens(x, record, bare)))

    def cls_per_block(self, x: Tensor) -> Tensor:
        """[B, depth + 1, d]: the cls token each block receives (after CCMP), then the final-norm cls."""
        seen: list[Tensor] = []
        out = self._tokens(x, spy=lambda i, t: seen.append(t[:, 0]))
        return torch.stack(seen + [self.backbone.pool(out)], dim=1)

    def _tokens(self, x: Tensor, record: list[Tensor] | None = None, bare: bool = False, spy=None) -> Tensor:
        at = {b: j for j, b in enumerate(self.blocks)}
        filled = [False]

        def hook(i: int, tokens: Tensor) -> Tensor | None:
            out = self._ccmp(i, tokens, at, filled, record, bare)
            if spy is not None:
                spy(i, tokens if out is None else out)
            return out

        prompts = None if bare or self.P_S.shape[0] == 0 else self.P_S
        return self.backbone.forward_tokens(self.backbone.embed(x), prompts, hook)

    def _ccmp(self, i: int, tokens: Tensor, at: dict, filled: list, record, bare: bool) -> Tensor | None:
        if i not in at:
            return None
        j = at[i]
        feat = self._feature(i, tokens[:, 0])
        if record is not None:
            record.append(feat.detach())
        if bare:
            return None
        s = soft_weights(feat, self.mu[j], self.log_prior if self.p.use_prior else None, self.p.tau,
                         self.p.similarity)
        if self.p.detach_scores:
            s = s.detach()
        bank = self.P_C[j if self.P_C.shape[0] > 1 else 0]
        m = (s @ bank).unsqueeze(1)  # PEP-FedPT (arXiv) Eq. 25: a convex mix, so one token whatever |C|
        if self.p.ccmp_mode == "replace" and filled[0]:
            return replace_prompts(tokens, m)
        filled[0] = True
        return insert_prompts(tokens, m)  # right after cls: [cls, m, P_S, E] (Eq. 7)


def ccmp_blocks(p: PEPFedPTParams, depth: int) -> list[int]:
    """The 0-indexed CCMP blocks: explicit, or ``ccmp_count`` blocks at Table 12's relative position."""
    if p.ccmp_blocks is not None:
        bad = [b for b in p.ccmp_blocks if b >= depth]
        if bad:
            raise ConfigError(f"invalid method.args.ccmp_blocks={list(p.ccmp_blocks)!r}: the model has {depth} "
                              f"blocks; valid: distinct indices in [0, {depth - 1}]")
        return sorted(p.ccmp_blocks)
    n = min(p.ccmp_count, depth)
    start = min(int(POSITION_START[p.ccmp_position] * depth + 0.5), depth - n)
    return list(range(start, start + n))


def single_ccmp_block(position: str, depth: int) -> int:
    """The one CCMP block that stands for Table 12's ``position`` arm on a ``depth``-block ViT: the
    arm's last block at the same relative depth, rounded down (Table 12's arms on a model too shallow
    for its three-block arms to stay apart).

    Our reading. In replace mode (the default) the token written at an arm's last CCMP block is the
    one every later block reads, so that block carries the arm's geometry: how far the cls it compares
    with the prototypes has been processed, and through how many blocks the mixed token then acts. At
    depth 6 this gives blocks 1, 3 and 4: first reads a cls after 1 of 6 blocks and acts through 5 (the
    paper's layer 3: 2 of 12 and 10 of 12); middle after 3 of 6, through 3 (layer 7: 6 of 12 and 6 of
    12); late after 4 of 6, through 2 (layer 10: 9 and 3 of 12, i.e. 4.5 and 1.5 of 6, rounded down so
    that late still leaves a block after its own). Block 0 is never chosen: the cls entering it is the
    same learned vector for every image, so the similarity term is constant there."""
    if position not in POSITION_LAST:
        raise ConfigError(f"invalid position={position!r}; valid: {', '.join(POSITIONS)}")
    if depth < 1:
        raise ConfigError(f"invalid depth={depth!r}; valid: an int >= 1")
    return POSITION_LAST[position] * depth // PAPER_DEPTH


@register_method("pep_fedpt")
class PEPFedPT(Method):
    """PEP-FedPT (arXiv 2510.25372): shared + class-contextualised mixed prompts (CCMP) on a frozen ViT."""

    Params = PEPFedPTParams
    p: PEPFedPTParams
    requires_prompt_vit = True

    def __init__(self, ctx, params):
        super().__init__(ctx, params)
        # w_pre is an input of Alg. 1 that every party holds, so it is never communicated.
        backbone, head = prompt_backbone(ctx, self.name)
        self.blocks = ccmp_blocks(self.p, backbone.depth)
        self.num_classes = ctx.num_classes
        self.dim = backbone.feature_dim
        # The paper gives no init; VPT's uniform(−v, v) keeps the prompts on the scale of a patch
        # embedding (the patch of the configured ViT, 16 for ViT-B/16).
        self.v = vpt_bound(backbone)
        banks = len(self.blocks) if self.p.class_prompts == "per_layer" else 1
        self.net = PEPNet(backbone, head, self.p.n_shared, banks, self.blocks, self.p).to(ctx.device)

    # The five steps ---------------------------------------------------------------------------
    def init_server(self, seed: int) -> tuple[State, State]:
        head = self.ctx.create_model(seed).head.state_dict()
        gen = torch.Generator().manual_seed(derive_seed(seed, "init", 1))
        dev = self.ctx.device
        p_c = vpt_uniform(self.net.P_C.shape, self.v, gen)
        p_s = vpt_uniform(self.net.P_S.shape, self.v, gen)
        if self.p.shared_init == "zeros":
            p_s.zero_()
        shared = {"P_S": p_s.to(dev), "P_C": p_c.to(dev), "head.weight": head["weight"].clone(),
                  "head.bias": head["bias"].clone(),
                  "mu": torch.zeros(len(self.blocks), self.num_classes, self.dim, device=dev),
                  # Whether μ holds the warm start yet (Alg. 1's WarmStartUp before round 1).
                  "mu_ready": torch.tensor(0 if self.p.warm_start == "pretrained" else 1)}
        return shared, self._empty_period()

    def _empty_period(self) -> State:
        return {"proto_sum": torch.zeros(len(self.blocks), self.num_classes, self.dim, device=self.ctx.device),
                "proto_n": torch.zeros(len(self.blocks), self.num_classes, device=self.ctx.device),
                "period_rounds": 0}

    def init_client(self, cid: int, seed: int) -> State:
        return {}  # nothing personal: the prior is recomputed from the client's labels

    def load(self, shared: State, data: ClientData) -> PEPNet:
        net = self.net
        with torch.no_grad():
            for k in THETA:
                net.get_parameter(k).copy_(shared[k])
        prior = class_prior(data.train_y, self.num_classes) if self.p.use_prior else None
        net.set_context(shared["mu"], prior)
        return net

    @torch.no_grad()
    def local_prototypes(self, net: PEPNet, data: ClientData, bare: bool = False) -> tuple[Tensor, Tensor, Tensor]:
        """(μ_k [L, C, d], n_{k,c} [C], per-class S_c [L, C]): Eq. 10's class means of the CCMP blocks'
        cls with the received model (zero where n_{k,c} = 0), and App. A.4.1's sensitivity."""
        net.eval()
        feats, labels = [], []
        for x, y in data.eval_train_batches(256):
            rec: list[Tensor] = []
            net(x, record=rec, bare=bare)
            feats.append(torch.stack(rec))
            labels.append(y)
        L, C, d = len(self.blocks), self.num_classes, self.dim
        if not feats:
            z = torch.zeros(L, C, d, device=self.ctx.device)
            return z, torch.zeros(C, device=z.device), torch.zeros(L, C, device=z.device)
        f = torch.cat(feats, dim=1)  # [L, N, d]
        y = torch.cat(labels)
        onehot = F.one_hot(y, C).to(f.dtype)  # [N, C]
        n = onehot.sum(0)
        mu = torch.einsum("nc,lnd->lcd", onehot, f) / n.clamp(min=1)[None, :, None]
        dev = (f - mu[:, y]).abs().sum(-1)  # ||cls_i − μ_c||_1, [L, N]
        max_dev = torch.zeros(L, C, device=f.device).scatter_reduce(1, y.expand(L, -1), dev, "amax")
        sens = 2 * max_dev / n.clamp(min=1)
        return mu, n, sens

    def client_update(self, shared: State, state: State, data: ClientData, gen: torch.Generator,
                      rnd: int) -> ClientUpdate:
        net = self.load(shared, data)
        warm = not bool(shared["mu_ready"])
        # Alg. 1 LocalTrain: prototypes first, with the received θ and μ (or w_pre for the warm start).
        mu_k, n_k, sens = self.local_prototypes(net, data, bare=warm)
        t = self.ctx.cfg.train
        params = [net.P_S, net.P_C, *net.head.parameters()]
        opt = prompt_sgd(t, params, self.p.lr_decay ** rnd, heads=list(net.head.parameters()))
        clip = None
        if self.p.grad_clip is not None:
            def clip():
                torch.nn.utils.clip_grad_norm_(params, self.p.grad_clip)
        stats = train_epochs(net, data, opt, t.local_epochs, t.batch_size, gen, grad_hook=clip)
        if self.p.dp_epsilon is not None:
            s = sens if self.p.dp_sensitivity is None else torch.full_like(sens, self.p.dp_sensitivity)
            scale = laplace_scale(s, self.p.dp_epsilon)[..., None]
            mu_k = torch.where(n_k[None, :, None] > 0, mu_k + sample_laplace(mu_k.shape, scale, gen), mu_k)
        upload = {k: net.get_parameter(k).detach().clone() for k in THETA}
        # Which classes it holds, not how many images of each: the server needs only whether a class's
        # prototype is there, and PEP-FedPT (arXiv, "Privacy considerations") shares the prototypes, not
        # the client's label distribution.
        upload.update({"proto": mu_k, "proto_present": (n_k > 0).to(torch.uint8)})
        return ClientUpdate(upload=upload, state=state, num_samples=data.num_train, metrics=stats.metrics())

    def aggregate(self, shared: State, updates: list[ClientUpdate], server_state: State,
                  rnd: int) -> tuple[State, State]:
        if not updates:
            return shared, server_state
        w = [1.0] * len(updates) if self.p.fedavg_weighting == "uniform" else [u.num_samples for u in updates]
        new = {**shared, **weighted_average([{k: u.upload[k] for k in THETA} for u in updates], w)}
        protos = torch.stack([u.upload["proto"] for u in updates])  # [K, L, C, d]
        present = torch.stack([u.upload["proto_present"].float() for u in updates])  # [K, C]
        if not bool(shared["mu_ready"]):
            # Eq. 19 over S_0, with the zero-masking of Eq. 20 unless warm_start_mask is off.
            denom = present.sum(0) if self.p.warm_start_mask else torch.full_like(present[0], len(updates))
            mu0 = torch.einsum("kc,klcd->lcd", present, protos) / denom.clamp(min=1)[None, :, None]
            new["mu"], new["mu_ready"] = mu0, torch.tensor(1)
            return new, self._empty_period()
        period = {"proto_sum": server_state["proto_sum"] + torch.einsum("kc,klcd->lcd", present, protos),
                  "proto_n": server_state["proto_n"] + present.sum(0)[None].expand(len(self.blocks), -1),
                  "period_rounds": int(server_state["period_rounds"]) + 1}
        if period["period_rounds"] < self.p.proto_period:
            return new, period
        new["mu"] = momentum_update(shared["mu"], period["proto_sum"], period["proto_n"], self.p.proto_momentum)
        return new, self._empty_period()

    def evaluate(self, shared: State, state: State, data: ClientData, gen: torch.Generator) -> EvalResult:
        # Participating or held-out alike: global θ, global μ and the client's own prior (§5.3).
        return evaluate_model(self.load(shared, data), data)

    def global_model(self, shared: State, server_state: State):
        return None  # no client-free model: every prediction needs a client's prior (Eq. 13)


def momentum_update(mu: Tensor, proto_sum: Tensor, proto_n: Tensor, rho: float) -> Tensor:
    """PEP-FedPT (arXiv) Eqs. 20-21 (= Eqs. 11-12): μ ← ρ μ + (1 − ρ) μ̂, μ̂ the mean of the period's
    non-zero uploads; a class nobody reported keeps its prototype (ρ = 1 for it)."""
    seen = (proto_n > 0)[..., None]
    mean = proto_sum / proto_n.clamp(min=1)[..., None]
    return torch.where(seen, rho * mu + (1 - rho) * mean, mu)
