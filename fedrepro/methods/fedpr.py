"""FedPR: deep visual prompts learned in the null space of the global prompt, a PEP-FedPT (arXiv) baseline.

Paper: Chun-Mei Feng, Bangjun Li, Xinxing Xu, Yong Liu, Huazhu Fu, Wangmeng Zuo, "Learning Federated
Visual Prompt in Null Space for MRI Reconstruction", CVPR 2023. There a frozen pretrained
reconstruction network is adapted by deep visual prompts only; here, as in PEP-FedPT (arXiv) §5.1,
the same frozen ViT and linear classification head as every other prompt baseline.

One round:

1. The server broadcasts the global prompts P_g (one [n, d] matrix per prompted block: the inserted
   tokens at block 0 and the renewed ones of VPT-deep, Jia et al. 2022 Eq. 2) and the head.
2. From P_g the client forms, per block l, the uncentred Gram matrix G_l = P_l^T P_l (d × d) and its
   eigendecomposition G_l = U Λ U^T. The directions with the largest eigenvalues span what the global
   prompt encodes; the rest are its approximate null space N_l, with projector Π_l = N_l N_l^T.
3. E epochs of cross-entropy with SGD; before every step each prompt gradient is right-multiplied by
   Π_l (every token's update is projected in embedding space), so each local prompt step, and with
   it the uploaded prompt, moves only inside the null space of the global prompt and leaves its
   principal directions where the aggregate put them (FedPR's remedy for forgetting under
   heterogeneity). The head is trained unprojected, as in every PEP-FedPT baseline.
4. The server FedAvg-s the prompts and the head (PEP-FedPT Eq. 3); only they travel. Π is a
   function of the broadcast P_g, so computing it on the client costs no communication.

With ``projection = "none"`` (or in the first ``free_rounds`` rounds) this is exactly FedVPT-D.

Where the paper (or PEP-FedPT's use of it) is silent, each choice an option of :class:`FedPRParams`:

- The threshold. ``null_rule = "fraction"`` keeps the ⌊(1 − f)·d⌋ largest-eigenvalue directions
  and calls the other directions null (FedPR's public code does this with f = 0.8). When the prompt's rank n
  is below that count, the kept set is completed by zero-eigenvalue directions in the eigensolver's
  order, so part of what is removed is not related to P_g. ``"energy"`` keeps the fewest leading
  directions holding a fraction e of trace(G), which never keeps more than the prompt's rank.
- ``null_scope``: one Gram per prompted block (FedPR's code works layer by layer) or one Gram of
  all blocks' tokens stacked.
- ``free_rounds``: FedPR's code has no projector before the first aggregation, so round 0 trains
  freely (its "global prompt" is the random initialisation, which encodes nothing yet).
- ``projector_scale``: FedPR's code divides Π by its Frobenius norm, which only shrinks the
  step by 1/sqrt(dim N). Beside PEP-FedPT's common SGD at lr 0.1 that acts as a learning-rate change, so
  the plain orthogonal projector is the default.
- What is projected: the gradient (after clipping, PEP-FedPT App. A.3.2). Every SGD step is then a
  combination of projected vectors, since momentum restarts each round (FedPR's code projects its Adam
  step instead, so both readings put each step in N). Any weight decay is added to the gradient before it is
  projected, so it cannot move the prompt out of N either.
- Token layout: ``n_prompts`` tokens at every block, FedVPT-D's layout (PEP-FedPT §5.2.2 counts
  about as many parameters per round for FedPR as for FedVPT-D: the head and about ten tokens on
  ViT-B/16), so the two baselines differ only in the projection.
- Every client projects onto the null space of the prompt it has just received (FedPR's code keeps
  the projector of the last round a client took part in, which is the same under its full participation).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from ..fl.local import train_epochs
from ..fl.method import ClientUpdate
from ..params import hp
from .fedvpt_d import FedVPTD, FedVPTDParams
from .registry import register_method

PROMPTS = ("shallow", "deep")
# Leading eigenvalues whose running sum is within this relative distance of e·trace count as
# reaching it; without the slack, e = 1 could fall short by rounding and keep every direction.
ENERGY_SLACK = 1e-9


@dataclass
class FedPRParams(FedVPTDParams):
    """FedPR (Feng et al., CVPR 2023) on PEP-FedPT's frozen ViT: FedVPT-D's prompt layout
    (``n_prompts`` tokens per block, ~10-12 tokens on ViT-B/16; ``blocks``) and the projection."""

    projection: str = hp("null", choices=("null", "none"))  # "none": FedVPT-D, the ablation
    null_rule: str = hp("fraction", choices=("fraction", "energy"))
    # f: the share of the d directions (smallest eigenvalues) that count as null; 0.8 in FedPR's code.
    null_fraction: float = hp(0.8, ge=0, le=1)
    # e for the "energy" rule: the leading directions up to this share of trace(G) are kept.
    kept_energy: float = hp(0.99, gt=0, le=1)
    null_scope: str = hp("layer", choices=("layer", "all"))  # FedPR's code: per prompted layer
    free_rounds: int = hp(1, ge=0)  # FedPR's code projects from the first aggregate on
    projector_scale: str = hp("none", choices=("none", "frobenius"))  # "frobenius": Π/‖Π‖_F, FedPR's code


def kept_count(evals_desc: Tensor, rule: str, fraction: float, energy: float) -> int:
    """How many leading eigen-directions of a Gram matrix (eigenvalues in descending order) are kept."""
    d = evals_desc.numel()
    if rule == "fraction":
        return min(d, int((1.0 - fraction) * d + 1e-9))
    lam = evals_desc.clamp_min(0)
    total = float(lam.sum())
    if total <= 0:
        return 0  # a zero prompt encodes nothing: all of R^d is null
    return min(d, int((lam.cumsum(0) < (energy - ENERGY_SLACK) * total).sum()) + 1)


def null_projector(rows: Tensor, rule: str = "fraction", fraction: float = 0.8, energy: float = 0.99,
                   scale: str = "none") -> tuple[Tensor, int]:
    """Π = N N^T for the approximate null space N of the Gram matrix G = rows^T rows of a prompt
    ``rows`` [m, d], and the number of kept (protected) directions. G is formed and decomposed in
    float64 (a float32 G would blur a low-rank prompt's zero eigenvalues); Π has ``rows``' dtype."""
    q = rows.double()
    evals, evecs = torch.linalg.eigh(q.T @ q)  # ascending
    evals, evecs = evals.flip(0), evecs.flip(1)
    k = kept_count(evals, rule, fraction, energy)
    null = evecs[:, k:]
    proj = null @ null.T
    if scale == "frobenius" and null.shape[1]:
        proj = proj / math.sqrt(null.shape[1])  # ‖N N^T‖_F = sqrt(dim N)
    return proj.to(rows.dtype), k


def prompt_layers(shallow: Tensor, deep: Tensor) -> list[Tensor]:
    """The global prompt as one [n, d] matrix per prompted block: block 0's, then each deep block's."""
    return [shallow] + list(deep.unbind(0))


@register_method("fedpr")
class FedPR(FedVPTD):
    """FedPR: deep prompts whose local updates stay in the global prompt's null space, and a head,
    FedAvg-ed on a frozen ViT (PEP-FedPT (arXiv) baseline)."""

    Params = FedPRParams
    p: FedPRParams

    def __init__(self, ctx, params):
        super().__init__(ctx, params)
        self._cache: tuple[Tensor, Tensor, dict[str, Tensor], float] | None = None

    def projecting(self, rnd: int) -> bool:
        return self.p.projection == "null" and rnd >= self.p.free_rounds

    def projectors(self, shallow: Tensor, deep: Tensor) -> tuple[dict[str, Tensor], float]:
        """Π for each prompt tensor (``shallow``: [d, d]; ``deep``: [L, d, d], or one [d, d] for
        ``null_scope = "all"``) from the global prompt, and the mean count of kept directions."""
        p = self.p
        if self._cache is not None and torch.equal(self._cache[0], shallow) and torch.equal(self._cache[1], deep):
            return self._cache[2], self._cache[3]  # every client of a round receives the same P_g
        layers = prompt_layers(shallow.detach(), deep.detach())
        if p.null_scope == "all":
            rows = torch.cat(layers, 0)
            proj, k = null_projector(rows, p.null_rule, p.null_fraction, p.kept_energy, p.projector_scale)
            out, kept = {"shallow": proj, "deep": proj}, float(k)
        else:
            made = [null_projector(q, p.null_rule, p.null_fraction, p.kept_energy, p.projector_scale)
                    for q in layers]
            d = shallow.shape[-1]
            deep_proj = (torch.stack([m[0] for m in made[1:]]) if len(made) > 1
                         else shallow.new_zeros(0, d, d))
            out, kept = {"shallow": made[0][0], "deep": deep_proj}, sum(m[1] for m in made) / len(made)
        self._cache = (shallow.detach().clone(), deep.detach().clone(), out, kept)
        return out, kept

    def client_update(self, shared, state, data, gen, rnd) -> ClientUpdate:
        if not self.projecting(rnd):
            return super().client_update(shared, state, data, gen, rnd)
        net = self.load(shared, state, data)
        proj, kept = self.projectors(shared["shallow"], shared["deep"])
        prompts = [net.get_parameter(k) for k in PROMPTS]
        head = [net.get_parameter(k) for k in self.keys if k not in PROMPTS]
        t = self.ctx.cfg.train
        wd = t.weight_decay
        for q in prompts + head:
            q.requires_grad_(True)
        # The prompts' weight decay goes into the gradient that is projected (see the hook).
        decay = self.p.lr_decay ** rnd
        prompt_lr = t.lr if t.prompt_lr is None else t.prompt_lr
        opt = torch.optim.SGD([{"params": [q for q in prompts if q.numel()], "weight_decay": 0.0,
                                "lr": prompt_lr * decay},
                               {"params": head, "weight_decay": wd}],
                              lr=t.lr * decay, momentum=t.momentum)
        clip = self.clipper(prompts + head)

        def hook() -> None:
            if clip is not None:
                clip()
            with torch.no_grad():
                for name, q in zip(PROMPTS, prompts):
                    if q.grad is None or not q.numel():
                        continue
                    g = q.grad + wd * q if wd else q.grad
                    q.grad.copy_(torch.matmul(g, proj[name]))

        stats = train_epochs(net, data, opt, t.local_epochs, t.batch_size, gen, grad_hook=hook)
        return ClientUpdate(upload={k: net.get_parameter(k).detach().clone() for k in self.SHARED}, state={},
                            num_samples=data.num_train, metrics={**stats.metrics(), "null_kept_dims": kept})
