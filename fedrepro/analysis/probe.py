"""The feature-classifier mismatch probe (FedPFT (ICLR) Table 1) and linear probes (ICLR Tables 5 and 6).

As defined in FedPFT (ICLR) §1 and App. A, Fig. 6 (arXiv §1), per client, on the client's own
data, with the FL-trained personalised model frozen in eval mode (BN running statistics):

- **Origin**: the model as is, ``head(features(x))``, on the client's test split;
- **Probe**: ``features`` frozen, the classifier *replaced* by a freshly, randomly initialised
  ``Linear(m, C)`` retrained on the client's train split;
- **Match**: ``features`` and ``head`` frozen, a ``Linear(m, m)`` (with bias) *inserted* between
  them and retrained on the client's train split;
- mismatch degree = Match − Origin.

Features are extracted once per client and split (no gradients); the retraining then runs on the
cached ``[n, m]`` matrices, so a 20-client probe takes seconds on a CPU.

Choices the paper leaves open (neither version gives the retraining recipe or which round is
probed); ours, all in :class:`ProbeConfig`:

- **which model**: the **final-round** model (what ``experiment.restore`` rebuilds), not the best
  round (the store keeps only the final state);
- **recipe**: full-batch SGD (plain gradient descent on the client's ≤ a few hundred cached
  feature rows), momentum 0.9, lr 0.1, weight decay 0, 100 epochs, constant lr; the same recipe
  for Probe, Match and the linear probes. At the laptop profile test accuracy plateaus by 50–100
  epochs (the cross-entropy keeps creeping down because the features are nearly separable and
  there is no weight decay; training longer only overfits slightly), and mini-batch SGD gives the
  same accuracy at a few times the cost;
- **divergence guard**: the largest stable step size shrinks as ‖f‖² grows, and ‖f‖² grows with
  the width m, so if a retraining ends with a non-finite or higher-than-initial train loss it is redone from
  scratch at half the lr (at most ``max_backoff`` times); the lr used is reported per client
  (``probe_lr``, ``match_lr``);
- **Match init**: the identity (``match_init="identity"``: with 0 epochs Match *is* Origin, bit for
  bit, and the divergence guard keeps its train loss at or below Origin's); ``"random"`` draws it like ``nn.Linear``'s
  default;
- **Probe init**: ``nn.Linear``'s default distribution U(±1/√m), but drawn from a seeded generator;
- **seeding**: every draw (init, shuffling) comes from a generator derived from
  ``(cfg.seed, "probe"|"match", client id)``, independent of which other clients are probed;
- **clients**: every client is probed (held-out ones flagged in ``held_out``); means in
  :func:`summarize_probe` are over participating clients, like the run's ``acc_mean``.

Accuracies are fractions in [0, 1], like the run tables.
"""
from __future__ import annotations

import copy
import dataclasses
import warnings
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from torch import nn

from ..errors import ConfigError
from ..fl.client_data import ClientData
from ..fl.local import fit_tensors
from .embedding import EVAL_BATCH, analysis_generator, client_features
from ..runs.train import restore

MATCH_INITS = ("identity", "random")


@dataclass(frozen=True)
class ProbeConfig:
    """The retraining recipe shared by Probe, Match and the linear probes (our choice; the paper gives none)."""

    epochs: int = 100
    lr: float = 0.1
    momentum: float = 0.9
    weight_decay: float = 0.0
    batch_size: int | None = None  # None: full batch
    match_init: str = "identity"  # or "random"
    seed: int = 0
    max_backoff: int = 6  # halvings of lr allowed when a retraining diverges

    def validate(self) -> "ProbeConfig":
        if not isinstance(self.epochs, int) or isinstance(self.epochs, bool) or self.epochs < 0:
            raise ConfigError(f"ProbeConfig.epochs={self.epochs!r}; valid: an integer >= 0")
        for key in ("lr", "momentum", "weight_decay"):
            v = getattr(self, key)
            if not isinstance(v, (int, float)) or isinstance(v, bool) or v < 0 or (key == "lr" and v == 0):
                raise ConfigError(f"ProbeConfig.{key}={v!r}; valid: a number {'> 0' if key == 'lr' else '>= 0'}")
        if self.batch_size is not None and (not isinstance(self.batch_size, int) or self.batch_size < 1):
            raise ConfigError(f"ProbeConfig.batch_size={self.batch_size!r}; "
                              f"valid: None (full batch) or an integer >= 1")
        if not isinstance(self.max_backoff, int) or isinstance(self.max_backoff, bool) or self.max_backoff < 0:
            raise ConfigError(f"ProbeConfig.max_backoff={self.max_backoff!r}; valid: an integer >= 0")
        if self.match_init not in MATCH_INITS:
            raise ConfigError(f"ProbeConfig.match_init={self.match_init!r}; valid: {', '.join(MATCH_INITS)}")
        return self

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


