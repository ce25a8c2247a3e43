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
import inspect
import json
import logging
import os
import sys
from functools import lru_cache
from typing import Callable, Iterable, Mapping

from ..config import RunConfig, from_dict
from ..errors import ConfigError, CorruptCacheError, FedreproError
from ..env.settings import env_flag
from ..fl.engine import SimState
from ..methods import METHODS
from .store import RunResult, RunStore, read_json

log = logging.getLogger("fedrepro")

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


# The fields in which a run and its prefixes differ: the rounds and the early stop (whose window and
# first round are hashed only with it). Every other hashed field of a prefix is the run's.
_ROUND_FIELDS = ("rounds", "stop_when_flat", "flat_window", "flat_from")


def family(cfg: RunConfig) -> str:
    """What a run and its prefixes share: the config as it is hashed, but for :data:`_ROUND_FIELDS`."""
    d = cfg.hashed_dict()
    for k in _ROUND_FIELDS:
        d["train"].pop(k, None)
    return json.dumps(d, sort_keys=True, separators=(",", ":"), default=str)


def _relation(cfg: RunConfig, c: RunConfig) -> tuple[int, int, int] | None:
    """How ``c`` (of ``cfg``'s :func:`family`) may be a prefix of ``cfg``, as the key that orders the
    candidates (the twin first, then the most rounds first, the fixed run before the run with the
    rule at equal rounds), or None when it may not be one (the module's conditions on the configs)."""
    t, u = cfg.train, c.train
    if u.stop_when_flat and not t.stop_when_flat:  # the twin, a prefix where the rule stopped it early
        ok, kind = u.rounds == t.rounds and t.flat_from < t.rounds, 0
    elif t.stop_when_flat and not u.stop_when_flat:  # without the rule, up to flat_from rounds
        ok, kind = u.rounds % t.eval_every == 0 and u.rounds <= t.flat_from, 1
    else:  # fewer rounds (an evaluated round); with the rule, no fewer than flat_from
        ok, kind = (u.rounds < t.rounds and u.rounds % t.eval_every == 0
                    and (not t.stop_when_flat or u.rounds >= t.flat_from)), 2
    if not ok:
        return None
    # Exactly cfg with c's rounds and rule (the same flat_* where hashed): c's hash, or no prefix.
    try:
        same = cfg.replace(**{"train.rounds": u.rounds, "train.stop_when_flat": u.stop_when_flat}).hash() == c.hash()
    except ConfigError:
        return None
    return (0 if kind == 0 else 1, -u.rounds, 0 if kind == 1 else 1) if same else None


def candidates(cfg: RunConfig, method, among: Iterable[RunConfig]) -> list[RunConfig]:
    """The configs of ``among`` whose runs may be prefixes of ``cfg``'s (the module's conditions on the
    configs; the store's are :func:`donor`'s), the longest first: ``cfg`` with fewer rounds (an
    evaluated round); for a run that stops when flat, no fewer than ``train.flat_from`` (below it the
    config is not valid), and ``cfg`` without the rule up to ``flat_from`` rounds; for a run without
    the rule, ``cfg`` with it (its twin, a prefix where the rule stopped it early).

    The configs that exist (stored, or in a pass) are matched against ``cfg``, rather than every
    shorter config listed: the cost does not grow with ``train.rounds``."""
    if reads_total_rounds(method):
        return []
    mine = family(cfg)
    found = [(key, c) for c in among if family(c) == mine and (key := _relation(cfg, c)) is not None]
    return [c for _, c in sorted(found, key=lambda kc: kc[0])]


def prefixes_among(runs: Mapping[str, RunConfig]) -> dict[str, list[RunConfig]]:
    """For each of ``runs`` (by hash), :func:`candidates` among the others, the longest first (those
    with any). Each config's :func:`family` is worked out once, so a pass of thousands of runs takes
    seconds."""
    groups: dict[str, list[tuple[str, RunConfig]]] = {}
    for h, cfg in runs.items():
        groups.setdefault(family(cfg), []).append((h, cfg))
    out = {}
    for members in groups.values():
        if len(members) < 2:
            continue
        for h, cfg in members:
            if reads_total_rounds(METHODS.get(cfg.method.name)):
                continue
            found = [(key, c) for g, c in members if g != h and (key := _relation(cfg, c)) is not None]
            if found:
                out[h] = [c for _, c in sorted(found, key=lambda kc: kc[0])]
    return out


# The stored config of each run folder of a runs folder, read once per process (a folder's name is
# its config's hash, so what it holds does not change), with the fields that rule most configs out
# at once (:func:`_glance`); None for a folder that is not a run.
_SEEN: dict[str, dict[str, tuple[tuple, dict] | None]] = {}


def _glance(c: dict) -> tuple:
    return tuple(str((c.get(a) or {}).get(b) if b else c.get(a)) if isinstance(c.get(a) or {}, dict) else None
                 for a, b in (("method", "name"), ("data", "dataset"), ("model", "name"), ("seed", None)))


