"""FedPFT+Con (ICLR "FedPFT+Con" = arXiv "FedPFT"): FedPFT plus a MoCo contrastive task through τ.

FedPFT (ICLR) §3.6 and App. C; arXiv §3.5-3.6 and Alg. 1. Client i holds a second prompt set
p_ρ,i, which τ uses to transform features for the contrastive task; its projection head h_ρ is
global, aggregated with φ, τ, h_κ. The loss of each step is L_CE + L_Con (ICLR Eq. 6), L_Con MoCo's
InfoNCE (Eq. 7) with the query q = h_ρ(τ([φ(x′), p_ρ,i])₀) and the positive key
k₊ = h̃_ρ(τ([φ̃(x″), p_ρ,i])₀) against a queue of negatives; x′, x″ are two augmented views of x,
φ̃ and h̃_ρ the momentum copies of φ and h_ρ.

Gradient routing (ICLR Eqs. 8-9, arXiv Eqs. 5-6; :data:`.pft.CE_ROUTES`, :data:`.pft.CON_ROUTES`):

=========================  ================  =================
phase                      L_CE trains       L_Con trains
=========================  ================  =================
feature (R_f epochs)       p_κ, τ            φ, τ, h_ρ
task (R_a epochs)          φ, τ, h_κ         p_ρ, τ
=========================  ================  =================

so φ is "exclusively updated by L_Con" in the first phase and "solely by L_CE" in the second (arXiv
§3.6). A module a loss must not train is kept out of its graph (φ under ``no_grad``) or has
``requires_grad`` off (h_κ, h_ρ: gradients still flow *through* it to τ and the prompts); a prompt
set is detached in the branch of the loss that must not train it.

Hyperparameters: n_ρ = ``n_rho`` = 20 (arXiv App. B.3); τ's lr 0.01 (ICLR App. D.3 "remains 0.01",
arXiv App. B.3); (R_f, R_a) = (3, 2) under Dirichlet α = 0.1 and (4, 1) otherwise (both versions),
so ``epoch_split="alpha_rule"`` by default. "For the contrastive learning algorithm, we adopt the
default settings from MoCo" (arXiv App. B.3); the rest is ours:

- MoCo-v1's defaults: ``proj_dim`` 128, ``moco_momentum`` 0.999, ``temperature`` 0.07, q and k
  L2-normalised; h_ρ one linear layer (its size in arXiv App. I: 256·128 + 128 at m = 256).
- Key encoder φ̃, h̃_ρ: re-initialised from the downloaded global φ, h_ρ every round
  (``momentum_encoder="round"``) or kept per client (``"persistent"``); the EMA runs after every
  step of both phases; its BatchNorm buffers are its own (batch statistics in train mode), as in
  MoCo, which averages parameters only; no shuffle-BN (one device).
- The queue of negatives is per client and kept across rounds, ``queue_size`` 4096 (MoCo's
  65,536 is far more than a client's few hundred images a round; set it for fidelity). With
  ``queue_cap="client_data"`` (default; our reading of "the default settings from MoCo" at a
  client's scale) a client's queue holds at most as many keys as it has training images:
  min(``queue_size``, its training split). MoCo's queue (65,536 keys over ImageNet's 1.28M
  images) holds each image at most once, from a recent encoder; 4096 keys over a client's 200
  images would hold about 20 stale keys of every image, the anchor's own among its negatives.
  ``"none"`` keeps ``queue_size`` whatever the data.
- φ's BatchNorm running statistics (which every evaluation uses) are estimated on the clean
  images only: the views x′ pass φ with batch statistics, as in MoCo, but do not write the running
  statistics (``view_bn_stats="keep"``; ours, the papers are silent). The views' crops and colour
  jitter move the statistics far from the clean images' (on Fashion-MNIST a crop strips much of
  the black background), and in the feature phase, where the CE forward runs φ in eval mode, they
  would be φ's only writers. ``"update"`` lets the views write them too (this package's
  behaviour before issue 54). The two-stage baseline's stage 1 (:mod:`.fedpft_two_stage`) has no
  clean forward: there the views write them whatever the option, as MoCo's own pretraining does.
- Keys use the current τ and p_ρ under ``no_grad`` (Eq. 7 has no momentum τ); L_CE uses the
  un-augmented batch.
- The views: MoCo-v1's augmentation on tensors (:func:`fedrepro.data.augment.augment`, with
  ``aug_crop_min``, ``aug_jitter``, ``aug_gray_p``) instead of the papers' CPU pipeline (ICLR
  App. D.4); on 8×8 test images ``aug_crop_min=0.8, aug_jitter=0.1`` are the sensible values.

Ablation options (ICLR Table 4): ``con_prompts="kappa"`` is Setting IV (no separate p_ρ: the
contrastive branch goes through p_κ in p_ρ's role); ``"none"`` feeds τ [f] alone in that branch;
with ``alternate=False`` Setting VI (= arXiv VIII).
"""
from __future__ import annotations

