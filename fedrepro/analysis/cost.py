"""Communication and computation cost per round, from real tensors and measured times.

FedPFT's communication table (FedPFT (ICLR) App. N, Table 15; arXiv App. I) lists the parameters
each client uploads per module (φ, τ, h_κ, h_ρ) and the overhead over FedAvg (+20–23%); its
time-per-round table (ICLR App. M, Table 14) puts FedPFT within 3% of FedAvg. Here both come from
the implementation itself: element counts of the tensors a client uploads, and the simulator's
per-round timings, so a table in a notebook cannot drift from the code.
"""
from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd
import torch

from ..errors import ConfigError
from ..fl.seeding import seeded_scope
from ..models import count_params
from ..models.ftm import PROMPTS_KAPPA, PROMPTS_RHO
from ..runs.pipeline import make_method_for

if TYPE_CHECKING:
    from ..config import RunConfig


def _flatten(state: Mapping[str, Any], prefix: str = "") -> dict[str, torch.Tensor]:
    out: dict[str, torch.Tensor] = {}
    for k, v in state.items():
        name = f"{prefix}{k}"
        if isinstance(v, torch.Tensor):
            out[name] = v
        elif isinstance(v, Mapping):
            out.update(_flatten(v, name + "."))
    return out


def _method_groups(method, shared: Mapping[str, Any]) -> dict[str, list[str]]:
    fn = getattr(method, "module_groups", None)
    if fn is None:
        return {}
    # Accept both ``module_groups()`` and ``module_groups(shared)``.
    try:
        takes_arg = len(inspect.signature(fn).parameters) >= 1
    except (TypeError, ValueError):
        takes_arg = False
    groups = fn(shared) if takes_arg else fn()
    if not isinstance(groups, Mapping):
        raise TypeError(f"{type(method).__name__}.module_groups() must return a mapping group -> keys, "
                        f"got {type(groups).__name__}")
    return {str(g): [str(k) for k in keys] for g, keys in groups.items()}


def _matches(key: str, entries: Iterable[str]) -> bool:
    return any(key == e or key.startswith(e if e.endswith(".") else e + ".") for e in entries)


def upload_params(method, shared: Mapping[str, Any] | None = None, *, float_only: bool = False) -> dict[str, int]:
    """Elements a client uploads per round, grouped by module: ``{"features": n, "head": n, ...}``.

    - ``shared``: the tensors uploaded. Default: the method's freshly initialised broadcast
      (``init_server(0)``): every FedAvg-style method uploads exactly the keys it aggregates into
      ``shared``, and counts do not depend on values. Pass a real ``ClientUpdate.upload`` to count
      a method whose upload differs from its broadcast.
    - Grouping: a method may define ``module_groups()`` (or ``module_groups(shared)``) returning
      ``{group: [state key or key prefix, ...]}``; keys it does not cover, and every key of a method
      without it, are grouped by their top-level prefix (``features.``, ``head.``, ``ftm.``...).
    - Every tensor element counts, buffers included (BN running statistics travel with the upload);
      ``float_only`` drops integer tensors such as BN's ``num_batches_tracked``.

    Personal entries (FedPer's head, FedBN's BN layers, FedPFT's prompts) are not in ``shared``,
    so they are not counted.
    """
    if shared is None:
        # Seeded scope: counting must not shift the caller's global RNG stream.
        with seeded_scope(0):
            shared, _ = method.init_server(0)
    tensors = _flatten(shared)
    groups = _method_groups(method, shared)
    out: dict[str, int] = {g: 0 for g in groups}
    for key, t in tensors.items():
        if float_only and not (t.is_floating_point() or t.is_complex()):
            continue
        group = next((g for g, entries in groups.items() if _matches(key, entries)), key.split(".", 1)[0])
        out[group] = out.get(group, 0) + int(t.numel())
    return out


# State-dict prefix -> the module's name in FedPFT's communication table.
MODULE_NAMES = {"features": "phi", "ftm": "tau", "head": "h_kappa", "proj": "h_rho", "linear": "linear"}


