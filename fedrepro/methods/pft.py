"""What FedPFT's registered methods share: the alternating local round and its gradient routing.

FedPFT (ICLR) §3.5 / arXiv §3.6 split each client's local round into two phases, each training
some modules and freezing the others:

- the *feature* phase (ICLR "feature transformation", arXiv "feature learning"), R_f epochs: the
  personal part (the prompts p_κ; FedAvg+Linear's layer) and τ fit the frozen global φ and h_κ;
- the *task* phase (ICLR "model training", arXiv "task adaptation"), R_a epochs: φ, τ, h_κ train
  with the personal part frozen.

:data:`CE_ROUTES` and :data:`CON_ROUTES` say which parameter groups each loss trains in each phase
(ICLR Eqs. 4-5 and 8-9, arXiv Eqs. 5-6). :class:`PFTMethod` runs the round for the four
registered methods: ``fedpft`` (:mod:`.fedpft`), ``fedpft_con`` (:mod:`.fedpft_con`),
``fedpft_two_stage`` (:mod:`.fedpft_two_stage`) and ``fedavg_linear`` (:mod:`.fedavg_linear`).

Shared choices (the papers are silent on them; ours unless said otherwise):

- ``r_f``/``r_a`` are explicit epoch counts and ``train.local_epochs`` is ignored; the papers fix
  R_f + R_a = R = 5 with R_f > R_a (ICLR §3.5). ``epoch_split="alpha_rule"`` uses (3, 2) when the
  partition's Dirichlet α ≤ 0.1 and (r_f, r_a) otherwise (ICLR App. D.3, arXiv App. B.3).
- ``alternate=False`` trains everything jointly for r_f + r_a epochs: ICLR Table 4's Setting II,
  "FedPFT w/o Alter." in its Fig. 4.
- φ's BatchNorm during the feature phase's no-grad forward: ``phi_bn_mode_phase1="eval"`` (running
  statistics untouched, as φ is frozen) or ``"train"`` (batch statistics, running stats updated).
- SGD with ``train.momentum``/``train.weight_decay``, re-created at every phase of every round (as
  in the first author's FedDecomp code; no FedPFT code is public), one learning rate per group.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..errors import ConfigError
from ..fl.client_data import ClientData
from ..fl.local import TrainStats, evaluate_model, set_trainable, train_epochs
from ..fl.method import ClientUpdate, EvalResult, State
from ..fl.seeding import derive_seed
from ..models.base import SplitModel
from ..models.ftm import PROMPTS_KAPPA, PROMPTS_RHO, PersonalizedPFT, PFTNet
from ..params import hp
from .base import ModelMethod

BN_MODES = ("eval", "train")
EPOCH_SPLITS = ("fixed", "alpha_rule")

# Gradient routing. Parameter groups: "phi", "tau", "h_kappa", "h_rho", "p_kappa" (the classification
# prompts, or FedAvg+Linear's personal m×m layer), "p_rho" (the prompts the contrastive branch uses).
CE_ROUTES: dict[str, frozenset[str]] = {
    "feature": frozenset({"p_kappa", "tau"}),          # ICLR Eq. 4 / Eq. 8: φ, h_κ frozen
    "task": frozenset({"phi", "tau", "h_kappa"}),      # ICLR Eq. 5 / Eq. 9: p_κ frozen
    "joint": frozenset({"phi", "tau", "h_kappa", "p_kappa"}),  # no alternation (Table 4, Setting II)
    "con_only": frozenset(),                            # two-stage baseline, stage 1 (ICLR App. G)
}
CON_ROUTES: dict[str, frozenset[str]] = {
    "feature": frozenset({"phi", "tau", "h_rho"}),     # ICLR Eq. 8: p_ρ frozen
    "task": frozenset({"p_rho", "tau"}),               # ICLR Eq. 9: φ, h_ρ frozen
    "joint": frozenset({"phi", "tau", "h_rho", "p_rho"}),
    "con_only": frozenset({"phi", "tau", "h_rho", "p_rho"}),
}


@dataclass
class ScheduleParams:
    """The alternating schedule's parameters, shared by every FedPFT method's ``Params``."""

    r_f: int = hp(4, ge=0)  # ICLR App. D.3: (R_f, R_a) = (4, 1)
    r_a: int = hp(1, ge=0)
    epoch_split: str = hp("fixed", choices=EPOCH_SPLITS)
    phi_bn_mode_phase1: str = hp("eval", choices=BN_MODES)
    alternate: bool = hp(True)

    def validate(self) -> None:
        if self.r_f + self.r_a < 1:
            raise ConfigError(f"invalid method.args.r_f + method.args.r_a = {self.r_f} + {self.r_a}; "
                              "valid: at least 1 local epoch per round")


class _RoundLoss:
    """Sample-weighted sums of the loss and of its terms over a whole round, one running sum each
    across all phases (how the round's metrics are defined; per-phase means would not add up to
    them bit for bit)."""

    def __init__(self) -> None:
        self.total = 0.0
        self.parts: dict[str, float] = {}
        self.n = 0.0

    def add(self, loss: Tensor, parts: dict[str, Tensor], y: Tensor) -> None:
        n = float(y.numel())
        self.total += float(loss.detach()) * n
        for name, value in parts.items():
            self.parts[name] = self.parts.get(name, 0.0) + float(value.detach()) * n
        self.n += n

    def stats(self) -> TrainStats:
        """``train_loss`` and ``loss_<term>`` for each term seen (``loss_ce``, ``loss_con``)."""
        n = max(self.n, 1.0)
        return TrainStats(self.total / n, {f"loss_{k}": v / n for k, v in self.parts.items()}, int(self.n))


class PFTMethod(ModelMethod):
    """φ, a feature transform and h_κ, trained by the alternating local round.

    A subclass says what the transform is (:meth:`make_extras`: FedPFT's FTM and prompts, or
    FedAvg+Linear's layer), which modules stay on the client besides the prompts
    (:meth:`personal_modules`), each group's learning rate (:meth:`group_lrs`) and what else a
    client starts with (:meth:`client_extras`). FedPFT+Con adds its contrastive loss through
    :meth:`routes`, :meth:`losses`, :meth:`after_step` and :meth:`begin_round`/:meth:`end_round`.
    Per-client tensors (prompts, personal layers) live in the client state only; ``self.model`` is
    scratch space, like every :class:`ModelMethod`'s.
    """

    Params = ScheduleParams
    p: ScheduleParams
    # Whether the round's phases run a contrastive branch (FedPFT+Con's L_Con).
    contrastive: bool = False

    def __init__(self, ctx, params):
        super().__init__(ctx, params)
        # ModelMethod's scratch model is the bare backbone; ours wraps the same φ and h_κ.
        self.model: PFTNet = self.wrap(self.model, seed=0)
        keys = list(self.model.state_dict().keys())
        personal = self.personal_keys(self.model)
        self.personal = [k for k in keys if k in personal]
        self.shared_keys = [k for k in keys if k not in personal]

    # What a subclass sets -----------------------------------------------------------------------
    def make_extras(self, m: int) -> dict[str, Any]:
        """Keyword arguments for :class:`PFTNet` beyond φ and h_κ (m: the feature dimension)."""
        raise NotImplementedError

    def personal_modules(self) -> tuple[str, ...]:
        """Modules of :class:`PFTNet` that stay on the client besides the prompts."""
        return ()

    def group_lrs(self) -> dict[str, float]:
        """The learning rate of each parameter group: ``train.lr`` unless a subclass says otherwise."""
        lr = self.ctx.cfg.train.lr
        return {"phi": lr, "tau": lr, "h_kappa": lr, "h_rho": lr, "p_kappa": lr, "p_rho": lr}

    def client_extras(self, gen: torch.Generator, seed: int) -> State:
        """A client's initial tensors beyond its personal modules (FedPFT: its prompts), drawn
        from ``gen``, the client's own stream."""
        return {}

    # The network ----------------------------------------------------------------------------------
    def wrap(self, base: SplitModel, seed: int) -> PFTNet:
        """The network around ``base``'s φ and h_κ; τ, h_ρ or the linear layer get their own stream."""
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(derive_seed(seed, "init", 1))
            net = PFTNet(base, **self.make_extras(base.feature_dim))
        return net.to(self.ctx.device)

    def build(self, seed: int) -> PFTNet:
        return self.wrap(self.ctx.create_model(seed), seed)

    def _initial(self, seed: int) -> dict[str, Tensor]:
        return self.build(seed).state_dict()

    def personal_keys(self, model: nn.Module) -> set[str]:
        prefixes = tuple(name + "." for name in self.personal_modules())
        return {k for k in model.state_dict() if k in (PROMPTS_KAPPA, PROMPTS_RHO) or k.startswith(prefixes)}

    # The schedule ---------------------------------------------------------------------------------
    def epoch_split(self) -> tuple[int, int]:
        """(R_f, R_a); ``alpha_rule`` gives (3, 2) when the partition's α ≤ 0.1."""
        if self.p.epoch_split == "alpha_rule":
            alpha = (self.ctx.cfg.data.partition_args or {}).get("alpha")
            if isinstance(alpha, (int, float)) and alpha <= 0.1 + 1e-12:
                return 3, 2
        return self.p.r_f, self.p.r_a

    def plan(self, rnd: int) -> list[tuple[str, int, bool]]:
        """[(phase, epochs, with_contrastive)] for round ``rnd``."""
        r_f, r_a = self.epoch_split()
        con = self.contrastive
        if not self.p.alternate:
            return [("joint", r_f + r_a, con)]
        return [("feature", r_f, con), ("task", r_a, con)]

    # The steps ------------------------------------------------------------------------------------
    def init_client(self, cid: int, seed: int) -> State:
        # A personal head or linear layer starts from the server's initial model, like FedPer's head
        # (building it is skipped when only prompts are personal).
        modules = [k for k in self.personal if k not in (PROMPTS_KAPPA, PROMPTS_RHO)]
        initial = self._initial(seed) if modules else {}
        state: State = {k: initial[k].clone() for k in modules}
        gen = torch.Generator().manual_seed(derive_seed(seed, "init", 2, cid))
        state.update(self.client_extras(gen, seed))
        return state

    def client_update(self, shared: State, state: State, data: ClientData, gen: torch.Generator,
                      rnd: int) -> ClientUpdate:
        net = self.load(shared, state)
        net.zero_grad(set_to_none=True)
        work = self.begin_round(net, state, data)
        log = _RoundLoss()
        for phase, epochs, con in self.plan(rnd):
            if epochs > 0:
                self.train_phase(net, data, gen, phase, epochs, con, work, log)
        set_trainable(net, True)
        sd = net.state_dict()
        upload = {k: sd[k].detach().clone() for k in self.shared_keys}
        new_state = {**state, **{k: sd[k].detach().clone() for k in self.personal}, **self.end_round(work)}
        return ClientUpdate(upload=upload, state=new_state, num_samples=data.num_train,
                            metrics=log.stats().metrics())

    def evaluate(self, shared: State, state: State, data: ClientData, gen: torch.Generator) -> EvalResult:
        # The global φ, τ, h_κ with the client's own prompts (ICLR Alg. 1's output), never fine-tuned.
        return evaluate_model(self.load(shared, state), data)

    def personalized_model(self, shared: State, state: State) -> PersonalizedPFT:
        return PersonalizedPFT(copy.deepcopy(self.load(shared, state)))

    # A round's scratch state (FedPFT+Con: the queue and key encoder) -------------------------------
    def begin_round(self, net: PFTNet, state: State, data: ClientData) -> dict[str, Any]:
        return {}

    def end_round(self, work: dict[str, Any]) -> State:
        """What the round adds to the client state beyond the personal modules."""
        return {}

    # Parameter groups and one phase ---------------------------------------------------------------
    def param_groups(self, net: PFTNet) -> dict[str, list[nn.Parameter]]:
        """Trainable tensors by routing group (see :data:`CE_ROUTES`)."""
        return {
            "phi": list(net.features.parameters()),
            "tau": list(net.ftm.parameters()) if net.ftm is not None else [],
            "h_kappa": list(net.head.parameters()),
            "h_rho": list(net.proj.parameters()) if net.proj is not None else [],
            "p_kappa": ([net.prompts_kappa] if net.prompts_kappa is not None else [])
            + (list(net.linear.parameters()) if net.linear is not None else []),
            "p_rho": [net.prompts_rho] if net.prompts_rho is not None else [],
        }

    def routes(self, phase: str, con: bool) -> tuple[frozenset[str], frozenset[str]]:
        """(groups L_CE trains, groups the contrastive loss trains) in ``phase``."""
        return CE_ROUTES[phase], frozenset()

    def configure(self, net: PFTNet, phase: str, con: bool) -> torch.optim.Optimizer | None:
        """Set ``requires_grad`` for ``phase`` and return a fresh SGD over what trains (None: nothing)."""
        ce, con_set = self.routes(phase, con)
        trained = ce | con_set
        groups = self.param_groups(net)
        set_trainable(net, False)
        lrs = self.group_lrs()
        opt_groups = []
        for name, params in groups.items():
            if name in trained and params:
                for p in params:
                    p.requires_grad_(True)
                opt_groups.append({"params": params, "lr": lrs[name]})
        if not opt_groups:
            return None
        t = self.ctx.cfg.train
        return torch.optim.SGD(opt_groups, lr=t.lr, momentum=t.momentum, weight_decay=t.weight_decay)

    def _phi_no_grad(self, net: PFTNet, x: Tensor, phase: str) -> Tensor:
        """φ(x) without a graph; in the feature phase its BN mode follows ``phi_bn_mode_phase1``."""
        was = net.features.training
        if phase == "feature":
            net.features.train(self.p.phi_bn_mode_phase1 == "train")
        with torch.no_grad():
            f = net.features(x)
        net.features.train(was)
        return f

    def losses(self, net: PFTNet, x: Tensor, y: Tensor, phase: str, con: bool, work: dict[str, Any],
               gen: torch.Generator, data: ClientData) -> dict[str, Tensor]:
        """The batch's loss terms by name (``"ce"``: L_CE), routed as :meth:`routes` says.

        A frozen module is kept out of the graph (φ under ``no_grad``: no backward pass through it,
        ICLR App. M) or has ``requires_grad`` off (h_κ: gradients still flow *through* it to τ and
        the prompts); prompts that a loss must not train are detached in that loss only.
        """
        if phase == "con_only":
            return {}
        ce_set, _ = self.routes(phase, con)
        f = net.features(x) if "phi" in ce_set else self._phi_no_grad(net, x, phase)
        p = net.prompts_kappa
        if p is not None and "p_kappa" not in ce_set:
            p = p.detach()
        return {"ce": F.cross_entropy(net.head(net.transform(f, p)), y)}

    def after_step(self, net: PFTNet, con: bool, work: dict[str, Any]) -> None:
        """Runs after every optimiser step (FedPFT+Con: the key encoder's EMA and the enqueue)."""

    def train_phase(self, net: PFTNet, data: ClientData, gen: torch.Generator, phase: str, epochs: int,
                    con: bool, work: dict[str, Any], log: _RoundLoss) -> None:
        """``epochs`` epochs of ``phase``: per batch, one SGD step on the sum of :meth:`losses`, then
        :meth:`after_step`."""
        opt = self.configure(net, phase, con)
        if opt is None:
            return

        def step(x: Tensor, y: Tensor):
            parts = self.losses(net, x, y, phase, con, work, gen, data)
            loss = sum(parts.values())
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            self.after_step(net, con, work)
            log.add(loss, parts, y)
            return loss, parts

        train_epochs(net, data, None, epochs, self.ctx.cfg.train.batch_size, gen, step=step)