import contextlib
import copy
from dataclasses import dataclass
from typing import Any, Iterator

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..data.augment import augment
from ..errors import ConfigError
from ..fl.client_data import ClientData
from ..fl.local import set_trainable
from ..fl.method import State
from ..models.ftm import PFTNet
from ..params import hp
from .contrastive import enqueue, info_nce, momentum_update
from .fedpft import FedPFT, FedPFTParams
from .pft import CON_ROUTES, EPOCH_SPLITS
from .registry import register_method

MOMENTUM_ENCODERS = ("round", "persistent")
CON_PROMPTS = ("rho", "kappa", "none")
VIEW_BN_STATS = ("keep", "update")
QUEUE_CAPS = ("client_data", "none")

# Client-state keys: the queue of negative keys, its write pointer, the persistent key encoder.
QUEUE = "queue"
QUEUE_PTR = "queue_ptr"
MOMENTUM_PREFIX = "momentum."


@dataclass
class FedPFTConParams(FedPFTParams):
    """FedPFT+Con: τ's lr 0.01 and the (3, 2)-at-α=0.1 split are both versions' settings."""

    lr_ftm: float = hp(0.01, gt=0)
    epoch_split: str = hp("alpha_rule", choices=EPOCH_SPLITS)
    n_rho: int = hp(20, ge=0)  # at least 1 with con_prompts="rho"
    proj_dim: int = hp(128, ge=1)
    temperature: float = hp(0.07, gt=0)
    moco_momentum: float = hp(0.999, ge=0, le=1)
    queue_size: int = hp(4096, ge=1)
    queue_cap: str = hp("client_data", choices=QUEUE_CAPS)  # ours: at most one key per training image
    view_bn_stats: str = hp("keep", choices=VIEW_BN_STATS)  # ours: the views leave φ's BN running stats alone
    momentum_encoder: str = hp("round", choices=MOMENTUM_ENCODERS)
    con_prompts: str = hp("rho", choices=CON_PROMPTS)
    aug_crop_min: float = hp(0.2, gt=0, le=1)
    aug_jitter: float = hp(0.4, ge=0, lt=1)
    aug_gray_p: float = hp(0.2, ge=0, le=1)

    def validate(self) -> None:
        super().validate()
        if self.con_prompts == "rho" and self.n_rho < 1:
            raise ConfigError(f"invalid method.args.n_rho={self.n_rho!r}; valid: an integer >= 1 "
                              "(0 only with method.args.con_prompts kappa or none)")
        if self.con_prompts == "kappa" and not self.use_prompts:
            raise ConfigError("invalid method.args.con_prompts='kappa' with method.args.use_prompts=false; "
                              "valid: con_prompts in rho, none (or use_prompts=true)")


@contextlib.contextmanager
def running_stats_untouched(module: nn.Module) -> Iterator[None]:
    """Within the block, ``module``'s BatchNorm layers normalise a training-mode forward by the
    batch's statistics without writing their running statistics (nor ``num_batches_tracked``):
    torch's BatchNorm updates its buffers only while ``track_running_stats`` is set. An eval-mode
    forward still reads the running statistics, as before."""
    tracking = [m for m in module.modules() if getattr(m, "track_running_stats", False)]
    for m in tracking:
        m.track_running_stats = False
    try:
        yield
    finally:
        for m in tracking:
            m.track_running_stats = True


