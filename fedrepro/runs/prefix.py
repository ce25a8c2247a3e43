"""Runs that share a prefix share it: a run starts from a stored run of the same config with fewer rounds.

Two configs that differ only in ``train.rounds`` train the same first rounds: every random draw of the
engine is derived from the seed, the round and the client (:mod:`fedrepro.fl.seeding`), so the state
after round ``r`` of a longer run is the final state of the run with ``r`` rounds, and a run resumed
from it reproduces the longer run bit for bit (as a resume from a checkpoint does). With
``FEDREPRO_SHARE_PREFIX=1`` a run about to start from round 0 looks for the longest such stored run
and starts from its final state, rounds and client rows instead (``meta.json`` records it as
``started_from``). Off by default.

A stored run ``r`` rounds long is a prefix only when nothing in it depended on its length:

- ``r`` is a multiple of ``train.eval_every`` (the last round is always evaluated: a run cut at
  another round holds an evaluation the longer run does not);
- the method does not read ``train.rounds`` (FedSoup's soup phase, FedProc's linear α schedule,
  the two-stage FedPFT baseline's switch: :func:`reads_total_rounds` looks for it in the method's
  classes, conservatively);
- it did not diverge, is not stale, and was made on the same partition.

A run that stops when flat (``train.stop_when_flat``) trains its rounds as the same config without
the rule does until it stops, and the rule cannot stop it before ``train.flat_from``: a stored run
of that config without the rule, with at most ``flat_from`` rounds, is a prefix of it too. Such a
run whose curve is flat at ``flat_from`` then ends there, as the stored run did. The other way
round, a stored run of the same config with the rule that stopped before the end is a prefix of the
run without it (a table that reads the final models trains the full budget of a config that another
table stops when flat).

The per-round timings of the rounds it shares are the stored run's (the time it took to train them).

A run can only start from a prefix that is stored when it starts. So ``fedrepro reproduce``, with
sharing on, trains each run after the runs of the same pass that may be its prefix
(:func:`waits_for`; the pool's ``after``): after them, not instead of them, and whether they
finished or failed.
"""
from __future__ import annotations

import ast
import contextlib
import inspect
import sys
from functools import lru_cache
from typing import Callable, Mapping

from ..config import RunConfig
from ..errors import ConfigError
from ..env.settings import env_flag
from ..fl.engine import SimState
from ..methods import METHODS
from .store import RunResult, RunStore, read_jsonl

ENV_SHARE = "FEDREPRO_SHARE_PREFIX"


def sharing() -> bool:
    """Whether runs start from a stored prefix (``FEDREPRO_SHARE_PREFIX`` a yes value)."""
    return env_flag(ENV_SHARE)


@lru_cache(maxsize=None)
def _module_reads_rounds(module: str) -> bool:
    tree = ast.parse(inspect.getsource(sys.modules[module]))
    return any(isinstance(n, ast.Attribute) and n.attr == "rounds" for n in ast.walk(tree))


def reads_total_rounds(method) -> bool:
    """Whether any module defining a class of ``method`` (its MRO within fedrepro; ``method`` an
    instance or its class) reads an attribute named ``rounds`` (``train.rounds``): then its rounds
    depend on the run's length."""
    cls = method if isinstance(method, type) else type(method)
    return any(_module_reads_rounds(c.__module__) for c in cls.__mro__
               if c.__module__.split(".")[0] == "fedrepro")


def candidates(cfg: RunConfig, method) -> list[RunConfig]:
    """The configs whose stored runs may be prefixes of ``cfg``'s (the module's conditions on the
    configs; the store's are :func:`donor`'s), the longest first: ``cfg`` with fewer rounds (an
    evaluated round); for a run that stops when flat, no fewer than ``train.flat_from`` (below it the
    config is not valid), and ``cfg`` without the rule up to ``flat_from`` rounds; for a run without
    the rule, ``cfg`` with it (its twin, a prefix where the rule stopped it early)."""
    t = cfg.train
    if reads_total_rounds(method):
        return []
    out = []
    if not t.stop_when_flat and t.flat_from < t.rounds:  # else the rule cannot stop its twin early
        with contextlib.suppress(ConfigError):
            out.append(cfg.replace(**{"train.stop_when_flat": True}))
    fixed = cfg.replace(**{"train.stop_when_flat": False}) if t.stop_when_flat else None
    for r in range(t.rounds, 0, -1):
        if r % t.eval_every:
            continue
        if fixed is not None and r <= t.flat_from:
            out.append(fixed.replace(**{"train.rounds": r}))
        if r < t.rounds and (fixed is None or r >= t.flat_from):
            out.append(cfg.replace(**{"train.rounds": r}))
    return out


def donor(cfg: RunConfig, store: RunStore, method, part_hash: str,
          stale: Callable[[RunConfig], bool]) -> RunResult | None:
    """The stored run among :func:`candidates` that trained the most rounds of ``cfg``'s (the first
    of equals) and is a prefix of it: finished, not stale, not diverged, on the same partition; a
    twin with the rule only where the rule stopped it before ``cfg``'s last round. None if there is
    none."""
    best = None
    for c in candidates(cfg, method):
        if store.status(c) != "done" or stale(c):
            continue
        res = store.load(c)
        if res.summary.get("diverged_round") is not None or res.meta.get("partition_hash") != part_hash:
            continue
        twin = c.train.stop_when_flat and not cfg.train.stop_when_flat
        if twin and not res.summary.get("stopped_early"):
            continue  # the twin trained every round: it is the run itself, not a prefix
        if best is None or int(res.summary["rounds"]) > int(best.summary["rounds"]):
            best = res
        if not twin:  # the other candidates come longest first: none after this one is longer
            return best
    return best


def waits_for(runs: Mapping[str, RunConfig]) -> dict[str, frozenset[str]]:
    """For each of ``runs`` (by hash), the others among them that may be its prefix
    (:func:`candidates`): a pass that trains them first lets it start from one. Empty unless
    prefix sharing is on."""
    if not sharing():
        return {}
    out = {}
    for h, cfg in runs.items():
        found = frozenset(c.hash() for c in candidates(cfg, METHODS.get(cfg.method.name))) & runs.keys()
        if found:
            out[h] = found
    return out


def _nan(row: dict) -> dict:
    """A stored row as the engine held it: JSON's null back to NaN (the store writes NaN as null)."""
    return {k: float("nan") if v is None else v for k, v in row.items()}


def start_state(res: RunResult) -> SimState:
    """The engine's state after the stored run's last round (on the CPU): its final state, round and
    client rows, and the next round."""
    res.verify(deep=True)
    final = res.final_state()
    rounds = [_nan(r) for r in read_jsonl(res.path / "rounds.jsonl")]
    clients = [_nan(r) for r in read_jsonl(res.path / "clients.jsonl")]
    return SimState(next_round=int(res.summary["rounds"]), shared=final["shared"], server_state=final["server_state"],
                    client_states=final["client_states"], client_rows=clients, round_rows=rounds)
