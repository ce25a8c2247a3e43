"""Local training and evaluation loops used by every method."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .client_data import ClientData
from .method import EvalResult

# A hook that may add to gradients after backward (FedProx's proximal term), or None.
GradHook = Callable[[], None] | None


def proximal_hook(anchors: Iterable[tuple[torch.nn.Parameter, torch.Tensor]], coef: float) -> GradHook:
    """The gradient of (coef/2)·Σ‖p − a‖², added to each parameter's gradient after backward.

    FedProx (μ) and FedAMP (λ/α_k) both pull local weights toward an anchor this way. Returns None
    when ``coef`` is 0, so the training loop skips the hook entirely.
    """
    if coef == 0:
        return None
    pairs = list(anchors)

    def hook() -> None:
        with torch.no_grad():
            for p, anchor in pairs:
                if p.grad is not None:
                    p.grad.add_(p.detach() - anchor, alpha=coef)

    return hook


def load_weights(model: nn.Module, sd: Mapping[str, Tensor]) -> None:
    """``model.load_state_dict(sd, strict=True)`` at a third of its cost: when ``sd`` has exactly the
    model's keys, shapes and dtypes, a copy into each of the model's own tensors; otherwise
    ``load_state_dict`` itself, which names what differs. A client's model is loaded twice a
    round (train, evaluate), and with 5 batches a client the module-by-module load was 1-2% of a
    laptop round."""
    own = model.state_dict(keep_vars=True)
    if own.keys() != sd.keys() or any(o.shape != sd[k].shape or o.dtype != sd[k].dtype for k, o in own.items()):
        model.load_state_dict(sd, strict=True)
        return
    with torch.no_grad():
        for k, o in own.items():
            o.copy_(sd[k])


def make_sgd(params: Iterable[torch.nn.Parameter], lr: float, momentum: float, weight_decay: float) -> torch.optim.SGD:
    """A fresh SGD optimiser. Re-created each round: optimiser state is not carried across rounds
    (the common choice in the papers' code bases; momentum restarts with each round's download)."""
    return torch.optim.SGD([p for p in params if p.requires_grad], lr=lr, momentum=momentum,
                           weight_decay=weight_decay)


# A batch's loss: the tensor to minimise, or ``(loss, parts)`` where ``parts`` names the terms a
# method wants logged (e.g. ``{"loss_con": con}``); the loop averages each part like the loss.
BatchLoss = Callable[[nn.Module, Tensor, Tensor], "Tensor | tuple[Tensor, Mapping[str, Tensor | float]]"]
# A whole update on one batch, for methods whose step is not "backward, then opt.step()" (SAM's two
# passes, alternating optimisers). Returns the loss (and parts) to log, like a ``BatchLoss``.
Step = Callable[[Tensor, Tensor], "Tensor | tuple[Tensor, Mapping[str, Tensor | float]]"]


@dataclass
class TrainStats:
    """What a training loop reports: sample-weighted means of the loss and of each named part."""

    loss: float
    parts: dict[str, float] = field(default_factory=dict)
    samples: int = 0

    def metrics(self) -> dict[str, float]:
        """The ``ClientUpdate.metrics`` entry: ``train_loss`` and every part under its own name."""
        return {"train_loss": self.loss, **self.parts}


def _split(out) -> tuple[Tensor, Mapping[str, Tensor | float]]:
    return out if isinstance(out, tuple) else (out, {})


def train_epochs(model: nn.Module, data: ClientData, opt: torch.optim.Optimizer | None, epochs: int,
                 batch_size: int, gen: torch.Generator, loss_fn: Callable | None = None,
                 grad_hook: GradHook = None, batch_loss: BatchLoss | None = None,
                 step: Step | None = None) -> TrainStats:
    """Run ``epochs`` passes of mini-batch training over the client's train split.

    A batch's loss is ``loss_fn(model(x), y)`` (default cross-entropy), or ``batch_loss(model, x, y)``
    for objectives that need more than the output (features, a teacher, a frozen anchor); either
    way it is minimised with ``opt`` (``grad_hook`` runs between backward and the step). A method
    whose update is more than one backward and one step passes ``step(x, y)`` instead, which makes
    the update itself and returns what to log. Returns the sample-weighted mean loss and parts.
    """
    if sum(f is not None for f in (loss_fn, batch_loss, step)) > 1:
        raise ValueError("train_epochs takes one of loss_fn, batch_loss or step")
    model.train()
    total, count = 0.0, 0
    part_sums: dict[str, float] = {}
    for _ in range(epochs):
        for x, y in data.train_batches(batch_size, gen):
            if step is not None:
                loss, parts = _split(step(x, y))
            else:
                if batch_loss is not None:
                    loss, parts = _split(batch_loss(model, x, y))
                else:
                    out = model(x)
                    loss, parts = loss_fn(out, y) if loss_fn is not None else F.cross_entropy(out, y), {}
                opt.zero_grad(set_to_none=True)
                loss.backward()
                if grad_hook is not None:
                    grad_hook()
                opt.step()
            n = y.numel()
            total += float(loss.detach()) * n
            for name, value in parts.items():
                part_sums[name] = part_sums.get(name, 0.0) + float(value.detach() if isinstance(value, Tensor)
                                                                   else value) * n
            count += n
    denom = max(count, 1)
    return TrainStats(total / denom, {k: v / denom for k, v in part_sums.items()}, count)


def fit_tensors(opt: torch.optim.Optimizer, n: int, epochs: int, batch_size: int,
                batch_loss: Callable[[Tensor | slice], Tensor], gen: torch.Generator | None = None,
                device: torch.device | str = "cpu", shuffle_full_batch: bool = True,
                on_epoch: Callable[[int], None] | None = None) -> None:
    """Mini-batch SGD over ``n`` rows held in memory (server-side calibration, probes): each epoch
    draws a permutation from ``gen`` (torch's global stream when None), cuts it into batches of
    ``batch_size`` and takes one step on ``batch_loss(idx)``. ``on_epoch(e)`` runs first in each
    epoch (a per-epoch lr schedule). With ``shuffle_full_batch=False`` a single full batch draws
    nothing and passes ``slice(None)``, which keeps it exact plain gradient descent."""
    bs = min(batch_size, n) if n else batch_size
    for epoch in range(epochs):
        if on_epoch is not None:
            on_epoch(epoch)
        if bs >= n and not shuffle_full_batch:
            batches: Iterable[Tensor | slice] = [slice(None)]
        else:
            order = torch.randperm(n, generator=gen).to(device)
            batches = (order[s:s + bs] for s in range(0, n, bs))
        for idx in batches:
            loss = batch_loss(idx)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()


def macro_f1(y_true: torch.Tensor, y_pred: torch.Tensor) -> float:
    """Macro-F1 over the classes present in ``y_true`` (the MF1 of pFedCSPC (TNNLS) Eq. 20; the
    class set is our choice, as the paper does not say: a local test split may lack classes;
    predicting an absent class still costs precision of nothing and recall of the true class).
    NaN for an empty split."""
    if y_true.numel() == 0:
        return float("nan")
    n = int(max(int(y_true.max()), int(y_pred.max()))) + 1
    # One bincount of the confusion matrix instead of three: per-op cost rules at 100 test images.
    conf = torch.bincount(y_true * n + y_pred, minlength=n * n).view(n, n).double()
    tp, true_n, pred_n = conf.diagonal(), conf.sum(1), conf.sum(0)
    present = true_n > 0
    f1 = 2 * tp[present] / (true_n[present] + pred_n[present])
    return float(f1.mean())


@torch.no_grad()
def evaluate_model(model: nn.Module, data: ClientData, batch_size: int = 500) -> EvalResult:
    """Accuracy, summed cross-entropy and macro-F1 on the client's own test split."""
    model.eval()
    correct, total, loss_sum = 0, 0, 0.0
    preds, labels = [], []
    for x, y in data.test_batches(batch_size):
        out = model(x)
        loss_sum += float(F.cross_entropy(out, y, reduction="sum"))
        pred = out.argmax(1)
        correct += int((pred == y).sum())
        total += y.numel()
        preds.append(pred.cpu())
        labels.append(y.cpu())
    f1 = macro_f1(torch.cat(labels), torch.cat(preds)) if labels else float("nan")
    return EvalResult(correct=correct, total=total, loss_sum=loss_sum, f1_macro=f1)


def set_trainable(module: nn.Module, flag: bool) -> None:
    for p in module.parameters():
        p.requires_grad_(flag)
