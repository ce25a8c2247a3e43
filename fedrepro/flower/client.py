"""The ``ClientApp``: a SuperNode hosting one or more of a run's clients.

Each message names the run (its resolved config), the round and the clients to serve. The node
builds the run's data and method once per process (a Ray actor in the simulation keeps them between
messages) and keeps every client's persistent state in Flower's per-node ``Context.state``, one
record pair per client (``client.<cid>``), so it never leaves the node between rounds.

Which clients a node holds comes from its node config: ``clients`` (``"0-4"``, ``"0,2,5"``), else
Flower's ``partition-id``/``num-partitions`` (the simulation's: client ``c`` lives on node
``c % num-partitions``). Every draw is seeded exactly as in :func:`fedrepro.fl.engine.simulate`, so
a client computes the same update here as in-process.
"""
from __future__ import annotations

import json
import socket
from dataclasses import dataclass

import torch
from flwr.app import ConfigRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp

from ..config import RunConfig, from_dict
from ..errors import ConfigError, FederationError, TrainingDivergedError
from ..fl.client_data import ClientData
from ..fl.device import resolve_device, torch_threads
from ..fl.seeding import derive_seed, seeded_scope, torch_gen
from .records import get_state, has_state, put_state
from ..runs.pipeline import clients_of, make_method, prepare_data
from ..runs.inputs import check_run_inputs

# The record every message carries: run config, round, which clients, what to do.
TASK = "fedrepro"
NODE_CLIENTS_KEY = "clients"


def parse_clients(spec: str, num_clients: int) -> list[int]:
    """``"0-4"``, ``"0,2,5"`` or ``"0-2,7"`` -> sorted client ids, each in ``[0, num_clients)``."""
    out: set[int] = set()
    try:
        for part in str(spec).replace(" ", "").split(","):
            if not part:
                continue
            lo, _, hi = part.partition("-")
            out.update(range(int(lo), int(hi or lo) + 1))
    except ValueError:
        raise ConfigError(f"node config clients={spec!r}; valid: client ids and ranges, e.g. '0-4' or "
                          "'0,2,5'") from None
    bad = sorted(c for c in out if not 0 <= c < num_clients)
    if bad:
        raise ConfigError(f"node config clients={spec!r} names clients {bad}; valid: ids in [0, {num_clients - 1}]")
    return sorted(out)


def node_clients(node_config: dict, num_clients: int) -> list[int]:
    """The clients a node holds, from its node config (see the module docstring)."""
    if NODE_CLIENTS_KEY in node_config:
        return parse_clients(str(node_config[NODE_CLIENTS_KEY]), num_clients)
    if "partition-id" in node_config and "num-partitions" in node_config:
        pid, n = int(node_config["partition-id"]), int(node_config["num-partitions"])
        return [c for c in range(num_clients) if c % n == pid]
    raise ConfigError(f"this SuperNode's node config {dict(node_config)!r} says no clients; start it with "
                      "--node-config \"clients='0-4'\" (the client ids it holds)")


@dataclass
class NodeRuntime:
    """What a node builds once per run: the config, its clients' data and the method."""

    cfg: RunConfig
    method: object
    clients: dict[int, ClientData]
    device: torch.device
    partition_hash: str


_RUNTIMES: dict[tuple[str, tuple[int, ...]], NodeRuntime] = {}


def runtime(cfg_json: str, cids: list[int]) -> NodeRuntime:
    cfg = from_dict(json.loads(cfg_json))
    key = (cfg.hash(), tuple(cids))
    if key not in _RUNTIMES:
        device = resolve_device(cfg.device)
        check_run_inputs(cfg)  # a node reads its data root as the driver does: bounded, checked first
        with torch_threads(cfg.threads):
            ds, part = prepare_data(cfg)
            every = clients_of(cfg, ds, part, device)
            method = make_method(cfg, ds, device)
        _RUNTIMES.clear()  # one run at a time per process: free the last one's data
        _RUNTIMES[key] = NodeRuntime(cfg, method, {c: every[c] for c in cids}, device, part.hash())
    return _RUNTIMES[key]


def _task(message: Message) -> ConfigRecord:
    return message.content.config_records[TASK]


def _node(message: Message, context: Context) -> tuple[NodeRuntime, list[int]]:
    task = _task(message)
    cfg = json.loads(str(task["config"]))
    cids = node_clients(dict(context.node_config), int(cfg["data"]["num_clients"]))
    return runtime(str(task["config"]), cids), cids


