"""FedProx (Li et al., MLSys 2020): FedAvg plus a proximal term (μ/2)·||w − w_global||² locally."""
from __future__ import annotations

from dataclasses import dataclass

from ..fl.local import TrainStats, make_sgd, proximal_hook, train_epochs
from ..params import hp
from .base import ModelMethod
from .registry import register_method


@dataclass
class FedProxParams:
    # FedProx's experiments pick μ from {0.001, 0.01, 0.1, 1}; 0.01 is a common middle choice.
    mu: float = hp(0.01, ge=0)


@register_method("fedprox")
class FedProx(ModelMethod):
    """FedProx: the proximal gradient μ·(w − w_global) is added to every shared parameter's gradient.

    Some public code (FedOTP's official code) computes the term but never adds it to the loss, so
    FedProx silently becomes FedAvg there; here the gradient is real and a test checks it.
    """

    Params = FedProxParams

    def local_train(self, model, data, gen, shared, rnd) -> TrainStats:
        t = self.ctx.cfg.train
        anchors = [(p, shared[name]) for name, p in model.named_parameters() if name in shared]
        opt = make_sgd(model.parameters(), t.lr, t.momentum, t.weight_decay)
        return train_epochs(model, data, opt, t.local_epochs, t.batch_size, gen,
                            grad_hook=proximal_hook(anchors, float(self.p.mu)))
