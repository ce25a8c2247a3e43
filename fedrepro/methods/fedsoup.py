"""FedSoup (Chen, Jiang, Dou, Wang & Li, MICCAI 2023): selective model interpolation.
"FedSoup: Improving Generalization and Personalization in Federated Learning via Selective Model
Interpolation".

The server is FedAvg. Each client keeps a *soup*: a pool of global models it received in earlier
rounds, stored as their running mean P and their number n. One round of client k:

1. receive the global model g_t and train it locally for E epochs (CE) → θ;
2. once the soup phase has begun (round index + 1 > ``soup_start`` × ``train.rounds``):

   - *federated model patching*: interpolate the local model with the soup,
     w = (θ + n·P) / (n + 1);
   - *temporal model selection* (greedy): the candidate with g_t added,
     w⁺ = (θ + n·P + g_t) / (n + 2);
     if acc_val(w⁺) > acc_val(w) then g_t joins the soup (P ← (n·P + g_t)/(n + 1), n ← n + 1) and
     the client's model is w⁺, else it is w;

   before that phase the client's model is θ;
3. the client's model is uploaded (FedAvg) and kept as its personalised model.

acc_val is top-1 accuracy on a validation split held out from the client's *training* data (the
official code scores candidates on the local test split; we do not). Named choices:

- ``val_fraction`` = 0.2 of each client's training samples form its validation split (at least 1
  sample, none when the client has fewer than 2), drawn once per client from a generator seeded
  from the run seed, so the split is the same in every round; ``val_holdout=True`` (default)
  keeps them out of local training (and of the FedAvg weight), ``False`` trains on all samples
  and validates on the subset (biased, but loses no data).
- ``soup_start`` = 0.75: the official code's ``wa_alpha`` (soup from the last quarter of
  training on). It counts global rounds here; the official code counts the client's own rounds
  (equal under full participation).
- Strict ``>``: the official code keeps the soup unchanged on a tie. The soup has no size cap
  (as in the official code): every accepted global model stays in its mean.
- Every floating-point state-dict entry is interpolated (BatchNorm running statistics included);
  integer entries (``num_batches_tracked``) are θ's. The official code interpolates parameters only.
- ``eval_model="personal"`` (default): a client is scored with its own latest model (FedSoup's
  local metric); a client that has not trained yet is scored like FedAvg (the global model, after
  ``train.eval_finetune_epochs`` of fine-tuning). ``"global"``: always like FedAvg-FT.
- The global model (ACC_global) is the FedAvg model.

A pFedCSPC (TNNLS) Table II baseline.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable, Mapping

import torch
from torch import Tensor

from ..fl.client_data import ClientData
from ..fl.local import evaluate_model
from ..fl.method import ClientUpdate, State
from ..fl.seeding import derive_seed
from ..params import hp
from .base import OwnModelMethod
from .registry import register_method

PERSONAL = OwnModelMethod.OWN_PREFIX  # the client's own model in its state
SOUP = "soup."  # running mean of the soup's global models
SOUP_N = "soup_n"  # how many global models the soup holds
SPLIT_SEED = "split_seed"  # seed of the client's validation split
EVAL_MODELS = ("personal", "global")


@dataclass
class FedSoupParams:
    soup_start: float = hp(0.75, ge=0, le=1)  # fraction of train.rounds before the soup phase [official wa_alpha]
    val_fraction: float = hp(0.2, gt=0, lt=1)  # [ours]
    val_holdout: bool = hp(True)  # [ours]
    eval_model: str = hp("personal", choices=EVAL_MODELS)


def mix(models: list[Mapping[str, Tensor]], weights: list[float]) -> dict[str, Tensor]:
    """Σ_i weights[i]·models[i] for floating-point entries; other entries from ``models[0]``."""
    out = {}
    for k, ref in models[0].items():
        if ref.is_floating_point():
            acc = torch.zeros(ref.shape, dtype=torch.float64, device=ref.device)
            for m, w in zip(models, weights):
                if w:
                    acc.add_(m[k].to(torch.float64), alpha=float(w))
            out[k] = acc.to(ref.dtype)
        else:
            out[k] = ref.clone()
    return out


def soup_step(local: Mapping[str, Tensor], soup: Mapping[str, Tensor] | None, n: int,
              incoming: Mapping[str, Tensor], val_acc: Callable[[Mapping[str, Tensor]], float]):
    """One greedy FedSoup step. Returns ``(model, soup_mean, n, accepted)`` (module docstring, 2)."""
    if n == 0 or soup is None:
        soup, n = incoming, 0  # an empty soup: its mean is never weighted
    patched = mix([local, soup], [1.0 / (n + 1), n / (n + 1)])
    candidate = mix([local, soup, incoming], [1.0 / (n + 2), n / (n + 2), 1.0 / (n + 2)])
    if val_acc(candidate) > val_acc(patched):
        return candidate, mix([soup, incoming], [n / (n + 1), 1.0 / (n + 1)]), n + 1, True
    return patched, (dict(soup) if n else None), n, False


def split_indices(n: int, fraction: float, gen: torch.Generator) -> tuple[Tensor, Tensor]:
    """``(train_idx, val_idx)``: a random ``fraction`` (at least 1) for validation; no validation
    split when ``n < 2``."""
    if n < 2:
        return torch.arange(n), torch.arange(0)
    perm = torch.randperm(n, generator=gen)
    n_val = min(max(1, int(round(fraction * n))), n - 1)
    return perm[n_val:].sort().values, perm[:n_val].sort().values


@register_method("fedsoup")
class FedSoup(OwnModelMethod):
    """FedSoup: clients greedily keep a soup of past global models and interpolate it with their own."""

    Params = FedSoupParams

    def init_client(self, cid: int, seed: int) -> State:
        return {SPLIT_SEED: torch.tensor(derive_seed(seed, "subset", 0x50B, cid), dtype=torch.int64)}

    def soup_active(self, rnd: int) -> bool:
        return rnd + 1 > self.p.soup_start * self.ctx.cfg.train.rounds

    def splits(self, data: ClientData, state: State) -> tuple[ClientData, ClientData]:
        """``(training data, validation data)``: the validation split sits in the test fields."""
        gen = torch.Generator().manual_seed(int(state[SPLIT_SEED]))
        tr, va = split_indices(data.num_train, self.p.val_fraction, gen)
        tr, va = tr.to(data.train_y.device), va.to(data.train_y.device)
        val = dataclasses.replace(data, test_x=data.train_x[va], test_y=data.train_y[va])
        if self.p.val_holdout and va.numel():
            data = dataclasses.replace(data, train_x=data.train_x[tr], train_y=data.train_y[tr])
        return data, val

    def val_accuracy(self, sd: Mapping[str, Tensor], val: ClientData) -> float:
        self.model.load_state_dict(dict(sd), strict=True)
        return evaluate_model(self.model, val).acc

    def client_update(self, shared: State, state: State, data: ClientData, gen: torch.Generator,
                      rnd: int) -> ClientUpdate:
        train, val = self.splits(data, state)
        model = self.load(shared, {})
        stats = self.local_train(model, train, gen, shared, rnd)
        theta = {k: v.detach().clone() for k, v in model.state_dict().items()}
        new_state = {k: v for k, v in state.items() if not k.startswith(PERSONAL)}
        metrics = stats.metrics()
        if self.soup_active(rnd) and val.num_test:
            n = int(state.get(SOUP_N, torch.tensor(0)))
            soup = {k[len(SOUP):]: v for k, v in state.items() if k.startswith(SOUP)} if n else None
            final, soup, n, accepted = soup_step(theta, soup, n, shared, lambda sd: self.val_accuracy(sd, val))
            new_state = {k: v for k, v in new_state.items() if not k.startswith(SOUP)}
            if soup is not None:
                new_state.update({SOUP + k: v for k, v in soup.items()})
            new_state[SOUP_N] = torch.tensor(n)
            metrics.update({"soup_size": float(n), "soup_accepted": float(accepted)})
        else:
            final = theta
        new_state.update({PERSONAL + k: v for k, v in final.items()})
        upload = {k: final[k].clone() for k in self.shared_keys}
        return ClientUpdate(upload=upload, state=new_state, num_samples=train.num_train, metrics=metrics)