def _install_initial_states(message: Message, context: Context, cids: list[int]) -> None:
    """The server sends each client's initial state with its node's first task (it derives them all
    in one seeded scope, as the in-process engine does); later tasks find them in the context."""
    for cid in cids:
        if has_state(message.content, f"init.{cid}"):
            put_state(context.state, f"client.{cid}", get_state(message.content, f"init.{cid}"))


def _client_state(context: Context, cid: int, device: torch.device) -> dict:
    if not has_state(context.state, f"client.{cid}"):
        raise FederationError(f"client {cid}'s state is not on this SuperNode (node {context.node_id}): it was "
                              "restarted mid-run or holds other clients than at the start; run the federation again")
    return get_state(context.state, f"client.{cid}", device)


app = ClientApp()


@app.query()
def query(message: Message, context: Context) -> Message:
    """``hello``: which clients this node holds (and its partition hash and device); ``states``:
    every held client's state, at the end of the run (the store's ``final_state.pt``)."""
    rt, cids = _node(message, context)
    reply = RecordDict()
    action = str(_task(message)["action"])
    if action == "hello":
        reply[TASK] = ConfigRecord({"clients": json.dumps(cids), "partition_hash": rt.partition_hash,
                                    "device": str(rt.device), "host": socket.gethostname()})
    elif action == "states":
        for cid in cids:
            put_state(reply, f"state.{cid}", _client_state(context, cid, torch.device("cpu")))
    else:
        raise ConfigError(f"unknown query action {action!r}; valid: hello, states")
    return Message(reply, reply_to=message)


def _round_task(message: Message, context: Context):
    """What a train or evaluate message carries for this node: its runtime, the clients it holds
    (their first states installed), the task, its round and the shared state."""
    rt, held = _node(message, context)
    _install_initial_states(message, context, held)
    task = _task(message)
    return rt, held, task, int(task["round"]), get_state(message.content, "shared", rt.device)


@app.train()
def train(message: Message, context: Context) -> Message:
    """``client_update`` of each client the task names, in order, with the in-process engine's seeds."""
    rt, _, task, rnd, shared = _round_task(message, context)
    seed, reply = rt.cfg.seed, RecordDict()
    with torch_threads(rt.cfg.threads):
        for cid in json.loads(str(task["cids"])):
            state = _client_state(context, cid, rt.device)
            try:
                with seeded_scope(derive_seed(seed, "client", rnd, cid, 1)):
                    upd = rt.method.client_update(shared, state, rt.clients[cid], torch_gen(seed, "client", rnd, cid),
                                                  rnd)
            except TrainingDivergedError as err:  # a result, not a crash: the server stores the run as diverged
                reply[TASK] = ConfigRecord({"diverged": str(err), "client": cid})
                return Message(reply, reply_to=message)
            put_state(context.state, f"client.{cid}", upd.state)
            put_state(reply, f"upload.{cid}", upd.upload)
            reply[f"metrics.{cid}"] = MetricRecord({"num_samples": int(upd.num_samples),
                                                    **{f"m.{k}": float(v) for k, v in upd.metrics.items()}})
    return Message(reply, reply_to=message)


@app.evaluate()
def evaluate(message: Message, context: Context) -> Message:
    """Every held client's ``evaluate`` of its personalised model on its own test split (and, at the
    last round, its state: one message fewer than a separate ``states`` query)."""
    rt, held, task, rnd, shared = _round_task(message, context)
    seed, reply = rt.cfg.seed, RecordDict()
    with torch_threads(rt.cfg.threads):
        for cid in held:
            state = _client_state(context, cid, rt.device)
            with seeded_scope(derive_seed(seed, "eval", rnd, cid)):
                res = rt.method.evaluate(shared, state, rt.clients[cid], torch_gen(seed, "eval", rnd, cid))
            reply[f"eval.{cid}"] = MetricRecord({"correct": int(res.correct), "total": int(res.total),
                                                 "loss_sum": float(res.loss_sum), "f1": float(res.f1_macro),
                                                 **{f"x.{k}": float(v) for k, v in res.extra.items()}})
            if int(task.get("with_states", 0)):
                put_state(reply, f"state.{cid}", _client_state(context, cid, torch.device("cpu")))
    return Message(reply, reply_to=message)
