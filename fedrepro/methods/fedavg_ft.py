"""FedAvg-FT: FedAvg training; at evaluation each client fine-tunes the global model on its own data.

The fine-tuned copy is used for the client's test score only and is discarded, so training is
exactly FedAvg's (the usual "FedAvg + local fine-tuning" personalisation baseline).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..fl.local import evaluate_model, make_sgd, train_epochs
from ..params import hp
from .base import ModelMethod
from .registry import register_method


@dataclass
class FedAvgFTParams:
    ft_epochs: int = hp(1, ge=0)
    ft_lr: float | None = hp(None, gt=0)  # None: train.lr


@register_method("fedavg_ft")
class FedAvgFT(ModelMethod):
    """FedAvg-FT: the global model fine-tuned for ``ft_epochs`` on the client's train split, then tested."""

    Params = FedAvgFTParams

    def evaluate(self, shared, state, data, gen):
        t = self.ctx.cfg.train
        model = self.load(shared, state)
        if self.p.ft_epochs:
            opt = make_sgd(model.parameters(), self.p.ft_lr or t.lr, t.momentum, t.weight_decay)
            train_epochs(model, data, opt, self.p.ft_epochs, t.batch_size, gen)
        return evaluate_model(model, data)
