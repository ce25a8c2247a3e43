"""FedProc (Mu, Shen, Cheng, Geng, Fu, Zhang & Zhang, FGCS 2023): "FedProc: Prototypical Contrastive
Federated Learning on Non-IID Data".

FedAvg whose clients are pulled towards *global class prototypes*: the server averages the clients'
class-mean representations and broadcasts them, and each client contrasts its representations
against all of them. One round t (of T) for client i:

- download the global model and the global prototypes c^1..c^C (none before the first aggregation);
- per batch (x, y): z = features(x) (with ``moon_cnn`` + ``projection_dim`` the projection-head
  output, the representation FedProc's hybrid network feeds to its output layer), logits = head(z);
- prototypical contrastive loss, an InfoNCE over the classes with the own class's prototype as the
  positive: L_pc = −log( exp(s(z, c^y)/τ) / Σ_k exp(s(z, c^k)/τ) ), batch mean;
- hybrid loss L = (1 − α_t)·CE(logits, y) + α_t·L_pc with α_t = t/T (t = 0, 1, ... the 0-based
  round, so the first round, which has no prototypes, is pure CE and α grows towards 1);
- after local training, the client's prototypes: the mean of z over its training samples of each
  class (trained model, eval mode, no gradient), uploaded with the class counts and the model;
- server: model = FedAvg (sample-weighted); c^k = Σ_i n_ik·c_i^k / Σ_i n_ik over this round's
  uploads. Only the model and the prototypes (with counts) leave the client.

Named options and choices the paper leaves open (or that we could not check in its text):

- ``alpha_schedule``: ``"linear"`` (default, α_t = t/T with T = ``train.rounds``) or
  ``"constant"`` (α_t = ``alpha``, default 0.5).
- ``similarity``: ``"cosine"`` (default) or ``"dot"`` (plain inner product); ``temperature`` τ
  (default 0.5, the τ of MOON and of pFedCSPC's contrastive terms). We could not confirm FedProc's
  exact similarity and τ; the default is the standard normalised InfoNCE.
- A class no client uploaded this round keeps its previous global prototype; a class never seen
  has none and is left out of the softmax. A sample whose class has no prototype contributes no
  L_pc term (L_pc is averaged over the other samples of the batch; 0 if there are none).
- Without global prototypes (the first round; any round under ``"constant"``) the loss is CE alone.

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

from ..fl.client_data import ClientData
from ..fl.local import make_sgd, train_epochs
from ..fl.method import ClientUpdate, State
from ..params import hp
from .base import ModelMethod
from .registry import register_method

G_PROTO = "proto.global"  # shared: [C, m] global prototypes
G_MASK = "proto.mask"  # shared: [C] bool, which classes have one
PROTO = "proto"  # upload: [C, m] the client's class means
COUNT = "proto_count"  # upload: [C] its class counts
SCHEDULES = ("linear", "constant")
SIMILARITIES = ("cosine", "dot")


@dataclass
class FedProcParams:
    # α_t = t/T, FedProc's weight that grows over rounds
    alpha_schedule: str = hp("linear", choices=SCHEDULES)
    alpha: float = hp(0.5, ge=0, le=1)  # only for alpha_schedule="constant"
    similarity: str = hp("cosine", choices=SIMILARITIES)
    temperature: float = hp(0.5, gt=0)

    def alpha_at(self, rnd: int, rounds: int) -> float:
        """α of round ``rnd`` (0-based) out of ``rounds``."""
        if self.alpha_schedule == "constant":
            return float(self.alpha)
        return min(max(rnd / max(rounds, 1), 0.0), 1.0)


def prototype_contrastive_loss(z: Tensor, y: Tensor, protos: Tensor, mask: Tensor, similarity: str = "cosine",
                               temperature: float = 0.5) -> Tensor:
    """FedProc's L_pc, batch mean over the samples whose class has a prototype (0 if none does).

    ``protos`` [C, m], ``mask`` [C] (bool): the classes that have a global prototype.
    """
    avail = torch.nonzero(mask, as_tuple=False).flatten()
    keep = mask[y]
    if avail.numel() == 0 or not bool(keep.any()):
        return z.sum() * 0.0
    p = protos[avail].to(z.dtype)
    zk = z[keep]
    if similarity == "cosine":
        sim = F.normalize(zk, dim=1) @ F.normalize(p, dim=1).T
    else:
        sim = zk @ p.T
    # position of each kept sample's class among the available classes
    index = torch.full((mask.numel(),), -1, dtype=torch.long, device=y.device)
    index[avail] = torch.arange(avail.numel(), device=y.device)
    return F.cross_entropy(sim / temperature, index[y[keep]])


@torch.no_grad()
def class_prototypes(model, data: ClientData, num_classes: int, batch_size: int = 500) -> tuple[Tensor, Tensor]:
    """(per-class mean of ``model.features`` over the client's training split [C, m], counts [C]);
    rows of absent classes are 0. The model is put in eval mode."""
    model.eval()
    sums, counts = None, torch.zeros(num_classes, dtype=torch.float64)
    for x, y in data.eval_train_batches(batch_size):
        z = model.features(x).to(torch.float64)
        if sums is None:
            sums = torch.zeros(num_classes, z.shape[1], dtype=torch.float64, device=z.device)
        sums.index_add_(0, y, z)
        counts += torch.bincount(y.cpu(), minlength=num_classes).to(torch.float64)
    if sums is None:
        raise ValueError(f"client {data.cid} has no training samples")
    protos = sums / counts.to(sums.device).clamp_min(1.0)[:, None]
    return protos.to(torch.float32), counts.to(torch.float32)


@register_method("fedproc")
class FedProc(ModelMethod):
    """FedProc: FedAvg plus a contrastive pull towards server-averaged class prototypes."""

    Params = FedProcParams

    def init_server(self, seed: int) -> tuple[State, State]:
        shared, server = super().init_server(seed)
        m, c = int(self.model.feature_dim), int(self.model.num_classes)
        dev = next(iter(shared.values())).device
        shared[G_PROTO] = torch.zeros(c, m, device=dev)
        shared[G_MASK] = torch.zeros(c, dtype=torch.bool, device=dev)
        return shared, server

    def load(self, shared: State, state: State):
        return super().load({k: shared[k] for k in self.shared_keys}, state)

    def losses(self, model, x: Tensor, y: Tensor, protos: Tensor, mask: Tensor, alpha: float):
        """(total, CE, L_pc or None) on one batch."""
        z = model.features(x)
        ce = F.cross_entropy(model.head(z), y)
        if alpha <= 0 or not bool(mask.any()):
            return ce, ce, None
        pc = prototype_contrastive_loss(z, y, protos, mask, self.p.similarity, float(self.p.temperature))
        return (1.0 - alpha) * ce + alpha * pc, ce, pc

    def client_update(self, shared: State, state: State, data: ClientData, gen: torch.Generator,
                      rnd: int) -> ClientUpdate:
        t = self.ctx.cfg.train
        model = self.load(shared, state)
        protos, mask = shared[G_PROTO], shared[G_MASK].bool()
        alpha = self.p.alpha_at(rnd, int(t.rounds))
        opt = make_sgd(model.parameters(), t.lr, t.momentum, t.weight_decay)

        def batch_loss(m, x, y):
            loss, ce, pc = self.losses(m, x, y, protos, mask, alpha)
            return loss, ({"loss_ce": ce} if pc is None else {"loss_ce": ce, "loss_pc": pc})

        stats = train_epochs(model, data, opt, t.local_epochs, t.batch_size, gen, batch_loss=batch_loss)
        local_protos, counts = class_prototypes(model, data, int(model.num_classes))
        sd = model.state_dict()
        upload = {k: sd[k].detach().clone() for k in self.shared_keys}
        upload[PROTO] = local_protos
        upload[COUNT] = counts
        return ClientUpdate(upload=upload, state=state, num_samples=data.num_train,
                            metrics={**stats.metrics(), "alpha": alpha})

    def aggregate(self, shared: State, updates: list[ClientUpdate], server_state: State,
                  rnd: int) -> tuple[State, State]:
        if not updates:
            return shared, server_state
        new = self.average_shared(updates)
        protos, mask = aggregate_prototypes([u.upload[PROTO] for u in updates], [u.upload[COUNT] for u in updates],
                                            shared[G_PROTO], shared[G_MASK].bool())
        new[G_PROTO], new[G_MASK] = protos, mask
        return new, server_state


def aggregate_prototypes(protos: list[Tensor], counts: list[Tensor], previous: Tensor,
                         previous_mask: Tensor) -> tuple[Tensor, Tensor]:
    """Count-weighted mean of the clients' class prototypes; a class nobody uploaded keeps its
    previous global prototype (and mask)."""
    num = torch.zeros(previous.shape, dtype=torch.float64, device=previous.device)
    den = torch.zeros(previous.shape[0], dtype=torch.float64, device=previous.device)
    for p, n in zip(protos, counts):
        n = n.to(device=previous.device, dtype=torch.float64)
        num += n[:, None] * p.to(device=previous.device, dtype=torch.float64)
        den += n
    seen = den > 0
    out = previous.clone()
    out[seen] = (num[seen] / den[seen][:, None]).to(previous.dtype)
    return out, previous_mask | seen
