"""FedCAC (Wu et al., ICCV 2023): personalise the parameters that local training moves most,
and let only similar clients share them.

"Bold but Cautious: Unlocking the Potential of Personalized Federated Learning through Cautiously
Aggressive Collaboration". A FedPFT (ICLR) Table 2 baseline (also in its Table 1 probe).

One round, client i (paper §4, the official code in ``FLAIR-Community/Fling``,
``fedcac_client.py`` / ``fedcac_group.py``, which the paper's Eq. 5-6 comments point to):

1. **Download.** Non-critical parameters come from the global model (FedAvg of all uploads);
   critical ones (client i's mask from its last round) from its *customised global model*.
   Before its first round a client has no mask and takes the global model.
2. **Local training** of every parameter (``train.local_epochs`` of SGD).
3. **Sensitivity** of each parameter, Eq. 5: ``s = |(w_after - w_before) ⊙ w_after|`` (a first-order
   estimate of the loss change if the parameter were reset, with the accumulated update standing in
   for the gradient). Eq. 6: in **each parameter tensor** the top ``tau`` fraction by ``s`` is
   critical: ``nz = int(tau·numel)``, threshold = the nz-th largest ``s``, mask = ``s >= threshold``
   (ties at the threshold are all selected); when that threshold is ``<= 1e-10`` it is replaced by
   the smallest ``s > 1e-20`` (so every parameter that moved is critical). These two edge rules are
   the official code's; :func:`critical_masks` implements them verbatim.
4. **Upload** the trained model and the mask.
5. **Server.** Global model = sample-weighted mean of the uploads. Overlap of masks
   ``o_ij = 1 - |m_i - m_j|_1 / (2 |m_i|_1)``; threshold
   ``θ = mean(o) + (rnd+1)/beta · (max(o) - mean(o))`` over the off-diagonal pairs (it grows with
   the round, "cautious"); client i's collaborators are the j with ``o_ij >= θ``; its customised
   global model is the **unweighted** mean of the uploads of i and its collaborators. Once
   ``rnd+1 > beta`` nobody qualifies and critical parameters become fully local: the personalised
   phase.

Defaults [official configs ``argzoo/cifar10|cifar100/*_fedcac_resnet_config.py``]: ``tau = 0.5``,
``beta = 100`` for CIFAR-10 (CIFAR-100 uses ``tau = 0.4, beta = 170``; the PFLlib port defaults to
``tau = 0.5, beta = 170``). ``beta`` must be an integer >= 1 (the official code asserts it).

β is a number of rounds, set for long runs: FedPFT (ICLR) runs every method T = 1000 rounds (§4.1)
with each baseline's "optimal parameter combinations reported in their respective papers" (App.
D.3), so β = 100 is a tenth of its run. A run of 50 rounds would never leave the collaborative
phase. So by default β is that fraction of the run's ``train.rounds``: ``beta_fraction = 0.1``
(= 100 / 1000; ours, the ratio the paper's runs have), β = max(1, round(0.1 · rounds)): 100 at
1000 rounds, 5 at 50. ``beta`` (rounds) overrides it.

Choices the paper leaves open, each an option:

- ``buffers`` — what BatchNorm running statistics do. ``"local"`` (default) reproduces the official
  code: its download writes only ``named_parameters``, so each client keeps its own BN buffers
  (masks, overlaps and customised models are over parameters only, as in the code).
  ``"global"`` averages buffers with the global model like FedAvg does.
- Partial participation [unspecified; the paper uses full participation]: overlaps, the threshold
  and customised models are computed over the clients that took part in the round; a client that
  did not keeps its previous customised model.
- The global model is sample-weighted (this package's FedAvg); the official code takes an
  unweighted mean, identical under the paper's equal client sizes (500 samples each).

Hosting. The customised models are per-client server output, so ``shared`` holds, besides the
global parameters, entries ``"cac.<cid>.<key>"`` for every client that has trained; a client reads
only its own (a Flower strategy would send each client its own ``ArrayRecord``). The client's id is
kept in its state (``"cid"``) and echoed in its upload. Server memory is O(clients × model), as in
the official code, which keeps one customised model per client.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..fl.local import evaluate_model
from ..fl.method import ClientUpdate, EvalResult, State
from ..params import hp
from .base import ModelMethod
from .registry import register_method

BUFFER_MODES = ("local", "global")
MASK = "mask."
CUSTOM = "cac."
CID = "cid"


@dataclass
class FedCACParams:
    tau: float = hp(0.5, ge=0, le=1)  # fraction of each tensor that is critical (Eq. 6)
    # Rounds until collaboration on critical parameters stops; None: beta_fraction of train.rounds.
    beta: int | None = hp(None, ge=1)
    beta_fraction: float = hp(0.1, gt=0)  # the official β = 100 over FedPFT's T = 1000 rounds
    buffers: str = hp("local", choices=BUFFER_MODES)  # BN running statistics: "local" (official code) | "global"


def beta_rounds(params: FedCACParams, rounds: int) -> int:
    """β in rounds: ``beta`` where set, else ``beta_fraction`` of the run's ``rounds`` (at least 1)."""
    if params.beta is not None:
        return int(params.beta)
    return max(1, round(params.beta_fraction * rounds))