# Retraining on cached features ------------------------------------------------------------------

def _uniform(shape: tuple[int, ...], bound: float, gen: torch.Generator) -> torch.Tensor:
    return (torch.rand(shape, generator=gen) * 2 - 1) * bound


def random_linear(d_in: int, d_out: int, gen: torch.Generator, device: torch.device) -> nn.Linear:
    """A Linear with PyTorch's default init distribution, U(±1/√d_in) for weight and bias, from ``gen``."""
    lin = nn.Linear(d_in, d_out).to(device)
    bound = 1.0 / max(d_in, 1) ** 0.5
    with torch.no_grad():
        lin.weight.copy_(_uniform((d_out, d_in), bound, gen))
        lin.bias.copy_(_uniform((d_out,), bound, gen))
    return lin


def identity_linear(d: int, device: torch.device) -> nn.Linear:
    lin = nn.Linear(d, d).to(device)
    with torch.no_grad():
        lin.weight.copy_(torch.eye(d))
        lin.bias.zero_()
    return lin


def fit_on_features(params: Sequence[nn.Parameter], forward: Callable[[torch.Tensor], torch.Tensor],
                    feats: torch.Tensor, labels: torch.Tensor, cfg: ProbeConfig, gen: torch.Generator,
                    lr: float | None = None) -> None:
    """Cross-entropy SGD on cached features; ``forward`` maps features to logits."""
    n = len(labels)
    if n == 0 or cfg.epochs == 0:
        return
    opt = torch.optim.SGD(list(params), lr=cfg.lr if lr is None else lr, momentum=cfg.momentum,
                          weight_decay=cfg.weight_decay)
    bs = n if cfg.batch_size is None else cfg.batch_size
    fit_tensors(opt, n, cfg.epochs, bs, lambda idx: F.cross_entropy(forward(feats[idx]), labels[idx]),
                gen, feats.device, shuffle_full_batch=False)


@torch.no_grad()
def _train_loss(forward, feats: torch.Tensor, labels: torch.Tensor) -> float:
    return float(F.cross_entropy(forward(feats), labels))


Build = Callable[[torch.Generator], tuple[Sequence[nn.Parameter], Callable[[torch.Tensor], torch.Tensor]]]


def fit_with_backoff(build: Build, feats: torch.Tensor, labels: torch.Tensor, cfg: ProbeConfig,
                     make_gen: Callable[[], torch.Generator]) -> tuple[Callable[[torch.Tensor], torch.Tensor], float]:
    """Train a freshly built layer; if SGD diverged, rebuild and retrain at half the lr.

    The stable step size scales with the squared feature norm, which grows with the width m (and,
    for Match, with the frozen head's norm), so no single lr suits every model. "Diverged" means the
    final train loss is not finite or exceeds the initial one. Every attempt restarts from a fresh
    generator, so the outcome stays a function of the seed. Returns ``(forward, lr used)``.
    """
    lr = float(cfg.lr)
    for attempt in range(cfg.max_backoff + 1):
        gen = make_gen()
        params, forward = build(gen)
        start = _train_loss(forward, feats, labels)
        fit_on_features(params, forward, feats, labels, cfg, gen, lr=lr)
        end = _train_loss(forward, feats, labels)
        if np.isfinite(end) and end <= start + 1e-6:
            return forward, lr
        if attempt < cfg.max_backoff:
            lr /= 2
    warnings.warn(f"probe training did not reduce the train loss even at lr={lr:g} "
                  f"(ProbeConfig.lr={cfg.lr:g}, max_backoff={cfg.max_backoff}); its accuracy is unreliable")
    return forward, lr


@torch.no_grad()
def accuracy_and_loss(forward: Callable[[torch.Tensor], torch.Tensor], feats: torch.Tensor,
           labels: torch.Tensor) -> tuple[float, float]:
    """(accuracy, mean cross-entropy); batches of 500 like the engine, so identical inputs give
    identical logits to the run's own evaluation."""
    n = len(labels)
    if n == 0:
        return float("nan"), float("nan")
    correct, loss = 0, 0.0
    for start in range(0, n, EVAL_BATCH):
        out = forward(feats[start:start + EVAL_BATCH])
        y = labels[start:start + EVAL_BATCH]
        correct += int((out.argmax(1) == y).sum())
        loss += float(F.cross_entropy(out, y, reduction="sum"))
    return correct / n, loss / n


def _frozen_head(model: nn.Module) -> nn.Module:
    # A private copy: freezing or switching modes must not touch the method's scratch module.
    head = copy.deepcopy(model.head).eval()
    for p in head.parameters():
        p.requires_grad_(False)
    return head


