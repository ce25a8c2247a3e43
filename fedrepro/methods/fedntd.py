"""FedNTD (Lee, Jeong, Shin, Bae & Yun, NeurIPS 2022): "Preservation of the Global Knowledge by Not-True
Distillation in Federated Learning".

FedAvg whose local objective distils the downloaded global model's knowledge of the *not-true*
classes only, so local training keeps the global view of the classes a client lacks while its
own labels still drive the true-class prediction. One round for client i:

- the local model w starts from the downloaded global model w_g, kept frozen for the round;
- per batch (x, y): local logits l = w(x), global logits g = w_g(x) (no gradient);
- not-true logits l̃, g̃ ∈ R^{N×(C−1)}: each row without the entry of its true class y;
- L_NTD = τ²·KL(softmax(g̃/τ) ‖ softmax(l̃/τ)), batch mean;
- loss = CE(l, y) + β·L_NTD; SGD on every parameter;
- the trained model is uploaded and FedAvg-aggregated (sample-weighted). No client state.

Named options and choices the paper leaves open:

- ``tau`` (τ) = 3 and ``beta`` (β) = 1: the defaults of the official ``NTD_Loss`` class
  (pFedCSPC gives no baseline values). The official ``config/fedntd.json`` runs τ = 1, β = 1.
- ``t2_scaling``: multiply the KL by τ² (default ``True``, the official ``NTD_Loss``; the paper's
  equation has no τ² factor).
- ``teacher_mode``: ``"eval"`` (default) runs w_g in eval mode (BatchNorm running statistics).
  The official trainer deep-copies the downloaded model before calling ``train()``, i.e. in the
  eval mode its last evaluation left it in; ``"train"`` uses batch statistics. Identical for
  models without BN/dropout.

Evaluation: a global-FL method (``ModelMethod``): ``global_model`` is the averaged model; a
client's score is that model on its test split, after ``train.eval_finetune_epochs`` of CE
fine-tuning when set.

A pFedCSPC (TNNLS) Table II baseline.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from ..fl.local import TrainStats, make_sgd, set_trainable, train_epochs
from ..params import hp
from .base import ModelMethod
from .registry import register_method

TEACHER_MODES = ("eval", "train")


@dataclass
class FedNTDParams:
    tau: float = hp(3.0, gt=0)  # official NTD_Loss default
    beta: float = hp(1.0, ge=0)  # official NTD_Loss default
    t2_scaling: bool = hp(True)  # official NTD_Loss multiplies the KL by τ²
    teacher_mode: str = hp("eval", choices=TEACHER_MODES)


def not_true_logits(logits: Tensor, y: Tensor) -> Tensor:
    """``logits`` [N, C] without each row's true-class entry: [N, C−1], the other classes in order."""
    n, c = logits.shape
    keep = torch.ones_like(logits, dtype=torch.bool)
    keep[torch.arange(n, device=logits.device), y] = False
    return logits[keep].view(n, c - 1)


def ntd_loss(local: Tensor, global_: Tensor, y: Tensor, tau: float, t2_scaling: bool = True) -> Tensor:
    """τ²·KL(softmax(g̃/τ) ‖ softmax(l̃/τ)) over the not-true classes, batch mean; gradient to ``local`` only."""
    lt = not_true_logits(local, y)
    gt = not_true_logits(global_.detach(), y)
    kl = F.kl_div(F.log_softmax(lt / tau, dim=1), F.softmax(gt / tau, dim=1), reduction="batchmean")
    return kl * tau ** 2 if t2_scaling else kl


@register_method("fedntd")
class FedNTD(ModelMethod):
    """FedNTD: FedAvg plus distillation of the global model's not-true-class predictions."""

    Params = FedNTDParams

    def __init__(self, ctx, params):
        super().__init__(ctx, params)
        # Scratch frozen copy of the downloaded global model, reloaded every round.
        self.teacher = ctx.create_model(seed=0)
        set_trainable(self.teacher, False)

    def load_teacher(self, shared):
        self.teacher.load_state_dict(shared, strict=True)
        self.teacher.train(self.p.teacher_mode == "train")
        return self.teacher

    def losses(self, model, teacher, x: Tensor, y: Tensor) -> tuple[Tensor, Tensor | None]:
        """(CE, L_NTD) on one batch; L_NTD is None without a teacher (β = 0)."""
        out = model(x)
        ce = F.cross_entropy(out, y)
        if teacher is None:
            return ce, None
        with torch.no_grad():
            g = teacher(x)
        return ce, ntd_loss(out, g, y, float(self.p.tau), self.p.t2_scaling)

    def local_train(self, model, data, gen, shared, rnd) -> TrainStats:
        t = self.ctx.cfg.train
        teacher = self.load_teacher(shared) if self.p.beta > 0 else None
        opt = make_sgd(model.parameters(), t.lr, t.momentum, t.weight_decay)

        def batch_loss(m, x, y):
            ce, ntd = self.losses(m, teacher, x, y)
            return ce if ntd is None else ce + self.p.beta * ntd

        return train_epochs(model, data, opt, t.local_epochs, t.batch_size, gen, batch_loss=batch_loss)
