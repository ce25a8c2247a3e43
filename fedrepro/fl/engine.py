"""The in-process FL simulator: rounds, seeded sampling, persistent client state, full evaluation.

One loop, independent of any method (see :mod:`fedrepro.fl.method` for the steps it calls).
Evaluation protocol (stated once, used for every method):

- every ``eval_every`` rounds and at the last round, **every** client (sampled or not, held-out
  included) evaluates its personalised model — the method's ``evaluate`` after that round's
  aggregation and download — on its own test split;
- a client without test data has no accuracy: it is left out of every mean (not counted as 0%)
  and counted in ``n_clients_no_test`` (round rows and summary);
- a round's score is the unweighted mean over participating clients (``acc_mean``); the
  sample-weighted mean, the std across clients and min/max are logged beside it, and held-out
  clients are averaged separately (``heldout_acc_mean``); each client also logs its macro-F1 over
  the classes of its test split and any metric its method reports in ``EvalResult.extra``, each
  averaged over participating clients as ``<name>_mean`` without the engine knowing its name;
- with a ``global_test`` split, the method's global model (if it has one) is also scored on it
  (``global_acc``); a paper's own combinations of these (pFedCSPC's I_local and HM) live in its
  package;
- the summary reports both the **best round** (max of ``acc_mean`` over evaluated rounds, the
  FedPFT papers' rule, ICLR §4.1) and the **final round**, named as such.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np
import torch
from tqdm.auto import tqdm

from ..errors import TrainingDivergedError
from .client_data import ClientData
from .local import evaluate_model
from .method import Method, State
from .seeding import derive_seed, numpy_rng, seeded_scope, torch_gen

# Per-client columns that are not metrics to average (the rest are: f1 and each method's extras).
_CLIENT_KEYS = ("round", "client", "acc", "loss", "n_test", "held_out")
# Round columns the summary treats on their own (the best round is chosen by acc_mean).
_ROUND_KEYS = ("round", "n_sampled", "train_loss", "loss_mean", "time_eval_s", "time_train_s",
               "acc_mean", "acc_weighted", "acc_std", "acc_min", "acc_max", "heldout_acc_mean",
               "n_clients_no_test")


@dataclass
class SimState:
    """Everything needed to resume: the checkpoint holds exactly this."""

    next_round: int
    shared: State
    server_state: State
    client_states: list[State]
    client_rows: list[dict] = field(default_factory=list)
    round_rows: list[dict] = field(default_factory=list)


def clients_per_round(n: int, participation: float) -> int:
    """How many of ``n`` candidate clients a round trains: ``max(1, round(rate·n))``, all at rate 1."""
    return n if participation >= 1.0 else max(1, int(round(participation * n)))


def sample_clients(seed: int, rnd: int, candidates: Sequence[int], participation: float) -> list[int]:
    """Seeded client sampling: :func:`clients_per_round` distinct clients, sorted."""
    n = len(candidates)
    m = clients_per_round(n, participation)
    if m == n:
        return list(candidates)
    chosen = numpy_rng(seed, "sample", rnd).choice(np.asarray(candidates), size=m, replace=False)
    return sorted(int(c) for c in chosen)


def init_state(method: Method, num_clients: int, seed: int) -> SimState:
    init_seed = derive_seed(seed, "init")
    with seeded_scope(init_seed):
        shared, server_state = method.init_server(init_seed)
        states = [method.init_client(cid, init_seed) for cid in range(num_clients)]
    return SimState(next_round=0, shared=shared, server_state=server_state, client_states=states)


def evaluate_all(method: Method, state: SimState, clients: Sequence[ClientData], seed: int, rnd: int) -> list[dict]:
    rows = []
    for data in clients:
        with seeded_scope(derive_seed(seed, "eval", rnd, data.cid)):
            res = method.evaluate(state.shared, state.client_states[data.cid], data,
                                  torch_gen(seed, "eval", rnd, data.cid))
        rows.append(client_row(rnd, data.cid, res, data.held_out))
    return rows


def client_row(rnd: int, cid: int, res, held_out: bool) -> dict:
    """A client's row of ``clients.jsonl`` from its :class:`~fedrepro.fl.method.EvalResult`. A client
    without test data has no score: its accuracy, loss and F1 are NaN (stored empty), not 0 of 0."""
    nan = float("nan")
    scored = res.total > 0
    return {"round": rnd, "client": cid, "acc": res.acc if scored else nan, "loss": res.loss if scored else nan,
            "f1": res.f1_macro if scored else nan, **res.extra, "n_test": res.total, "held_out": held_out}


def evaluate_global(method: Method, state: SimState, test: ClientData, seed: int, rnd: int) -> dict[str, float]:
    """The method's global model on the whole test split (``global_acc``; nothing when it has no
    global model), and each of its other versions (``global_acc_<name>``, :meth:`Method.global_variants`)."""
    out: dict[str, float] = {}
    with seeded_scope(derive_seed(seed, "eval_global", rnd)):
        model = method.global_model(state.shared, state.server_state)
        if model is None:
            return out
        out["global_acc"] = evaluate_model(model, test).acc
        for name, variant in method.global_variants(state.shared, state.server_state):
            out[f"global_acc_{name}"] = evaluate_model(variant, test).acc
    return out


def _nanmean(values: list[float]) -> float:
    v = [x for x in values if x == x]
    return float(np.mean(v)) if v else float("nan")


def summarize_round(rows: list[dict]) -> dict[str, float]:
    # A client with no test data scores 0 correct of 0: averaging that 0 in would bias every mean
    # down, so it is left out and counted instead.
    scored = [r for r in rows if r["n_test"] > 0]
    part = [r for r in scored if not r["held_out"]]
    held = [r for r in scored if r["held_out"]]
    acc = np.array([r["acc"] for r in part], dtype=np.float64)
    n = np.array([r["n_test"] for r in part], dtype=np.float64)
    nan = float("nan")
    out = {
        "acc_mean": float(acc.mean()) if part else nan,
        "acc_weighted": float((acc * n).sum() / max(n.sum(), 1.0)) if part else nan,
        "acc_std": float(acc.std()) if part else nan,
        "acc_min": float(acc.min()) if part else nan,
        "acc_max": float(acc.max()) if part else nan,
        "heldout_acc_mean": float(np.mean([r["acc"] for r in held])) if held else nan,
        "loss_mean": float(np.mean([r["loss"] for r in part])) if part else nan,
        "n_clients_no_test": len(rows) - len(scored),
    }
    names = dict.fromkeys(k for r in part for k in r if k not in _CLIENT_KEYS)
    for k in names:
        out[f"{k}_mean"] = _nanmean([r.get(k, float("nan")) for r in part])
    return out


def check_finite(shared: dict, rnd: int) -> None:
    """Stop at the first round whose shared state holds NaN/inf, instead of training on garbage
    (or failing later in an unrelated library call)."""
    bad = [k for k, v in shared.items()
           if isinstance(v, torch.Tensor) and v.is_floating_point() and not bool(torch.isfinite(v).all())]
    if bad:
        raise TrainingDivergedError(
            rnd + 1, f"round {rnd + 1}: the shared state has NaN/inf values in {', '.join(bad[:3])}"
            f"{' ...' if len(bad) > 3 else ''}; the run diverged. Lower train.lr (or the method's loss "
            "weights) and run again; the run folder keeps the rounds before this one.")


def _train_round(method: Method, state: SimState, clients: Sequence[ClientData], sampled: list[int],
                 seed: int, rnd: int) -> tuple[list, dict[str, list[float]]]:
    """One round's client updates and aggregation, in place on ``state``. Returns the updates and
    each client's ``train_loss`` and named loss parts (``loss_*``, e.g. FedPFT+Con's L_CE and L_Con)."""
    updates, losses = [], {}
    for cid in sampled:
        with seeded_scope(derive_seed(seed, "client", rnd, cid, 1)):
            upd = method.client_update(state.shared, state.client_states[cid], clients[cid],
                                       torch_gen(seed, "client", rnd, cid), rnd)
        state.client_states[cid] = upd.state
        updates.append(upd)
        for k, v in upd.metrics.items():
            if k == "train_loss" or k.startswith("loss_"):
                losses.setdefault(k, []).append(float(v))
    with seeded_scope(derive_seed(seed, "server", rnd)):
        state.shared, state.server_state = method.aggregate(state.shared, updates, state.server_state, rnd)
    check_finite(state.shared, rnd)
    return updates, losses


def loss_columns(losses: dict[str, list[float]]) -> dict[str, float]:
    """The round's mean over the clients that trained: ``train_loss`` always, and each loss part as
    ``train_<part>`` (a part some clients did not report is averaged over those that did). The
    curves of ICLR Fig. 9 (L_Con and L_CE of FedPFT+Con and of the two-stage baseline) read them."""
    out = {"train_loss": float(np.mean(losses["train_loss"])) if losses.get("train_loss") else float("nan")}
    out.update({f"train_{k}": float(np.mean(v)) for k, v in losses.items() if k != "train_loss"})
    return out


def simulate(method: Method, clients: Sequence[ClientData], *, seed: int, rounds: int,
             participation: float = 1.0, eval_every: int = 1, state: SimState | None = None,
             checkpoint: Callable[[SimState], None] | None = None, checkpoint_every: int = 1,
             progress: bool = True, desc: str = "rounds",
             on_round_end: Callable[[SimState], Any] | None = None,
             global_test: ClientData | None = None) -> SimState:
    """Run rounds ``state.next_round..rounds-1`` and return the final state.

    Randomness per (round, client) comes from generators derived from ``seed``, so resuming from a
    checkpoint reproduces the uninterrupted run bit for bit (tests/fl/test_engine.py checks it).
    """
    if state is None:
        state = init_state(method, len(clients), seed)
    candidates = [c.cid for c in clients if not c.held_out]
    bar = tqdm(range(state.next_round, rounds), desc=desc, disable=not progress, leave=False,
               initial=state.next_round, total=rounds)
    for rnd in bar:
        t0 = time.perf_counter()
        sampled = sample_clients(seed, rnd, candidates, participation)
        try:
            updates, losses = _train_round(method, state, clients, sampled, seed, rnd)
        except TrainingDivergedError as err:
            # The caller may store the rounds before this one (experiment.run does).
            err.state = state  # type: ignore[attr-defined]
            err.round = err.round or rnd + 1
            raise
        t_train = time.perf_counter() - t0
        row: dict[str, Any] = {"round": rnd + 1, "n_sampled": len(sampled), **loss_columns(losses)}
        if (rnd + 1) % eval_every == 0 or rnd + 1 == rounds:
            t1 = time.perf_counter()
            rows = evaluate_all(method, state, clients, seed, rnd + 1)
            state.client_rows.extend(rows)
            row.update(summarize_round(rows))
            if global_test is not None:
                row.update(evaluate_global(method, state, global_test, seed, rnd + 1))
            row["time_eval_s"] = time.perf_counter() - t1
            bar.set_postfix(acc=f"{row['acc_mean']:.3f}")
        row["time_train_s"] = t_train
        state.round_rows.append(row)
        state.next_round = rnd + 1
        if checkpoint is not None and (state.next_round % checkpoint_every == 0 or state.next_round == rounds):
            checkpoint(state)
        if on_round_end is not None:
            on_round_end(state)
    bar.close()
    return state


def unscored_summary(round_rows: list[dict]) -> dict[str, Any]:
    """The summary of a run that stopped before any evaluated round (it diverged in its first
    rounds): every accuracy NaN, so that it ranks below any run that was scored."""
    nan = float("nan")
    out: dict[str, Any] = {"rounds": len(round_rows), "best_round": 0,
                           "selection_rule": "none: no round was evaluated"}
    for k in ("acc_mean", "acc_weighted", "acc_std", "acc_min", "heldout_acc_mean"):
        out[f"best_{k}"] = out[f"final_{k}"] = nan
    out["time_train_s"] = float(sum(r["time_train_s"] for r in round_rows))
    out["time_eval_s"] = 0.0
    return out


def summarize_run(round_rows: list[dict]) -> dict[str, Any]:
    """Best-round and final-round values, each named as such (the selection rule is in the name)."""
    evaluated = [r for r in round_rows if "acc_mean" in r]
    if not evaluated:
        raise ValueError("no evaluated round to summarise")
    best = max(evaluated, key=lambda r: (r["acc_mean"], -r["round"]))
    final = evaluated[-1]
    out: dict[str, Any] = {"rounds": round_rows[-1]["round"], "best_round": best["round"],
                           "selection_rule": "best = max over evaluated rounds of the unweighted mean client accuracy"}
    for k in ("acc_mean", "acc_weighted", "acc_std", "acc_min", "heldout_acc_mean"):
        out[f"best_{k}"] = best[k]
        out[f"final_{k}"] = final[k]
    if "n_clients_no_test" in final:  # the partition is fixed, so the count is the same every round
        out["n_clients_no_test"] = final["n_clients_no_test"]
    # Every other metric: its own best round (max over rounds) and its final value.
    others = dict.fromkeys(k for r in evaluated for k in r if k not in _ROUND_KEYS and not k.startswith("train_loss_"))
    for k in others:
        vals = [r[k] for r in evaluated if k in r and r[k] == r[k]]
        if vals:
            out[f"best_{k}"] = float(max(vals))
            out[f"final_{k}"] = float(final.get(k, float("nan")))
    out["time_train_s"] = float(sum(r["time_train_s"] for r in round_rows))
    out["time_eval_s"] = float(sum(r.get("time_eval_s", 0.0) for r in round_rows))
    return out
