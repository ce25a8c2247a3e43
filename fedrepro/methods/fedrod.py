"""FedRoD (Chen & Chao, ICLR 2022): a generic head trained with a balanced loss, and a personal head.

"On Bridging Generic and Personalized Federated Learning for Image Classification". One of FedPFT's
nine PFL baselines (FedPFT (ICLR) Table 2).

The model is the run's :class:`~fedrepro.models.SplitModel`: ``features`` is the shared body φ and
``head`` is the **generic** head h_g. Both are uploaded and FedAvg-aggregated. The personal head h_p
is an extra module of the same shape as ``head``, kept in the client state under ``p_head.*``, never
uploaded. One local step on a batch (x, y) of client c:

- z = φ(x); g = h_g(z);
- generic loss, the balanced softmax (BSM): L_g = CE(g + log π_c, y), with π_c the client's
  training label distribution. It trains φ and h_g;
- personal loss: L_p = CE(g.detach() + h_p(z.detach()), y). It trains h_p only: the personal
  prediction is a *residual* on top of the generic one, and neither φ nor h_g sees its gradient;
- one SGD step on L_g + L_p. Because the two losses touch disjoint parameters this equals the two
  optimisers of the reference implementations (same lr, momentum and weight decay for both).

Evaluation uses the personalised prediction h_g(z) + h_p(z).

Named options (every ambiguity; defaults are the paper's where we know them):

- ``generic_loss``: ``"bsm"`` (default, the paper's FedRoD(BSM)) or ``"ce"`` (plain CE: an
  ablation, FedAvg with an extra personal head).
- ``prior_smoothing``: a pseudo-count added to every class count before π_c is formed. ``0.0``
  (default) is exact BSM: a class absent from the client gets log π = −∞, so it receives neither
  probability mass nor gradient in L_g (the balanced risk has no term for it). The public
  implementations (PFLlib ``clientrod.py``, Fling ``balanced_softmax_loss``) do the same, adding
  ``log(counts)`` with ``log 0 = −∞``. A positive value gives absent classes a small prior instead.
- ``personal_head``: ``"linear"`` (default). The paper's hypernetwork variant, FedRoD(hyper), which
  generates h_p from the client's class distribution, is **not implemented**; asking for it
  (``"hyper"``) raises a ConfigError.
- ``personal_init``: ``"copy"`` (default) starts h_p as a copy of the initial generic head (PFLlib
  deep-copies the model's head; Fling's ``fedrod_p_head`` is a separately initialised Linear of the
  same shape, both random); ``"zeros"`` starts it at 0, so the first personalised prediction is the
  generic one. The paper does not say which; we are not certain. A client that never trains (held
  out) keeps its initial h_p, so with ``"copy"`` its score includes that random head's logits.
- ``personal_grad_to_body``: ``False`` (default, the paper's stop-gradient as in PFLlib) detaches z
  in L_p. ``True`` reproduces Fling's ``fedrod_resnet`` (the FedPFT authors' framework), whose
  ``fedrod_p_head(x) + g.detach()`` lets L_p's gradient reach φ.
- ``eval_head``: ``"personal"`` (default, the personalised FL score) or ``"generic"`` (h_g alone,
  the paper's generic-FL score).

``personalized_model`` returns a module whose ``features`` is φ and whose ``head`` computes
h_g(z) + h_p(z) (or h_g(z) with ``eval_head="generic"``), so analyses that freeze ``features`` and
retrain or wrap ``head`` see the same prediction the client is scored with.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..fl.client_data import ClientData
from ..fl.local import evaluate_model, make_sgd, train_epochs
from ..fl.method import ClientUpdate, EvalResult, State
from ..models.base import SplitModel
from ..params import hp
from .base import ModelMethod
from .registry import register_method

P_HEAD = "p_head."
GENERIC_LOSSES = ("bsm", "ce")
PERSONAL_HEADS = ("linear",)
PERSONAL_INITS = ("copy", "zeros")
EVAL_HEADS = ("personal", "generic")


@dataclass
class FedRoDParams:
    generic_loss: str = hp("bsm", choices=GENERIC_LOSSES)
    prior_smoothing: float = hp(0.0, ge=0)
    personal_head: str = hp("linear", check=lambda v: v in PERSONAL_HEADS,
                            valid="linear (the hypernetwork personal head, 'hyper', is not implemented)")
    personal_init: str = hp("copy", choices=PERSONAL_INITS)
    personal_grad_to_body: bool = hp(False)
    eval_head: str = hp("personal", choices=EVAL_HEADS)


def log_class_prior(labels: Tensor, num_classes: int, smoothing: float = 0.0) -> Tensor:
    """log π_c of a client's training labels; ``-inf`` for absent classes when ``smoothing == 0``."""
    counts = torch.bincount(labels.long(), minlength=num_classes).to(torch.float32) + float(smoothing)
    return torch.log(counts / counts.sum())