def sensitivity(before: torch.Tensor, after: torch.Tensor) -> torch.Tensor:
    """FedCAC Eq. 5: ``|(w_after - w_before) ⊙ w_after|``."""
    return ((after - before) * after).abs()


def critical_mask(before: torch.Tensor, after: torch.Tensor, tau: float) -> torch.Tensor:
    """FedCAC Eq. 6 for one tensor: the top-``tau`` fraction by sensitivity, as a bool mask."""
    c = sensitivity(before.float(), after.float())
    metric = c.reshape(-1)
    nz = int(tau * metric.numel())
    thresh = torch.topk(metric, nz).values[-1] if nz > 0 else torch.tensor(float("inf"), device=c.device)
    if thresh <= 1e-10:
        # Official rule: a zero threshold would select unmoved parameters; take the smallest
        # non-zero sensitivity instead (if nothing moved the mask keeps the ``>= thresh`` result).
        moved = metric[metric > 1e-20]
        if moved.numel():
            thresh = moved.min()
    return c >= thresh


def critical_masks(before: dict[str, torch.Tensor], after: dict[str, torch.Tensor], tau: float,
                   keys: list[str]) -> dict[str, torch.Tensor]:
    """Per-tensor critical masks for ``keys`` (parameter names), each the tensor's shape."""
    return {k: critical_mask(before[k], after[k], tau) for k in keys}


def overlap(mi: torch.Tensor, mj: torch.Tensor) -> float:
    """Official overlap rate ``1 - |m_i - m_j|_1 / (2 |m_i|_1)`` of two flat 0/1 masks (not symmetric
    when the masks differ in size)."""
    denom = 2.0 * float(mi.sum())
    if denom == 0.0:
        return 0.0  # an empty mask shares nothing (the official code would divide by zero)
    return 1.0 - float((mi - mj).abs().sum()) / denom


def collaborators(masks: list[torch.Tensor], rnd: int, beta: int) -> list[list[int]]:
    """For each position i, the positions j != i whose overlap clears the round's threshold θ."""
    n = len(masks)
    if n < 2:
        return [[] for _ in range(n)]
    o = [[overlap(masks[i], masks[j]) if i != j else None for j in range(n)] for i in range(n)]
    off = [v for row in o for v in row if v is not None]
    avg, mx = sum(off) / len(off), max(off)
    theta = avg + (rnd + 1) / beta * (mx - avg)
    return [[j for j in range(n) if j != i and o[i][j] >= theta] for i in range(n)]


