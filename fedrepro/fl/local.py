"""Local training and evaluation loops used by every method."""
from __future__ import annotations

from typing import Callable, Iterable

import torch
import torch.nn.functional as F
from torch import nn

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


def make_sgd(params: Iterable[torch.nn.Parameter], lr: float, momentum: float, weight_decay: float) -> torch.optim.SGD:
    """A fresh SGD optimiser. Re-created each round: optimiser state is not carried across rounds
    (the common choice in the papers' code bases; momentum restarts with each round's download)."""
    return torch.optim.SGD([p for p in params if p.requires_grad], lr=lr, momentum=momentum,
                           weight_decay=weight_decay)


def train_epochs(model: nn.Module, data: ClientData, opt: torch.optim.Optimizer, epochs: int,
                 batch_size: int, gen: torch.Generator, loss_fn: Callable | None = None,
                 grad_hook: GradHook = None, batch_loss: Callable | None = None) -> float:
    """Run ``epochs`` passes of mini-batch SGD; returns the mean training loss.

    The loss of a batch is ``loss_fn(model(x), y)`` (default cross-entropy), or
    ``batch_loss(model, x, y)`` for objectives that need more than the output (features, a teacher)."""
    if loss_fn is not None and batch_loss is not None:
        raise ValueError("train_epochs takes loss_fn or batch_loss, not both")
    model.train()
    total, count = 0.0, 0
    for _ in range(epochs):
        for x, y in data.train_batches(batch_size, gen):
            if batch_loss is not None:
                loss = batch_loss(model, x, y)
            else:
                out = model(x)
                loss = loss_fn(out, y) if loss_fn is not None else F.cross_entropy(out, y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            if grad_hook is not None:
                grad_hook()
            opt.step()
            total += float(loss.detach()) * y.numel()
            count += y.numel()
    return total / max(count, 1)


def macro_f1(y_true: torch.Tensor, y_pred: torch.Tensor) -> float:
    """Macro-F1 over the classes present in ``y_true`` (specs/pfedcspc.md §1.8: a local test split
    may lack classes; predicting an absent class still costs precision of nothing and recall of
    the true class). NaN for an empty split."""
    if y_true.numel() == 0:
        return float("nan")
    n = int(max(int(y_true.max()), int(y_pred.max()))) + 1
    tp = torch.bincount(y_true[y_true == y_pred], minlength=n).double()
    true_n = torch.bincount(y_true, minlength=n).double()
    pred_n = torch.bincount(y_pred, minlength=n).double()
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