def train_probe(feats: torch.Tensor, labels: torch.Tensor, num_classes: int, cfg: ProbeConfig,
                make_gen: Callable[[], torch.Generator]) -> tuple[Callable, float]:
    """Probe: a fresh random Linear(m, C) trained on ``feats``; returns ``(forward, lr used)``."""
    def build(gen):
        lin = random_linear(feats.shape[1], num_classes, gen, feats.device)
        return list(lin.parameters()), lin

    return fit_with_backoff(build, feats, labels, cfg, make_gen)


def train_match(feats: torch.Tensor, labels: torch.Tensor, head: nn.Module, cfg: ProbeConfig,
                make_gen: Callable[[], torch.Generator]) -> tuple[Callable, float]:
    """Match: a Linear(m, m) inserted before the frozen ``head``; returns ``(x -> head(A(x)), lr used)``."""
    m = feats.shape[1]

    def build(gen):
        if cfg.match_init == "identity":
            lin = identity_linear(m, feats.device)
        else:
            lin = random_linear(m, m, gen, feats.device)
        return list(lin.parameters()), (lambda f: head(lin(f)))

    return fit_with_backoff(build, feats, labels, cfg, make_gen)


# The mismatch probe -------------------------------------------------------------------------------

def probe_client(model: nn.Module, data: ClientData, cfg: ProbeConfig = ProbeConfig()) -> dict:
    """Origin / Probe / Match for one client's personalised ``model`` (test and train accuracy)."""
    cfg.validate()
    tr_f, tr_y = client_features(model, data, "train")
    te_f, te_y = client_features(model, data, "test")
    head = _frozen_head(model)
    with torch.no_grad():
        some = tr_f[:1] if len(tr_y) else te_f[:1]
        num_classes = int(head(some).shape[1]) if len(some) else int(getattr(model, "num_classes", 0))
    row = {"client": data.cid, "held_out": bool(data.held_out), "n_train": len(tr_y), "n_test": len(te_y),
           "feature_dim": int(tr_f.shape[1]) if tr_f.ndim == 2 else 0}
    row["origin"], row["origin_loss"] = accuracy_and_loss(head, te_f, te_y)
    row["origin_train"], row["origin_train_loss"] = accuracy_and_loss(head, tr_f, tr_y)
    if len(tr_y) == 0:  # nothing to retrain on
        row.update({k: float("nan") for k in _COLUMNS if k.startswith(("probe", "match"))})
        return row
    with torch.enable_grad():
        probe, row["probe_lr"] = train_probe(tr_f, tr_y, num_classes, cfg,
                                             lambda: analysis_generator(cfg.seed, "probe", data.cid))
        match, row["match_lr"] = train_match(tr_f, tr_y, head, cfg,
                                             lambda: analysis_generator(cfg.seed, "match", data.cid))
    row["probe"], _ = accuracy_and_loss(probe, te_f, te_y)
    row["probe_train"], row["probe_train_loss"] = accuracy_and_loss(probe, tr_f, tr_y)
    row["match"], _ = accuracy_and_loss(match, te_f, te_y)
    row["match_train"], row["match_train_loss"] = accuracy_and_loss(match, tr_f, tr_y)
    return row


_COLUMNS = ["client", "origin", "probe", "match", "n_train", "n_test", "held_out", "feature_dim",
            "origin_train", "probe_train", "match_train", "origin_loss", "origin_train_loss",
            "probe_train_loss", "match_train_loss", "probe_lr", "match_lr"]


def mismatch_probe_state(method, clients: Sequence[ClientData], state: dict, cfg: ProbeConfig = ProbeConfig(),
                         client_ids: Sequence[int] | None = None) -> pd.DataFrame:
    """:func:`mismatch_probe` on an explicit ``(method, clients, state)`` (``restore``'s output).

    Each client is probed with its own personalised model (its own head for FedPer, its own BN for
    FedBN, its own prompts for FedPFT). ``state`` is only read.
    """
    cfg.validate()
    rows = _per_client(method, clients, state, client_ids, lambda model, data: probe_client(model, data, cfg))
    return pd.DataFrame(rows, columns=_COLUMNS)


def _per_client(method, clients: Sequence[ClientData], state: dict, client_ids: Sequence[int] | None,
                fn: Callable[[nn.Module, ClientData], dict]) -> list[dict]:
    """``fn(personalised model, data)`` for each requested client (all by default)."""
    ids = [c.cid for c in clients] if client_ids is None else [int(c) for c in client_ids]
    by_id = {c.cid: c for c in clients}
    rows = []
    for cid in ids:
        if cid not in by_id:
            raise ConfigError(f"client_ids contains {cid}; valid: {sorted(by_id)}")
        model = method.personalized_model(state["shared"], state["client_states"][cid])
        rows.append(fn(model, by_id[cid]))
    return rows