@register_method("fedcac")
class FedCAC(ModelMethod):
    """FedCAC: per-parameter critical masks (top-τ of ``|Δw ⊙ w|`` per tensor) personalised via
    cautiously growing collaboration; the rest is FedAvg."""

    Params = FedCACParams

    def __init__(self, ctx, params):
        super().__init__(ctx, params)
        self.param_keys = [k for k, _ in self.model.named_parameters()]
        self.beta = beta_rounds(params, ctx.cfg.train.rounds)

    def personal_keys(self, model) -> set[str]:
        params = {k for k, _ in model.named_parameters()}
        return set(model.state_dict()) - params if self.p.buffers == "local" else set()

    def init_client(self, cid: int, seed: int) -> State:
        return {**super().init_client(cid, seed), CID: torch.tensor(int(cid))}

    # The client's model ---------------------------------------------------------------------
    def assemble(self, shared: State, state: State) -> dict[str, torch.Tensor]:
        """Step 1: critical parameters from the customised model, the rest from the global one."""
        cid = int(state[CID])
        sd = {k: shared[k] for k in self.shared_keys}
        sd.update({k: state[k] for k in self.personal})
        for k in self.param_keys:
            mask, custom = state.get(MASK + k), shared.get(f"{CUSTOM}{cid}.{k}")
            if mask is not None and custom is not None:
                sd[k] = torch.where(mask, custom, sd[k])
        return sd

    def load(self, shared: State, state: State):
        self.model.load_state_dict(self.assemble(shared, state), strict=True)
        for p in self.model.parameters():
            p.requires_grad_(True)
        return self.model

    # The steps ---------------------------------------------------------------------------------
    def client_update(self, shared: State, state: State, data, gen: torch.Generator, rnd: int) -> ClientUpdate:
        model = self.load(shared, state)
        before = {k: v.detach().clone() for k, v in model.named_parameters()}
        stats = self.local_train(model, data, gen, shared, rnd)
        sd = {k: v.detach().clone() for k, v in model.state_dict().items()}
        masks = critical_masks(before, sd, self.p.tau, self.param_keys)
        upload = {k: sd[k] for k in self.shared_keys}
        upload.update({MASK + k: m for k, m in masks.items()})
        upload[CID] = state[CID]
        new_state = {**state, **{k: sd[k] for k in self.personal}, **{MASK + k: m for k, m in masks.items()}}
        crit = sum(int(m.sum()) for m in masks.values()) / max(sum(m.numel() for m in masks.values()), 1)
        return ClientUpdate(upload=upload, state=new_state, num_samples=data.num_train,
                            metrics={**stats.metrics(), "critical_fraction": crit})

    def aggregate(self, shared: State, updates: list[ClientUpdate], server_state: State,
                  rnd: int) -> tuple[State, State]:
        if not updates:
            return shared, server_state
        new = dict(shared)  # keeps the customised models of clients absent this round
        new.update(self.average_shared(updates))
        flat = [torch.cat([u.upload[MASK + k].reshape(-1).float() for k in self.param_keys]) for u in updates]
        for i, partners in enumerate(collaborators(flat, rnd, self.beta)):
            group = [updates[i]] + [updates[j] for j in partners]
            cid = int(updates[i].upload[CID])
            for k in self.param_keys:
                # Unweighted mean over the collaboration group, as in the official code.
                acc = torch.stack([u.upload[k].to(torch.float64) for u in group]).mean(0)
                new[f"{CUSTOM}{cid}.{k}"] = acc.to(updates[i].upload[k].dtype)
        return new, server_state

    def evaluate(self, shared: State, state: State, data, gen: torch.Generator) -> EvalResult:
        return evaluate_model(self.load(shared, state), data)

    def personalized_model(self, shared: State, state: State):
        """The client's assembled model (critical entries customised, the rest global);
        ``features`` and ``head`` are the backbone's own."""
        return self.load(shared, state)
