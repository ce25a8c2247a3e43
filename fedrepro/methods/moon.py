"""MOON (Li, He & Song, CVPR 2021): "Model-Contrastive Federated Learning".

FedAvg whose local objective adds a *model-contrastive* term: the local model's representation of
an input is pulled towards the global model's representation of it and pushed away from the
client's previous local model's. One round for client i (the paper's Algorithm 1):

- the local model w starts from the downloaded global model w_g; w_g and the client's previous
  local model w_prev are kept frozen for the round;
- per batch (x, y): z = R_w(x), z_glob = R_{w_g}(x), z_prev = R_{w_prev}(x), where R is the
  model's ``features`` (with ``moon_cnn`` + ``projection_dim`` the projection-head output, the
  representation the paper contrasts);
- ℓ_con = −log( exp(sim(z, z_glob)/τ) / (exp(sim(z, z_glob)/τ) + exp(sim(z, z_prev)/τ)) ), sim the
  cosine similarity, averaged over the batch;
- loss = CE(head(z), y) + μ·ℓ_con; SGD on every parameter;
- the trained model is uploaded whole and FedAvg-aggregated (sample-weighted); it is also kept in
  the client state (``prev.*``) as next round's w_prev. Nothing else leaves the client.

Named options and choices the paper leaves open:

- ``mu`` (μ): default 1; the MOON paper uses μ = 5 for CIFAR-10 and μ = 1 for CIFAR-100 and
  Tiny-ImageNet, which pFedCSPC's tables set per dataset (``papers.pfedcspc.baselines.moon_mu``). ``temperature`` (τ):
  default 0.5, the
  paper's value for every dataset.
- First round of a client (no previous local model yet): w_prev is the global model, so
  z_prev = z_glob and ℓ_con ≡ log 2 with an exactly zero gradient; that round is CE training. The
  official code does the same in effect (its model pool is empty in round 0, so ℓ_con = 0).
- Partial participation: w_prev is the model from the last round the client trained in (the
  official code keeps every party's last local net the same way).
- ``anchor_mode``: ``"eval"`` (default) runs w_g and w_prev in eval mode (BatchNorm running
  statistics), as the official code does (``global_model.eval()``, ``old_nets ... .eval()``);
  ``"train"`` uses batch statistics. Identical for models without BN/dropout.
- The model buffer of the official code (``model_buffer_size`` > 1: several previous models as
  negatives) is not implemented; the paper's main results use one.
- ``mu = 0`` skips the frozen models entirely: training is then exactly FedAvg's.

Evaluation: a global-FL method. ``global_model`` is the averaged model (ACC_global); a client's
score is the global model on its test split, after ``train.eval_finetune_epochs`` of CE
fine-tuning when that is set (the pFedCSPC "Local" column). ``personalized_model`` is the global
model too.

A pFedCSPC (TNNLS) Table II baseline.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from ..fl.client_data import ClientData
from ..fl.local import make_sgd, set_trainable, train_epochs
from ..fl.method import ClientUpdate, State
from ..params import hp
from .base import ModelMethod
from .registry import register_method

PREV = "prev."
ANCHOR_MODES = ("eval", "train")


@dataclass
class MOONParams:
    mu: float = hp(1.0, ge=0)  # our choice (MOON paper: 5 on CIFAR-10, 1 on CIFAR-100/Tiny-ImageNet)
    temperature: float = hp(0.5, gt=0)  # MOON paper, all datasets
    anchor_mode: str = hp("eval", choices=ANCHOR_MODES)  # official code: frozen global/previous models in eval mode


def model_contrastive_loss(z: Tensor, z_glob: Tensor, z_prev: Tensor, temperature: float) -> Tensor:
    """MOON's ℓ_con, batch mean: −log softmax([sim(z, z_glob), sim(z, z_prev)]/τ)[0], sim = cosine."""
    pos = F.cosine_similarity(z, z_glob, dim=1)
    neg = F.cosine_similarity(z, z_prev, dim=1)
    logits = torch.stack([pos, neg], dim=1) / temperature
    return F.cross_entropy(logits, torch.zeros(len(z), dtype=torch.long, device=z.device))


@register_method("moon")
class MOON(ModelMethod):
    """MOON: FedAvg plus a model-contrastive term (global model positive, previous local model negative)."""

    Params = MOONParams

    def __init__(self, ctx, params):
        super().__init__(ctx, params)
        # Scratch frozen models, loaded each round (never hold state between calls).
        self.glob = ctx.create_model(seed=0)
        self.prev = ctx.create_model(seed=0)
        set_trainable(self.glob, False)
        set_trainable(self.prev, False)

    def init_client(self, cid: int, seed: int) -> State:
        return {}  # no previous local model before the client's first round

    @staticmethod
    def has_prev(state: State) -> bool:
        return any(k.startswith(PREV) for k in state)

    def anchors(self, shared: State, state: State):
        """(global model, previous local model or None), frozen and in ``anchor_mode``."""
        train = self.p.anchor_mode == "train"
        self.glob.load_state_dict(shared, strict=True)
        self.glob.train(train)
        if not self.has_prev(state):
            return self.glob, None
        self.prev.load_state_dict({k[len(PREV):]: v for k, v in state.items() if k.startswith(PREV)}, strict=True)
        self.prev.train(train)
        return self.glob, self.prev

    def losses(self, model, glob, prev, x: Tensor, y: Tensor) -> tuple[Tensor, Tensor | None]:
        """(CE, ℓ_con) on one batch; ℓ_con is None when μ = 0. ``prev=None``: w_prev is the global model."""
        z = model.features(x)
        ce = F.cross_entropy(model.head(z), y)
        if glob is None:
            return ce, None
        with torch.no_grad():
            z_glob = glob.features(x)
            z_prev = z_glob if prev is None else prev.features(x)
        return ce, model_contrastive_loss(z, z_glob, z_prev, float(self.p.temperature))

    def client_update(self, shared: State, state: State, data: ClientData, gen: torch.Generator,
                      rnd: int) -> ClientUpdate:
        t = self.ctx.cfg.train
        glob, prev = self.anchors(shared, state) if self.p.mu > 0 else (None, None)
        model = self.load(shared, state)
        opt = make_sgd(model.parameters(), t.lr, t.momentum, t.weight_decay)

        def batch_loss(m, x, y):
            ce, con = self.losses(m, glob, prev, x, y)
            return ce if con is None else (ce + self.p.mu * con, {"loss_con": con})

        stats = train_epochs(model, data, opt, t.local_epochs, t.batch_size, gen, batch_loss=batch_loss)
        sd = model.state_dict()
        upload = {k: sd[k].detach().clone() for k in self.shared_keys}
        new_state = {PREV + k: v.detach().clone() for k, v in sd.items()}
        return ClientUpdate(upload=upload, state=new_state, num_samples=data.num_train, metrics=stats.metrics())