def mismatch_probe(result, cfg: ProbeConfig = ProbeConfig(), device: str = "auto",
                   client_ids: Sequence[int] | None = None) -> pd.DataFrame:
    """Table 1 for one finished run: one row per client (``client, origin, probe, match, n_train,
    n_test`` plus ``held_out``, train-split accuracies and final train losses), on the run's
    **final-round** personalised models. See :func:`summarize_probe` for the means.
    """
    method, clients, state = restore(result, device)
    return mismatch_probe_state(method, clients, state, cfg, client_ids)


def summarize_probe(df: pd.DataFrame, include_held_out: bool = False) -> dict:
    """Unweighted means over clients (participating ones unless ``include_held_out``), and the gaps.

    ``mismatch`` = Match − Origin (the paper's mismatch degree); ``probe_minus_match`` should be
    near 0 when C ≤ m: with the classifier W ∈ R^{C×m} frozen, W·A (A ∈ R^{m×m}) can realise any
    C×m matrix when W has full row rank, so Match is as expressive as a retrained linear probe
    (FedPFT (ICLR) Table 1: ``|Probe − Match|`` ≤ 0.6 in every row).
    """
    part = df if include_held_out or "held_out" not in df else df[~df["held_out"].astype(bool)]
    out: dict = {"clients": int(len(part))}
    for col in ("origin", "probe", "match", "origin_train", "probe_train", "match_train"):
        if col in part:
            out[col] = float(np.nanmean(part[col].to_numpy(dtype=np.float64))) if len(part) else float("nan")
    out["mismatch"] = out["match"] - out["origin"]
    out["probe_minus_match"] = out["probe"] - out["match"]
    return out


# Linear probes on a chosen representation (Tables 5 and 6) -------------------------------------

def linear_probe_client(model: nn.Module, data: ClientData, on: str = "features",
                        cfg: ProbeConfig = ProbeConfig()) -> dict:
    """A fresh random Linear(d, C) trained on the client's train features from ``on``; test accuracy."""
    cfg.validate()
    tr_f, tr_y = client_features(model, data, "train", on)
    te_f, te_y = client_features(model, data, "test", on)
    row = {"client": data.cid, "on": on, "held_out": bool(data.held_out), "n_train": len(tr_y),
           "n_test": len(te_y), "feature_dim": int(tr_f.shape[1]) if tr_f.ndim == 2 else 0}
    if len(tr_y) == 0:
        row.update(probe=float("nan"), probe_train=float("nan"), probe_train_loss=float("nan"), probe_lr=float("nan"))
        return row
    # The class count is the classifier's, so a client missing some classes still gets C outputs.
    num_classes = getattr(model, "num_classes", None)
    if num_classes is None:
        with torch.no_grad():
            f = tr_f if on == "features" else client_features(model, data, "train")[0]
            num_classes = int(model.head(f[:1]).shape[1])
    with torch.enable_grad():
        # Same generator key as the mismatch probe's Probe: on "features" the two give identical numbers.
        lin, row["probe_lr"] = train_probe(tr_f, tr_y, num_classes, cfg,
                                           lambda: analysis_generator(cfg.seed, "probe", data.cid))
    row["probe"], _ = accuracy_and_loss(lin, te_f, te_y)
    row["probe_train"], row["probe_train_loss"] = accuracy_and_loss(lin, tr_f, tr_y)
    return row


def linear_probe_state(method, clients: Sequence[ClientData], state: dict, on: str = "features",
                       cfg: ProbeConfig = ProbeConfig(), client_ids: Sequence[int] | None = None) -> pd.DataFrame:
    """:func:`linear_probe` on an explicit ``(method, clients, state)``."""
    cfg.validate()
    rows = _per_client(method, clients, state, client_ids,
                       lambda model, data: linear_probe_client(model, data, on, cfg))
    return pd.DataFrame(rows)


def linear_probe(result, on: str = "features", cfg: ProbeConfig = ProbeConfig(), device: str = "auto",
                 client_ids: Sequence[int] | None = None) -> pd.DataFrame:
    """Per-client linear-probe accuracy on the final-round model's ``on`` representation.

    - ``on="features"``: the classifier's input. For FedPFT that is f' = τ([φ(x), p_κ])₀, which is
      what ICLR Table 5 and the "p_κ" row of ICLR Table 6 measure (FedPFT+Con's Probe values in
      ICLR Table 1 equal that row).
    - ``on="phi"``: the raw extractor output, Table 6's "None" row. A personalised model that does
      not expose ``.phi`` separately (every baseline: φ *is* the classifier input) falls back to
      ``.features``, so both rows coincide there.

    The recipe and seeding are the mismatch probe's: ``linear_probe(r, "features", cfg)`` reproduces
    the ``probe`` column of ``mismatch_probe(r, cfg)``.
    """
    method, clients, state = restore(result, device)
    return linear_probe_state(method, clients, state, on, cfg, client_ids)