def balanced_softmax_loss(logits: Tensor, y: Tensor, log_prior: Tensor) -> Tensor:
    """BSM (Ren et al., 2020), FedRoD's generic loss: CE of the prior-shifted logits."""
    return F.cross_entropy(logits + log_prior.to(logits.device), y)


class RoDHead(nn.Module):
    """The personalised classifier h_g(z) + h_p(z); ``personal=None`` gives h_g alone."""

    def __init__(self, generic: nn.Module, personal: nn.Module | None):
        super().__init__()
        self.generic = generic
        self.personal = personal

    def forward(self, z: Tensor) -> Tensor:
        out = self.generic(z)
        return out if self.personal is None else out + self.personal(z)


@register_method("fedrod")
class FedRoD(ModelMethod):
    """FedRoD: φ and a BSM-trained generic head are averaged; a residual personal head stays local."""

    Params = FedRoDParams

    def __init__(self, ctx, params):
        super().__init__(ctx, params)
        # Scratch personal head, loaded from each client's state (never holds state between calls).
        self.p_head = copy.deepcopy(self.model.head)

    # State ------------------------------------------------------------------------------------
    def init_client(self, cid: int, seed: int) -> State:
        head = self.ctx.create_model(seed).head
        if self.p.personal_init == "zeros":
            with torch.no_grad():
                for t in head.parameters():
                    t.zero_()
        return {P_HEAD + k: v.detach().clone() for k, v in head.state_dict().items()}

    def load_personal_head(self, state: State) -> nn.Module:
        self.p_head.load_state_dict({k[len(P_HEAD):]: v for k, v in state.items() if k.startswith(P_HEAD)},
                                    strict=True)
        for t in self.p_head.parameters():
            t.requires_grad_(True)
        return self.p_head

    def _rod(self, shared: State, state: State) -> SplitModel:
        model = self.load(shared, state)
        personal = self.load_personal_head(state) if self.p.eval_head == "personal" else None
        return SplitModel(model.features, RoDHead(model.head, personal), model.feature_dim, model.num_classes)

    # Training ---------------------------------------------------------------------------------
    def losses(self, model, p_head: nn.Module, x: Tensor, y: Tensor, log_prior: Tensor) -> tuple[Tensor, Tensor]:
        """(L_g, L_p) on one batch; see the module docstring for which parameters each one trains."""
        z = model.features(x)
        g = model.head(z)
        loss_g = balanced_softmax_loss(g, y, log_prior) if self.p.generic_loss == "bsm" else F.cross_entropy(g, y)
        zp = z if self.p.personal_grad_to_body else z.detach()
        loss_p = F.cross_entropy(g.detach() + p_head(zp), y)
        return loss_g, loss_p

    def client_update(self, shared: State, state: State, data: ClientData, gen: torch.Generator,
                      rnd: int) -> ClientUpdate:
        t = self.ctx.cfg.train
        model = self.load(shared, state)
        p_head = self.load_personal_head(state)
        log_prior = log_class_prior(data.train_y, model.num_classes, self.p.prior_smoothing).to(data.train_y.device)
        opt = make_sgd(list(model.parameters()) + list(p_head.parameters()), t.lr, t.momentum, t.weight_decay)
        p_head.train()
        # train_loss is (Σ L_g·n + Σ L_p·n) / N: the two sums are kept apart, as they are logged.
        sums = {"g": 0.0, "p": 0.0}

        def batch_loss(m, x, y):
            loss_g, loss_p = self.losses(m, p_head, x, y, log_prior)
            sums["g"] += float(loss_g.detach()) * y.numel()
            sums["p"] += float(loss_p.detach()) * y.numel()
            return loss_g + loss_p, {"loss_generic": loss_g, "loss_personal": loss_p}

        stats = train_epochs(model, data, opt, t.local_epochs, t.batch_size, gen, batch_loss=batch_loss)
        stats.loss = (sums["g"] + sums["p"]) / max(stats.samples, 1)
        sd = model.state_dict()
        upload = {k: sd[k].detach().clone() for k in self.shared_keys}
        new_state = {**state, **{P_HEAD + k: v.detach().clone() for k, v in p_head.state_dict().items()}}
        return ClientUpdate(upload=upload, state=new_state, num_samples=data.num_train, metrics=stats.metrics())

    # Evaluation -------------------------------------------------------------------------------
    def evaluate(self, shared: State, state: State, data: ClientData, gen: torch.Generator) -> EvalResult:
        return evaluate_model(self._rod(shared, state), data)

    def personalized_model(self, shared: State, state: State) -> SplitModel:
        return copy.deepcopy(self._rod(shared, state))