def communication_cost(method, shared: Mapping[str, Any] | Iterable[str] | None = None,
                       include_buffers: bool = False) -> dict[str, int]:
    """Scalars a client uploads per round, by module: ``phi``, ``tau``, ``h_kappa``, ``h_rho``...

    Counts the entries of ``shared`` (a state or its keys; default: the method's shared keys) in
    ``method.model``, grouped as :func:`upload_params` groups them and named as in FedPFT's table;
    parameters only, as the paper counts them, unless ``include_buffers`` (BN running statistics,
    which FedAvg also uploads). Adds ``total``. Works for any :class:`~fedrepro.methods.base.ModelMethod`.
    """
    model = method.model
    params = dict(model.named_parameters())
    tensors = model.state_dict()
    keys = method.shared_keys if shared is None else shared
    counted = {k: tensors[k] for k in keys if include_buffers or k in params}
    out = {MODULE_NAMES.get(g, g): n for g, n in upload_params(method, counted).items()}
    out["total"] = sum(out.values())
    return out


def module_param_counts(method) -> dict[str, int]:
    """Parameter counts of every module of a FedPFT method's network (uploaded or not): ``phi``,
    ``h_kappa``, and ``tau``, ``h_rho``, ``linear``, ``prompts_kappa``, ``prompts_rho`` where present."""
    net = method.model
    out = {"phi": count_params(net.features), "h_kappa": count_params(net.head)}
    if net.ftm is not None:
        out["tau"] = count_params(net.ftm)
    if net.proj is not None:
        out["h_rho"] = count_params(net.proj)
    if net.linear is not None:
        out["linear"] = count_params(net.linear)
    for key in (PROMPTS_KAPPA, PROMPTS_RHO):
        p = getattr(net, key)
        if p is not None:
            out[key] = p.numel()
    return out


def _rounds_table(result) -> pd.DataFrame:
    rounds = getattr(result, "rounds", result)
    if not isinstance(rounds, pd.DataFrame):
        raise ConfigError(f"time_per_round needs a RunResult or its rounds DataFrame, got {type(result).__name__}")
    return rounds


def time_per_round(result, skip_first: int = 0) -> dict[str, float]:
    """Mean wall-clock seconds per round from ``result.rounds`` (the simulator's own timings).

    - ``train_s``: client updates of all sampled clients (sequential in the simulator) plus
      aggregation; ``train_s_per_client`` divides each round by its number of sampled clients.
    - ``eval_s``: the evaluation of all clients, over the rounds that were evaluated.
    - ``skip_first`` drops warm-up rounds (first-call allocation, CUDA kernels) from the means.
    """
    if not isinstance(skip_first, int) or skip_first < 0:
        raise ConfigError(f"skip_first={skip_first!r}; valid: an integer >= 0")
    r = _rounds_table(result).iloc[skip_first:]
    if not len(r):
        raise ConfigError(f"skip_first={skip_first} leaves no rounds to time")
    train = r["time_train_s"].to_numpy(dtype=np.float64)
    evals = r["time_eval_s"].dropna().to_numpy(dtype=np.float64) if "time_eval_s" in r else np.zeros(0)
    per_client = train / r["n_sampled"].clip(lower=1).to_numpy(dtype=np.float64) if "n_sampled" in r else train
    return {
        "rounds": int(len(r)),
        "train_s": float(train.mean()),
        "train_s_std": float(train.std()),
        "train_s_per_client": float(per_client.mean()),
        "eval_s": float(evals.mean()) if len(evals) else float("nan"),
        "total_train_s": float(train.sum()),
    }


def communication_table(configs: dict[str, RunConfig], methods: Sequence[str], num_classes: int,
                        in_channels: int = 3, image_size: int = 32) -> pd.DataFrame:
    """Scalars uploaded per client per round, by module, for each (model config, method).

    Counts come from the methods' real shared parameters (:func:`communication_cost`), built for
    data of the given shape without loading any. ``overhead_pct`` is relative to FedAvg on the same
    model, as in FedPFT's communication table (ICLR App. N, Table 15).
    """
    rows = []
    for label, cfg in configs.items():
        for name in ["fedavg", *[m for m in methods if m != "fedavg"]]:
            method = make_method_for(cfg.replace(**{"method.name": name}), num_classes, in_channels, image_size)
            rows.append({"model": label, "method.name": name, **communication_cost(method)})
    table = pd.DataFrame(rows).fillna(0)
    table = table.astype({c: int for c in table.columns if c not in ("model", "method.name")})
    base = table[table["method.name"] == "fedavg"].set_index("model")["total"]
    table["overhead_pct"] = 100 * (table["total"] / table["model"].map(base) - 1)
    return table
