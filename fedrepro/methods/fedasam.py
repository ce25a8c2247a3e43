"""FedASAM (Caldarola, Caputo & Ciccone, ECCV 2022): "Improving Generalization in Federated Learning
by Seeking Flat Minima".

FedAvg whose clients train with Adaptive Sharpness-Aware Minimization (ASAM, Kwon et al., ICML 2021)
instead of SGD, so each local model, and with it the average, settles in a flatter region of the
loss. One local step on a batch (x, y), with w the current local weights:

- g = ∇L(w) (CE on the batch);
- ASAM's element-wise operator T_w = ``|w|`` + η; the perturbation ε = ρ·T_w²·g / ‖T_w·g‖₂ (the norm
  taken over all parameters together); ``adaptive=False`` gives plain SAM (FedSAM),
  ε = ρ·g / ‖g‖₂;
- the sharpness-aware gradient g_SAM = ∇L(w + ε), on the same batch;
- restore w, then one step of the base optimiser (SGD with the run's lr, momentum and weight
  decay) with g_SAM; weight decay therefore acts at w, not at w + ε.

The server is FedAvg's (sample-weighted average of the uploaded models); nothing but the model
leaves the client and there is no client state.

Named options and choices the paper leaves open:

- ``rho`` (ρ): ``None`` (default) means 0.7 for ASAM and 0.1 for SAM, the values of the official
  FedSAM repository's CIFAR-10 scripts (``paper_experiments/cifar10.sh``: ``asam -rho 0.7 -eta
  0.2`` and ``sam -rho 0.1``; its CIFAR-100 script uses ASAM ρ = 0.7, η = 0.2 too). ASAM's ρ is
  measured in the T_w-normalised space, so it is naturally larger than SAM's: the
  usual ρ = 0.05–0.1 fits SAM's scale. Set ``rho`` to override.
- ``eta`` (η) = 0.2: the official scripts. Ignored by SAM.
- ``adaptive``: ``True`` (default) = ASAM (FedASAM); ``False`` = SAM (FedSAM).
- ``scale``: which parameters get T_w = ``|w|`` + η. ``"weights"`` (default) scales the parameters
  named ``*weight`` (convolution, linear and normalisation weights) and uses T = 1 for biases, as
  the official ASAM and FedSAM code do; ``"all"`` applies ``|w|`` + η to every parameter, the
  operator as the ASAM paper writes it.
- Both forward passes run in train mode, so BatchNorm running statistics are updated twice per
  step (as in the official code). A parameter without a gradient is neither perturbed nor counted
  in the norm.
- Server-side SWA (the paper's "FedASAM + SWA") is not implemented: the pFedCSPC tables list
  FedASAM alone.

Evaluation: a global-FL method (``ModelMethod``): ``global_model`` is the averaged model; a
client's score is that model on its test split, after ``train.eval_finetune_epochs`` of CE
fine-tuning when set (plain SGD, not ASAM).

A pFedCSPC (TNNLS) Table II baseline.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

import torch
import torch.nn.functional as F
from torch import Tensor

from ..fl.local import TrainStats, make_sgd, train_epochs
from ..params import hp
from .base import ModelMethod
from .registry import register_method

SCALES = ("weights", "all")
DEFAULT_RHO = {True: 0.7, False: 0.1}  # official FedSAM scripts: ASAM ρ = 0.7 (η = 0.2), SAM ρ = 0.1


@dataclass
class FedASAMParams:
    rho: float | None = hp(None, ge=0)  # None: 0.7 (ASAM) / 0.1 (SAM), official FedSAM CIFAR scripts
    eta: float = hp(0.2, ge=0)  # official FedSAM scripts
    adaptive: bool = hp(True)  # True: ASAM (FedASAM); False: SAM (FedSAM)
    scale: str = hp("weights", choices=SCALES)  # official ASAM/FedSAM code: only "*weight" parameters get |w| + η

    @property
    def radius(self) -> float:
        return float(DEFAULT_RHO[self.adaptive] if self.rho is None else self.rho)


def sam_perturbation(named_params: Iterable[tuple[str, torch.nn.Parameter]], rho: float, eta: float,
                     adaptive: bool, scale: str = "weights") -> list[tuple[torch.nn.Parameter, Tensor]]:
    """(parameter, ε) pairs for every parameter with a gradient, from the gradients now in ``.grad``.

    ASAM: ε = ρ·T²g/‖Tg‖ with T = ``|w|`` + η (for ``scale="weights"`` only on ``*weight`` parameters,
    T = 1 elsewhere); SAM: ε = ρ·g/‖g‖. The norm runs over all the parameters together.
    """
    pairs: list[tuple[torch.nn.Parameter, Tensor | None]] = []
    with torch.no_grad():
        for name, p in named_params:
            if p.grad is None:
                continue
            t = None
            if adaptive and (scale == "all" or name.rsplit(".", 1)[-1] == "weight"):
                t = p.detach().abs() + eta
            pairs.append((p, t))
        if not pairs:
            return []
        tg = [p.grad if t is None else t * p.grad for p, t in pairs]
        norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(v) for v in tg])) + 1e-12
        return [(p, (v if t is None else t * v) * (rho / norm)) for (p, t), v in zip(pairs, tg)]


@register_method("fedasam")
class FedASAM(ModelMethod):
    """FedASAM: FedAvg whose clients train with (adaptive) sharpness-aware minimisation."""

    Params = FedASAMParams

    def sam_step(self, model, opt: torch.optim.Optimizer, x: Tensor, y: Tensor) -> Tensor:
        """One ASAM/SAM step on a batch; returns the loss at the unperturbed weights."""
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        eps = sam_perturbation(model.named_parameters(), self.p.radius, float(self.p.eta), self.p.adaptive,
                               self.p.scale)
        with torch.no_grad():
            for p, e in eps:
                p.add_(e)
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(model(x), y).backward()
        with torch.no_grad():
            for p, e in eps:
                p.sub_(e)
        opt.step()
        return loss.detach()

    def local_train(self, model, data, gen, shared, rnd) -> TrainStats:
        t = self.ctx.cfg.train
        opt = make_sgd(model.parameters(), t.lr, t.momentum, t.weight_decay)
        return train_epochs(model, data, None, t.local_epochs, t.batch_size, gen,
                            step=lambda x, y: self.sam_step(model, opt, x, y))
