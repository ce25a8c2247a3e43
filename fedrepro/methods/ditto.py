"""Ditto (Li, Hu, Beirami, Smith; ICML 2021): a FedAvg global model plus a proximal personal model.

"Ditto: Fair and Robust Federated Learning Through Personalization". pFedCSPC Table III baseline.

Every client k owns a personal model v_k (the whole model, kept in the client state under
``personal.*``, never uploaded). Round t (the paper's Algorithm 1):

- the server sends the global model w^t;
- global update: starting from w^t, client k runs ``train.local_epochs`` epochs of plain local SGD
  on its CE loss F_k and uploads the result w_k^t (exactly FedAvg's client step);
- personal update: starting from its own v_k, it runs ``personal_epochs`` epochs of SGD on
  F_k(v_k) + (λ/2)·‖v_k − w^t‖², i.e. every step adds λ·(v_k − w^t) to each parameter's gradient.
  The anchor is the *received* w^t, not the freshly updated w_k^t (Algorithm 1);
- the server sets w^{t+1} to the sample-weighted FedAvg of the uploads.

Evaluation scores the personal model v_k on the client's test split. It is already the personalised
model, so ``train.eval_finetune_epochs`` is not applied (that fine-tuning is the "Local" score of
*global* methods). ``global_model`` returns the FedAvg model w (for ``train.global_eval``).

Named options and choices:

- ``lam`` (λ): default 0.1, our choice (pFedCSPC gives no baseline values); the Ditto paper tunes
  λ per data set over a small grid.
- ``personal_epochs``: epochs of the personal update; ``None`` (default) = ``train.local_epochs``
  (our choice: the same local budget as every other method). The paper counts local iterations;
  epochs are this repository's unit.
- Personal initialisation: v_k starts as the common initial model (the one the server starts
  from). The paper leaves this open; PFLlib (``clientditto.py``) also deep-copies the initial
  model. A client that never trains is evaluated with that initial model.
- Only parameters enter the proximal term; BatchNorm running statistics in v_k are the client's own.
- The global and personal updates use separate SGD optimisers (same lr, momentum, weight decay),
  each re-created every round; they draw their mini-batches one after the other from the client's
  generator, global update first. The order changes only which batches each update sees: both
  start from what they started from and the personal anchor is w^t either way (PFLlib runs the
  personal update first).

A pFedCSPC (TNNLS) Table III baseline.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..fl.client_data import ClientData
from ..fl.local import TrainStats, evaluate_model, make_sgd, proximal_hook, train_epochs
from ..fl.method import ClientUpdate, EvalResult, State
from ..params import hp
from .base import ModelMethod
from .registry import register_method

PERSONAL = "personal."


@dataclass
class DittoParams:
    lam: float = hp(0.1, ge=0)  # our choice; Ditto tunes λ per data set
    personal_epochs: int | None = hp(None, ge=0)  # None: train.local_epochs, every method's budget


@register_method("ditto")
class Ditto(ModelMethod):
    """Ditto: FedAvg for the global model; each client also trains a personal model pulled towards it."""

    Params = DittoParams

    # The whole model is shared (FedAvg); the personal model lives under ``personal.*``.
    def init_client(self, cid: int, seed: int) -> State:
        sd = self._initial(seed)
        return {PERSONAL + k: v.clone() for k, v in sd.items()}

    def load_personal(self, state: State):
        """The client's personal model v_k in the scratch model."""
        self.model.load_state_dict({k[len(PERSONAL):]: v for k, v in state.items() if k.startswith(PERSONAL)},
                                   strict=True)
        for p in self.model.parameters():
            p.requires_grad_(True)
        return self.model

    def personal_train(self, model, data: ClientData, gen: torch.Generator, shared: State) -> TrainStats:
        """SGD on CE + (λ/2)·‖v − w^t‖² for the personal epochs; w^t is ``shared``."""
        t = self.ctx.cfg.train
        epochs = t.local_epochs if self.p.personal_epochs is None else self.p.personal_epochs
        anchors = [(p, shared[name]) for name, p in model.named_parameters()]
        opt = make_sgd(model.parameters(), t.lr, t.momentum, t.weight_decay)
        return train_epochs(model, data, opt, epochs, t.batch_size, gen,
                            grad_hook=proximal_hook(anchors, float(self.p.lam)))

    def client_update(self, shared: State, state: State, data: ClientData, gen: torch.Generator,
                      rnd: int) -> ClientUpdate:
        # 1. global update: plain local SGD from w^t (FedAvg's client step), uploaded
        model = self.load(shared, {})
        stats_g = self.local_train(model, data, gen, shared, rnd)
        sd = model.state_dict()
        upload = {k: sd[k].detach().clone() for k in self.shared_keys}
        # 2. personal update: v_k pulled towards the received w^t, kept on the client
        model = self.load_personal(state)
        stats_p = self.personal_train(model, data, gen, shared)
        new_state = {PERSONAL + k: v.detach().clone() for k, v in model.state_dict().items()}
        return ClientUpdate(upload=upload, state=new_state, num_samples=data.num_train,
                            metrics={"train_loss": stats_g.loss, "personal_loss": stats_p.loss})

    def evaluate(self, shared: State, state: State, data: ClientData, gen: torch.Generator) -> EvalResult:
        return evaluate_model(self.load_personal(state), data)

    def personalized_model(self, shared: State, state: State):
        return self.load_personal(state)

    def global_model(self, shared: State, server_state: State):
        """The FedAvg model w."""
        return self.load(shared, {})
