"""``ModelMethod``: the common shape of the model-splitting baselines.

Each baseline only says which state-dict keys are personal (kept on the client, never uploaded)
and, where it differs, how local training goes. Everything else is FedAvg: shared keys are
uploaded and sample-weighted averaged (McMahan et al. 2017).
"""
from __future__ import annotations

import torch

from ..fl.aggregate import weighted_average
from ..fl.client_data import ClientData
from ..fl.local import TrainStats, evaluate_model, load_weights, make_sgd, train_epochs
from ..fl.method import ClientUpdate, EvalResult, Method, State


class ModelMethod(Method):
    """A model split into shared and personal state-dict entries."""

    def __init__(self, ctx, params):
        super().__init__(ctx, params)
        # One scratch model per method instance: states are loaded into it, never kept in it.
        self.model = ctx.create_model(seed=0)
        keys = list(self.model.state_dict().keys())
        personal = self.personal_keys(self.model)
        self.personal = [k for k in keys if k in personal]
        self.shared_keys = [k for k in keys if k not in personal]

    # What a subclass changes --------------------------------------------------------------
    def personal_keys(self, model) -> set[str]:
        """State-dict keys that stay on the client. FedAvg: none."""
        return set()

    def local_train(self, model, data: ClientData, gen: torch.Generator, shared: State, rnd: int) -> TrainStats:
        """Plain local SGD on every parameter for ``train.local_epochs`` epochs."""
        t = self.ctx.cfg.train
        opt = make_sgd(model.parameters(), t.lr, t.momentum, t.weight_decay)
        return train_epochs(model, data, opt, t.local_epochs, t.batch_size, gen)

    # The five steps -----------------------------------------------------------------------
    def _initial(self, seed: int) -> dict[str, torch.Tensor]:
        return self.ctx.create_model(seed).state_dict()

    def init_server(self, seed: int) -> tuple[State, State]:
        sd = self._initial(seed)
        return {k: sd[k].clone() for k in self.shared_keys}, {}

    def init_client(self, cid: int, seed: int) -> State:
        if not self.personal:
            return {}  # nothing to start from (FedAvg): building the model would cost 5 ms a client
        # Every client's personal part starts from the same initial model as the server's.
        sd = self._initial(seed)
        return {k: sd[k].clone() for k in self.personal}

    def load(self, shared: State, state: State):
        """The client's personalised model: shared entries from the server, personal from state."""
        load_weights(self.model, {**shared, **{k: state[k] for k in self.personal}})
        for p in self.model.parameters():
            if not p.requires_grad:
                p.requires_grad_(True)
        return self.model

    def client_update(self, shared: State, state: State, data: ClientData, gen: torch.Generator,
                      rnd: int) -> ClientUpdate:
        model = self.load(shared, state)
        stats = self.local_train(model, data, gen, shared, rnd)
        sd = model.state_dict()
        upload = {k: sd[k].detach().clone() for k in self.shared_keys}
        new_state = {**state, **{k: sd[k].detach().clone() for k in self.personal}}
        return ClientUpdate(upload=upload, state=new_state, num_samples=data.num_train, metrics=stats.metrics())

    def average_shared(self, updates: list[ClientUpdate], weights=None) -> State:
        """FedAvg of the uploads' shared entries (anything else a method uploads is left out),
        weighted by sample count unless ``weights`` are given (McMahan et al. 2017)."""
        return weighted_average([{k: u.upload[k] for k in self.shared_keys} for u in updates],
                                [u.num_samples for u in updates] if weights is None else weights)

    def aggregate(self, shared: State, updates: list[ClientUpdate], server_state: State,
                  rnd: int) -> tuple[State, State]:
        if not updates or not self.shared_keys:
            return shared, server_state
        return self.average_shared(updates), server_state

    def evaluate(self, shared: State, state: State, data: ClientData, gen: torch.Generator) -> EvalResult:
        """The client's model on its test split; with ``train.eval_finetune_epochs`` > 0, after that
        many epochs of plain CE fine-tuning on its train split (a throw-away copy: training is
        unaffected)."""
        model = self.load(shared, state)
        t = self.ctx.cfg.train
        ft = getattr(t, "eval_finetune_epochs", 0)
        if ft:
            opt = make_sgd(model.parameters(), t.lr, t.momentum, t.weight_decay)
            train_epochs(model, data, opt, ft, t.batch_size, gen)
        return evaluate_model(model, data)

    def personalized_model(self, shared: State, state: State):
        return self.load(shared, state)

    def global_model(self, shared: State, server_state: State):
        """The averaged model itself; None when part of the model is personal (no global model)."""
        if self.personal:
            return None
        return self.load(shared, {})


class OwnModelMethod(ModelMethod):
    """A ``ModelMethod`` whose clients also keep their own whole model in their state, under
    ``OWN_PREFIX`` (FedSoup's interpolated model, GRACE's last local model).

    With ``p.eval_model == "personal"`` a client is scored with that model once it has one; before
    (and with ``"global"``) it is scored like any ``ModelMethod``. ``personalized_model`` returns the
    own model whenever there is one.
    """

    OWN_PREFIX = "p."

    def own_model(self, state: State) -> dict[str, torch.Tensor] | None:
        n = len(self.OWN_PREFIX)
        sd = {k[n:]: v for k, v in state.items() if k.startswith(self.OWN_PREFIX)}
        return sd or None

    def _load_own(self, sd: dict[str, torch.Tensor]):
        load_weights(self.model, sd)
        return self.model

    def evaluate(self, shared: State, state: State, data: ClientData, gen: torch.Generator) -> EvalResult:
        own = self.own_model(state) if self.p.eval_model == "personal" else None
        if own is None:
            return super().evaluate(shared, state, data, gen)
        return evaluate_model(self._load_own(own), data)

    def personalized_model(self, shared: State, state: State):
        own = self.own_model(state)
        return self.load(shared, {}) if own is None else self._load_own(own)
