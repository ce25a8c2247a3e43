"""LG-FedAvg (Liang, Liu, Liu, Allen, Auerbach, Brent, Salakhutdinov, Morency; arXiv:2001.01523, 2020).

"Think Locally, Act Globally: Federated Learning with Local and Global Representations". pFedCSPC's
Table III baseline "LG-Fed": "LG-Fed aggregates the classifiers of all clients on the server while
maintaining personalized feature extractors" (pFedCSPC (TNNLS) §II). It is FedPer (fedper.py) turned upside down.

The model is split into **local** layers (the representation, every client keeps its own copy and
never uploads it) and **global** layers (the top of the network, FedAvg-aggregated). Round t:

- the server sends the global layers θ_g;
- client k assembles its model from its own local layers θ_l^k and θ_g, and trains *all* of it
  end to end with CE for ``train.local_epochs`` epochs of SGD (the paper's supervised LG-FedAvg);
- it keeps the new θ_l^k and uploads the new θ_g^k;
- the server sets θ_g ← Σ_k n_k θ_g^k / Σ_k n_k (the repository's sample-weighted FedAvg).

Evaluation uses the client's own model (θ_l^k, θ_g), after ``train.eval_finetune_epochs`` of CE
fine-tuning when that is set (the :class:`ModelMethod` behaviour, as FedPer). There is no global
model: every client's representation is its own, so ``global_model`` returns None.

Named options (where the paper leaves a choice to the model or protocol):

- ``global_part``: which layers are global. ``"head"`` (default, pFedCSPC's description): the
  classifier ``head`` only; every ``features.*`` entry, BatchNorm statistics included, is local.
  ``"projection_and_head"``: the classifier and the projection MLP that ends ``features`` in
  pFedCSPC's models (``moon_cnn`` with ``projection_dim``); the encoder alone stays local. It needs
  a model whose ``features`` has a ``projection`` module and raises a ConfigError otherwise.
  The LG-FedAvg paper makes the top layers global and tunes how many; with pFedCSPC's
  encoder + projection + classifier both choices are "the top layers".
- ``fedavg_warmup_rounds``: as we recall (not re-checked here), the LG-FedAvg experiments start
  local/global training from a model pre-trained with FedAvg. The first ``fedavg_warmup_rounds``
  rounds are plain FedAvg on the whole model; every client then takes the averaged model's local
  layers as its starting θ_l^k. Default ``0`` (pFedCSPC says nothing of a warm-up): every client's
  local layers start from the common initial model, as in FedPer.

The paper's other variants (local representations learnt with auxiliary unsupervised or fair/
adversarial objectives) are not implemented: pFedCSPC compares the supervised method.

Flower-hostable design: ``shared`` holds the whole model. After the warm-up only the global entries
change (and only they are uploaded); the local entries stay the starting point a client copies the
first time it trains, so a Flower server would send them once. A client's state holds its local
layers, and is empty until it has trained after the warm-up (it is then evaluated with the shared
starting point, which is what it would start from).

A pFedCSPC (TNNLS) Table III baseline.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..errors import ConfigError
from ..fl.aggregate import weighted_average
from ..fl.client_data import ClientData
from ..fl.method import ClientUpdate, State
from ..models import head_keys
from ..params import hp
from .base import ModelMethod
from .registry import register_method

GLOBAL_PARTS = ("head", "projection_and_head")


@dataclass
class LGFedParams:
    # pFedCSPC: "aggregates the classifiers ... personalized feature extractors"
    global_part: str = hp("head", choices=GLOBAL_PARTS)
    fedavg_warmup_rounds: int = hp(0, ge=0)  # our default: pFedCSPC does not mention a FedAvg warm-up


def global_layer_keys(model, global_part: str) -> set[str]:
    """State-dict keys of the layers LG-FedAvg federates."""
    keys = set(head_keys(model))
    if global_part == "projection_and_head":
        proj = getattr(model.features, "projection", None)
        if not isinstance(proj, torch.nn.Module):
            raise ConfigError("method.args.global_part='projection_and_head' needs a model whose features end in a "
                              "projection head (moon_cnn with model.args.projection_dim); valid: head")
        keys |= {"features.projection." + k for k in proj.state_dict(keep_vars=True)}
    return keys


@register_method("lgfed")
class LGFed(ModelMethod):
    """LG-FedAvg: local representation layers stay on the client; the top (global) layers are averaged."""

    Params = LGFedParams

    def __init__(self, ctx, params):
        super().__init__(ctx, params)
        self.all_keys = list(self.model.state_dict().keys())
        self.global_keys = list(self.shared_keys)  # what is averaged after the warm-up
        self.local_keys = list(self.personal)

    def personal_keys(self, model) -> set[str]:
        return set(model.state_dict().keys()) - global_layer_keys(model, self.p.global_part)

    def warming_up(self, rnd: int) -> bool:
        return rnd < self.p.fedavg_warmup_rounds

    # State ------------------------------------------------------------------------------------
    def init_server(self, seed: int) -> tuple[State, State]:
        sd = self._initial(seed)
        return {k: sd[k].clone() for k in self.all_keys}, {}

    def init_client(self, cid: int, seed: int) -> State:
        return {}  # the local layers are copied from ``shared`` the first time the client trains

    def load(self, shared: State, state: State):
        """Global layers from the server; local layers from the client state, or the shared starting
        point while the client has none."""
        sd = {k: shared[k] for k in self.all_keys}
        if state:
            sd.update({k: state[k] for k in self.local_keys})
        self.model.load_state_dict(sd, strict=True)
        for p in self.model.parameters():
            p.requires_grad_(True)
        return self.model

    # Training and aggregation -----------------------------------------------------------------
    def client_update(self, shared: State, state: State, data: ClientData, gen: torch.Generator,
                      rnd: int) -> ClientUpdate:
        warm = self.warming_up(rnd)
        model = self.load(shared, {} if warm else state)
        stats = self.local_train(model, data, gen, shared, rnd)
        sd = model.state_dict()
        upload = {k: sd[k].detach().clone() for k in (self.all_keys if warm else self.global_keys)}
        new_state = {} if warm else {k: sd[k].detach().clone() for k in self.local_keys}
        return ClientUpdate(upload=upload, state=new_state, num_samples=data.num_train, metrics=stats.metrics())

    def aggregate(self, shared: State, updates: list[ClientUpdate], server_state: State,
                  rnd: int) -> tuple[State, State]:
        if not updates:
            return shared, server_state
        avg = weighted_average([u.upload for u in updates], [u.num_samples for u in updates])
        return {**shared, **avg}, server_state

    def global_model(self, shared: State, server_state: State):
        """None: every client's representation is its own (during a warm-up too, for one meaning)."""
        return None