@register_method("fedpft_con")
class FedPFTCon(FedPFT):
    """FedPFT+Con (ICLR "FedPFT+Con" = arXiv "FedPFT"): FedPFT plus a MoCo task through τ and p_ρ."""

    Params = FedPFTConParams
    p: FedPFTConParams
    contrastive = True

    def __init__(self, ctx, params):
        super().__init__(ctx, params)
        # The key encoder φ̃, h̃_ρ: scratch modules, loaded at the start of every client's round.
        self.key_phi = copy.deepcopy(self.model.features)
        self.key_proj = copy.deepcopy(self.model.proj)
        set_trainable(self.key_phi, False)
        set_trainable(self.key_proj, False)

    def make_extras(self, m: int) -> dict[str, Any]:
        n_rho = self.p.n_rho if self.p.con_prompts == "rho" else 0
        return {**super().make_extras(m), "n_rho": n_rho, "proj_dim": self.p.proj_dim}

    def client_extras(self, gen: torch.Generator, seed: int) -> State:
        state = super().client_extras(gen, seed)  # the prompts, then the queue from the same stream
        dev = self.ctx.device
        queue = F.normalize(torch.randn(self.p.queue_size, self.p.proj_dim, generator=gen), dim=1)
        state[QUEUE] = queue.to(dev)
        state[QUEUE_PTR] = torch.zeros((), dtype=torch.long, device=dev)
        if self.p.momentum_encoder == "persistent":  # starts as the server's initial φ, h_ρ
            for k, v in self._initial(seed).items():
                if k.startswith(("features.", "proj.")):
                    state[MOMENTUM_PREFIX + k] = v.clone()
        return state

    # The round's queue and key encoder ------------------------------------------------------------
    def queue_length(self, data: ClientData) -> int:
        """The client's queue length: ``queue_size``, at most its number of training images under
        ``queue_cap="client_data"``."""
        if self.p.queue_cap == "client_data":
            return max(1, min(self.p.queue_size, data.num_train))
        return self.p.queue_size

    def begin_round(self, net: PFTNet, state: State, data: ClientData) -> dict[str, Any]:
        if self.p.momentum_encoder == "persistent":
            self.key_phi.load_state_dict(self._momentum_part(state, "features."))
            self.key_proj.load_state_dict(self._momentum_part(state, "proj."))
        else:  # MoCo's key encoder starts from the freshly downloaded global φ, h_ρ
            self.key_phi.load_state_dict(net.features.state_dict())
            self.key_proj.load_state_dict(net.proj.state_dict())
        # The client state's queue is drawn before the client's data is known (init_client): its
        # first round cuts it to the client's length, and the state keeps that length after.
        n = self.queue_length(data)
        return {"queue": state[QUEUE][:n].clone(), "ptr": int(state[QUEUE_PTR]) % n}

    @staticmethod
    def _momentum_part(state: State, module: str) -> dict[str, Tensor]:
        prefix = MOMENTUM_PREFIX + module
        return {k[len(prefix):]: v for k, v in state.items() if k.startswith(prefix)}

    def end_round(self, work: dict[str, Any]) -> State:
        out: State = {QUEUE: work["queue"],
                      QUEUE_PTR: torch.tensor(work["ptr"], dtype=torch.long, device=work["queue"].device)}
        if self.p.momentum_encoder == "persistent":
            for k, v in self.key_phi.state_dict().items():
                out[MOMENTUM_PREFIX + "features." + k] = v.detach().clone()
            for k, v in self.key_proj.state_dict().items():
                out[MOMENTUM_PREFIX + "proj." + k] = v.detach().clone()
        return out

    # The contrastive branch -----------------------------------------------------------------------
    def con_prompt_group(self) -> str | None:
        """The group of the prompts the contrastive branch feeds to τ (None: τ sees [f] only)."""
        return {"rho": "p_rho", "kappa": "p_kappa", "none": None}[self.p.con_prompts]

    def routes(self, phase: str, con: bool) -> tuple[frozenset[str], frozenset[str]]:
        """The contrastive prompts take p_ρ's role in :data:`CON_ROUTES` whatever ``con_prompts`` names."""
        ce, _ = super().routes(phase, con)
        if not con:
            return ce, frozenset()
        con_set = CON_ROUTES[phase]
        cp = self.con_prompt_group()
        if "p_rho" in con_set:
            con_set = (con_set - {"p_rho"}) | ({cp} if cp else set())
        return ce, frozenset(con_set)

    def losses(self, net: PFTNet, x: Tensor, y: Tensor, phase: str, con: bool, work: dict[str, Any],
               gen: torch.Generator, data: ClientData) -> dict[str, Tensor]:
        """L_CE (``"ce"``) and, in a contrastive phase, L_Con (``"con"``); the batch's keys go to
        ``work["keys"]``, for the queue after the step."""
        parts = super().losses(net, x, y, phase, con, work, gen, data)
        if con:
            parts["con"], work["keys"] = self.contrastive_loss(net, x, phase, work["queue"], gen, data)
        return parts

    def contrastive_loss(self, net: PFTNet, x: Tensor, phase: str, queue: Tensor, gen: torch.Generator,
                         data: ClientData) -> tuple[Tensor, Tensor]:
        """(L_Con, the positive keys) for one batch: the query through φ, τ and h_ρ on view x′, the
        key through φ̃, τ and h̃_ρ on view x″ under ``no_grad``."""
        p = self.p
        _, con_set = self.routes(phase, True)
        cp_name = self.con_prompt_group()
        cp = {"p_rho": net.prompts_rho, "p_kappa": net.prompts_kappa, None: None}[cp_name]
        x1 = augment(x, gen, data.mean, data.std, p.aug_crop_min, p.aug_jitter, p.aug_gray_p)
        x2 = augment(x, gen, data.mean, data.std, p.aug_crop_min, p.aug_jitter, p.aug_gray_p)
        # Batch statistics for the view, running statistics left to the clean CE forward (module
        # docstring); stage 1 of the two-stage baseline has no clean forward ("con_only").
        keep = p.view_bn_stats == "keep" and phase != "con_only"
        with running_stats_untouched(net.features) if keep else contextlib.nullcontext():
            f1 = net.features(x1) if "phi" in con_set else self._phi_no_grad(net, x1, "task")
        cq = cp if (cp is None or cp_name in con_set) else cp.detach()
        q = F.normalize(net.proj(net.transform(f1, cq)), dim=1)
        with torch.no_grad():
            self.key_phi.train()
            keys = F.normalize(self.key_proj(net.transform(self.key_phi(x2), cp)), dim=1)
        return info_nce(q, keys, queue, p.temperature), keys

    def after_step(self, net: PFTNet, con: bool, work: dict[str, Any]) -> None:
        """The key encoder's EMA, then the batch's keys into the queue."""
        if not con:
            return
        momentum_update(((self.key_phi, net.features), (self.key_proj, net.proj)), float(self.p.moco_momentum))
        work["ptr"] = enqueue(work["queue"], work["ptr"], work.pop("keys"))
