"""FedRep (Collins et al., ICML 2021): a shared representation and personal heads, trained in turn."""
from __future__ import annotations

from dataclasses import dataclass

from ..fl.local import TrainStats, make_sgd, set_trainable, train_epochs
from ..models import head_keys
from ..params import hp
from .base import ModelMethod
from .registry import register_method


@dataclass
class FedRepParams:
    # FedRep's Alg. 1: many cheap head updates, then few representation updates. Its experiments use
    # 10 head epochs and 1 representation epoch; ``None`` for body_epochs means train.local_epochs.
    head_epochs: int = hp(10, ge=0)
    body_epochs: int | None = hp(1, ge=0)


@register_method("fedrep")
class FedRep(ModelMethod):
    """FedRep: head epochs with φ frozen, then body epochs with the head frozen; only φ is uploaded."""

    Params = FedRepParams

    def personal_keys(self, model) -> set[str]:
        return head_keys(model)

    def local_train(self, model, data, gen, shared, rnd) -> TrainStats:
        t = self.ctx.cfg.train
        body_epochs = t.local_epochs if self.p.body_epochs is None else self.p.body_epochs
        stats = TrainStats(0.0)
        set_trainable(model.features, False)
        if self.p.head_epochs:
            opt = make_sgd(model.head.parameters(), t.lr, t.momentum, t.weight_decay)
            stats = train_epochs(model, data, opt, self.p.head_epochs, t.batch_size, gen)
        set_trainable(model.features, True)
        set_trainable(model.head, False)
        if body_epochs:
            opt = make_sgd(model.features.parameters(), t.lr, t.momentum, t.weight_decay)
            stats = train_epochs(model, data, opt, body_epochs, t.batch_size, gen)
        set_trainable(model.head, True)
        return stats