def stored_configs(store: RunStore, cfg: RunConfig) -> list[RunConfig]:
    """The configs of the runs stored in ``store`` that may share ``cfg``'s :func:`family` (same
    method, dataset, model and seed): read from the folders' ``config.json`` (each once per process),
    so the cost grows with the runs stored, never with ``train.rounds``."""
    root = store.root
    if not root.is_dir():
        return []
    seen = _SEEN.setdefault(str(root.resolve()), {})
    want = _glance(cfg.to_dict())
    out = []
    with os.scandir(root) as it:
        names = [e.name for e in it if not e.name.startswith(".")]
    for name in names:
        if name not in seen:
            try:
                stored = read_json(root / name / "config.json")
            except (OSError, CorruptCacheError):
                continue  # not (yet) a run: looked at again next time
            ok = isinstance(stored, dict) and isinstance(stored.get("config"), dict)
            seen[name] = (_glance(stored["config"]), stored["config"]) if ok else None
        if seen[name] is None or seen[name][0] != want:
            continue
        try:
            c = from_dict(seen[name][1])
        except (FedreproError, KeyError, TypeError, ValueError):
            continue
        if c.hash() == name:
            out.append(c)
    return out


def donor(cfg: RunConfig, store: RunStore, method, part_hash: str,
          stale: Callable[[RunConfig], bool]) -> tuple[RunResult, SimState] | None:
    """The stored run among :func:`candidates` that trained the most rounds of ``cfg``'s (the first
    of equals) and is a prefix of it: finished, not stale, not diverged, on the same partition; a
    twin with the rule only where the rule stopped it before ``cfg``'s last round. With it, the
    engine's state after its last round (:func:`start_state`), checked and read before the new run
    is begun: a candidate that fails a check (a file against its recorded sha256, a state that is not
    tensors, or not a run of ``cfg``'s clients) is passed over with a warning, for the next longest.
    None if there is none (the run then starts from round 0)."""
    def usable(c: RunConfig) -> RunResult | None:
        try:
            if store.status(c) != "done" or stale(c):
                return None
            res = store.load(c)
        except CorruptCacheError as e:
            log.warning("fedrepro: passed over %s as a prefix of run %s: %s", store.path(c), cfg.hash(), e)
            return None
        if res.summary.get("diverged_round") is not None or res.meta.get("partition_hash") != part_hash:
            return None
        return res

    def loaded(res: RunResult) -> tuple[RunResult, SimState] | None:
        try:
            return res, start_state(res, cfg)
        except CorruptCacheError as e:
            log.warning("fedrepro: prefix %s of run %s is damaged, not started from: %s", res.path, cfg.hash(), e)
            return None

    twin = None  # the twin that stopped early: before any shorter run, after any longer one
    for c in candidates(cfg, method, stored_configs(store, cfg)):
        res = usable(c)
        if res is None:
            continue
        if c.train.stop_when_flat and not cfg.train.stop_when_flat:
            if res.summary.get("stopped_early"):  # else it trained every round: the run itself, not a prefix
                twin = res
            continue
        if twin is not None and int(twin.summary["rounds"]) >= int(res.summary["rounds"]):
            found, twin = loaded(twin), None
            if found:
                return found
        found = loaded(res)
        if found:  # else damaged: the next shorter one
            return found
    return loaded(twin) if twin is not None else None


def waits_for(runs: Mapping[str, RunConfig]) -> dict[str, frozenset[str]]:
    """For each of ``runs`` (by hash), the others among them that may be its prefix
    (:func:`candidates`): a pass that trains them first lets it start from one. Empty unless
    prefix sharing is on."""
    if not sharing():
        return {}
    return {h: frozenset(c.hash() for c in found) for h, found in prefixes_among(runs).items()}


def _nan(row: dict) -> dict:
    """A stored row as the engine held it: JSON's null back to NaN (the store writes NaN as null)."""
    return {k: float("nan") if v is None else v for k, v in row.items()}


def start_state(res: RunResult, cfg: RunConfig | None = None) -> SimState:
    """The engine's state after the stored run's last round (on the CPU): its final state, round and
    client rows, and the next round. Each file is read once and checked against its recorded sha256
    (:meth:`RunResult.verify` checks the rest), the state loads as tensors and plain values only, and
    it must be a run of ``cfg``'s clients with a row per round it trained; else CorruptCacheError."""
    res.verify()
    final = res.final_state()
    rounds = [_nan(r) for r in res.checked_rows("rounds.jsonl")]
    clients = [_nan(r) for r in res.checked_rows("clients.jsonl")]
    n = int(res.summary["rounds"])
    f = res.path / "final_state.pt"
    if not isinstance(final["shared"], dict) or not isinstance(final["server_state"], dict) \
            or not all(isinstance(s, dict) for s in final["client_states"]):
        raise CorruptCacheError(f"run file {f} does not hold dicts of a run's state; delete the folder {res.path}")
    if cfg is not None and len(final["client_states"]) != cfg.data.num_clients:
        raise CorruptCacheError(f"run file {f} holds {len(final['client_states'])} clients' states, not the "
                                f"{cfg.data.num_clients} of its config; delete the folder {res.path}")
    if [r.get("round") for r in rounds] != list(range(1, n + 1)):
        raise CorruptCacheError(f"run file {res.path / 'rounds.jsonl'} does not hold rounds 1 to {n}; delete the "
                                f"folder {res.path}")
    return SimState(next_round=n, shared=final["shared"], server_state=final["server_state"],
                    client_states=final["client_states"], client_rows=clients, round_rows=rounds)
