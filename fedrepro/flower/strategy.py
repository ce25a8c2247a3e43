"""The server side: a Flower ``Strategy`` that runs a registered method's rounds over a ``Grid``.

It does what :func:`fedrepro.fl.engine.simulate` does, with the clients on SuperNodes: the same
seeded client sampling, the method's ``aggregate`` in the same seeded scope, every client evaluated
on the same rounds, and the same per-round and per-client rows. Each round it sends one message per
node (the node's sampled clients, in order), so a node that holds several clients trains them one
after the other, as the in-process engine does.

A client's persistent state never comes to the server, except once at the end for the store's
``final_state.pt`` (with the last round's evaluation); a method whose ``aggregate`` reads ``ClientUpdate.state`` gets a
:class:`~fedrepro.errors.FederationError` saying so, not a silently different result.
"""
from __future__ import annotations

import json
import logging
import math
import reprlib
import time
from collections.abc import Mapping
from typing import Any, Callable, Iterable, Iterator

import torch
from flwr.app import ArrayRecord, ConfigRecord, Message, MessageType, MetricRecord, RecordDict
from flwr.serverapp import Grid
from flwr.serverapp.strategy import Strategy
from tqdm.auto import tqdm

from ..config import RunConfig
from ..env.jsonfiles import loads
from ..errors import FederationError, TrainingDivergedError
from ..fl.client_data import ClientData
from ..fl.flatness import evaluated_acc, stops_at
from ..fl.engine import (SimState, check_finite, client_row, loss_columns, evaluate_global, init_state,
                         sample_clients, summarize_round)
from ..fl.method import ClientUpdate, EvalResult, Method
from ..fl.seeding import derive_seed, seeded_scope
from .client import TASK
from .records import get_state, put_state

log = logging.getLogger("fedrepro")
_NODE_UNAVAILABLE = 5  # flwr.common.constant.ErrorCode.NODE_UNAVAILABLE
# The fields of a client's reply that count (samples, correct answers, test examples): never negative.
_COUNTS = ("num_samples", "correct", "total")


class _StateNotOnServer(Mapping):
    """``ClientUpdate.state`` on the server: a client's state stays on its SuperNode."""

    def __init__(self, method: str, cid: int):
        self._why = (f"method {method!r}'s aggregate read client {cid}'s persistent state (ClientUpdate.state); on "
                     "Flower that state stays on the client's SuperNode: aggregate may use upload, num_samples and "
                     "metrics only (move what the server needs into the upload)")

    def __getitem__(self, key: str) -> Any:
        raise FederationError(self._why)

    def __iter__(self) -> Iterator[str]:
        raise FederationError(self._why)

    def __len__(self) -> int:
        raise FederationError(self._why)


class _FlatStop(Exception):
    """Raised out of Flower's round loop when the run's curve is flat (``train.stop_when_flat``)."""


class MethodStrategy(Strategy):
    """Rounds of ``cfg``'s method over the nodes of a ``Grid`` (see the module docstring).

    :meth:`run` connects to the nodes, runs :meth:`Strategy.start` and returns the
    :class:`~fedrepro.fl.engine.SimState` the in-process engine would have: round rows, client rows,
    shared and server state, and every client's final state.
    """

    def __init__(self, cfg: RunConfig, method: Method, partition_hash: str, held_out: Iterable[int],
                 device: torch.device, global_test: ClientData | None = None, progress: bool = True,
                 timeout: float = 3600.0, connect_timeout: float = 120.0,
                 on_round_end: Callable[[SimState], Any] | None = None, flat_rule: bool = False):
        self.cfg, self.method, self.partition_hash = cfg, method, partition_hash
        # train.stop_when_flat where it may stop this method (fedrepro.runs.train.flat_rule_applies):
        # after each evaluated round, the in-process engine's own test (fedrepro.fl.converge).
        self.flat_rule = flat_rule
        self.num_clients = cfg.data.num_clients
        self.held_out = set(int(c) for c in held_out)
        self.device, self.global_test = device, global_test
        self.progress, self.timeout, self.connect_timeout = progress, float(timeout), float(connect_timeout)
        self.on_round_end = on_round_end
        self.cfg_json = json.dumps(cfg.to_dict(), sort_keys=True)
        self.state = init_state(method, self.num_clients, cfg.seed)
        self.node_of: dict[int, int] = {}
        self.nodes_info: dict[int, dict] = {}
        self._initialised: set[int] = set()
        self._sampled: list[int] = []
        self._sent: list[Message] = []
        self._row: dict[str, Any] = {}
        self._t0 = 0.0
        self._bar = None

    # Messages ------------------------------------------------------------------------------
    def _content(self, node: int, **task: Any) -> RecordDict:
        content = RecordDict()
        content[TASK] = ConfigRecord({"config": self.cfg_json, **task})
        if node not in self._initialised:  # the node's first task carries its clients' initial states
            for cid in self.clients_of(node):
                put_state(content, f"init.{cid}", self.state.client_states[cid])
            self._initialised.add(node)
        return content

    def clients_of(self, node: int) -> list[int]:
        return [c for c in range(self.num_clients) if self.node_of.get(c) == node]

    def _nodes(self) -> list[int]:
        return sorted(set(self.node_of.values()))

    def _replies(self, replies: Iterable[Message], sent: list[Message], what: str,
                 server_round: int) -> dict[int, Message]:
        """The replies to ``sent`` by node; a FederationError for a node that failed, left or did not
        answer. (The SuperLink itself answers for a node that left, so a reply is matched to its node
        through the message it answers.)"""
        dst = {m.metadata.message_id: int(m.metadata.dst_node_id) for m in sent}
        nodes = list(dst.values())
        got: dict[int, Message] = {}
        for r in replies:
            node = dst.get(r.metadata.reply_to_message_id, int(r.metadata.src_node_id))
            if r.has_error():
                why = ("it left the federation (stopped, killed or lost its connection)"
                       if r.error.code == _NODE_UNAVAILABLE else f"its ClientApp failed: {r.error.reason}")
                raise FederationError(f"round {server_round}: SuperNode {node} (clients {self.clients_of(node)}) "
                                      f"did not finish its {what} task: {why}. The run is not stored as finished; "
                                      "run it again")
            got[node] = r
        missing = [n for n in nodes if n not in got]
        if missing:
            raise FederationError(f"round {server_round}: no {what} reply within {self.timeout:g} s from SuperNode(s) "
                                  + ", ".join(f"{n} (clients {self.clients_of(n)})" for n in missing)
                                  + ". The run is not stored as finished; run it again")
        return got

    # Connecting ------------------------------------------------------------------------------
    def connect(self, grid: Grid) -> None:
        """Ask each node which clients it holds until every client is held by exactly one node."""
        if len(self.node_of) == self.num_clients:
            return
        deadline = time.monotonic() + self.connect_timeout
        asked: set[int] = set()
        while True:
            new = sorted(set(grid.get_node_ids()) - asked)
            if new:
                msgs = [Message(self._hello(), dst_node_id=n, message_type=MessageType.QUERY) for n in new]
                # A node's first task also starts its ClientApp and loads its data: allow the connect timeout.
                replies = grid.send_and_receive(msgs, timeout=max(self.timeout, self.connect_timeout))
                for node, reply in self._replies(replies, msgs, "hello", 0).items():
                    self._register(node, reply.content.config_records.get(TASK))
                asked.update(new)
            missing = [c for c in range(self.num_clients) if c not in self.node_of]
            if not missing:
                return
            if time.monotonic() > deadline:
                seen = ", ".join(f"{n}: {i['clients']}" for n, i in self.nodes_info.items()) or "none"
                raise FederationError(f"clients {missing} are held by no SuperNode after {self.connect_timeout:g} s "
                                      f"({len(asked)} node(s) connected: {seen}"
                                      + "); start SuperNodes with --node-config \"clients='...'\" covering "
                                      f"0-{self.num_clients - 1}")
            time.sleep(0.5)

    def _hello(self) -> RecordDict:
        content = RecordDict()
        content[TASK] = ConfigRecord({"config": self.cfg_json, "action": "hello"})
        return content

    def _register(self, node: int, info: ConfigRecord | None) -> None:
        # A node's reply is a peer's input: every field is checked before it is used (issue 53), so a
        # malformed one is a one-line error naming the node, never a traceback or a client id that
        # does not exist.
        try:
            if info is None:
                raise KeyError(TASK)
            cids = loads(str(info["clients"]))
            fields = {k: str(info[k]) for k in ("partition_hash", "device", "host")}
        except (KeyError, ValueError) as e:  # a JSONDecodeError is a ValueError
            raise FederationError(f"SuperNode {node} answered hello without its clients, partition hash, device "
                                  f"and host ({type(e).__name__}: {str(e)[:80]}); refused: is it running this "
                                  "version of fedrepro?") from None
        if type(cids) is not list or not all(type(c) is int and 0 <= c < self.num_clients for c in cids) \
                or len(set(cids)) != len(cids):
            raise FederationError(f"SuperNode {node} says it holds clients {reprlib.repr(cids)}; valid: distinct "
                                  f"client ids 0-{self.num_clients - 1} (--node-config \"clients='...'\")")
        if fields["partition_hash"] != self.partition_hash:
            raise FederationError(f"SuperNode {node} on {fields['host']} derives partition {fields['partition_hash']}, "
                                  f"not the server's {self.partition_hash}: its data files differ from the server's")
        for cid in cids:
            if cid in self.node_of:
                raise FederationError(f"client {cid} is held by two SuperNodes ({self.node_of[cid]} and {node}); give "
                                      "each node its own clients with --node-config \"clients='...'\"")
            self.node_of[cid] = node
        self.nodes_info[node] = {"clients": cids, "device": fields["device"], "host": fields["host"]}

    @staticmethod
    def _metrics(node: int, content: RecordDict, key: str, fields: tuple[str, ...]) -> MetricRecord:
        """The metric record ``key`` of a node's reply, holding a number in each of ``fields``, and a
        finite non-negative one in those that count (:data:`_COUNTS`; a score may be NaN: a client without
        test data has none); a one-line FederationError naming the node otherwise."""
        m = content.metric_records.get(key)
        bad = [f for f in fields if m is None or isinstance(m.get(f), bool) or not isinstance(m.get(f), (int, float))
               or (f in _COUNTS and not (math.isfinite(m[f]) and m[f] >= 0))]
        if m is None or bad:
            what = f"no record {key!r}" if m is None else f"record {key!r} with no valid {', '.join(bad)}"
            raise FederationError(f"SuperNode {node} replied with {what}; refused: is it running this version of "
                                  "fedrepro?")
        return m

    # The Strategy interface ------------------------------------------------------------------
    def summary(self) -> None:
        log.info("fedrepro: %s over %d SuperNodes holding %d clients", self.cfg.method.name,
                 len(self.nodes_info), self.num_clients)

    def configure_train(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord,
                        grid: Grid) -> Iterable[Message]:
        self._t0 = time.perf_counter()
        rnd = server_round - 1
        candidates = [c for c in range(self.num_clients) if c not in self.held_out]
        self._sampled = sample_clients(self.cfg.seed, rnd, candidates, self.cfg.train.participation)
        msgs = []
        for node in self._nodes():
            cids = [c for c in self._sampled if self.node_of[c] == node]
            if cids:
                content = self._content(node, round=rnd, cids=json.dumps(cids))
                put_state(content, "shared", self.state.shared)
                msgs.append(Message(content, dst_node_id=node, message_type=MessageType.TRAIN,
                                    group_id=str(server_round)))
        self._sent = msgs  # pushed by Strategy.start, which sets their ids
        return msgs

    def aggregate_train(self, server_round: int,
                        replies: Iterable[Message]) -> tuple[ArrayRecord | None, MetricRecord | None]:
        rnd = server_round - 1
        got = self._replies(replies, self._sent, "train", server_round)
        for node, reply in got.items():
            task = reply.content.config_records.get(TASK)
            if task is not None and "diverged" in task:
                raise TrainingDivergedError(None, str(task["diverged"]))
        updates, losses = [], {}
        for cid in self._sampled:
            content = got[self.node_of[cid]].content
            m = self._metrics(self.node_of[cid], content, f"metrics.{cid}", ("num_samples",))
            metrics = {k[2:]: float(v) for k, v in m.items() if k.startswith("m.")}
            updates.append(ClientUpdate(upload=get_state(content, f"upload.{cid}", self.device),
                                        state=_StateNotOnServer(self.cfg.method.name, cid),  # type: ignore[arg-type]
                                        num_samples=int(m["num_samples"]), metrics=metrics))
            for k, v in metrics.items():
                if k == "train_loss" or k.startswith("loss_"):
                    losses.setdefault(k, []).append(v)
        s = self.state
        with seeded_scope(derive_seed(self.cfg.seed, "server", rnd)):
            s.shared, s.server_state = self.method.aggregate(s.shared, updates, s.server_state, rnd)
        check_finite(s.shared, rnd)
        self._row = {"round": rnd + 1, "n_sampled": len(self._sampled), **loss_columns(losses)}
        self._row["time_train_s"] = time.perf_counter() - self._t0
        return None, MetricRecord({"train_loss": self._row["train_loss"]})

    def _evaluated(self, server_round: int) -> bool:
        return server_round % self.cfg.train.eval_every == 0 or server_round == self.cfg.train.rounds

    def configure_evaluate(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord,
                           grid: Grid) -> Iterable[Message]:
        self._t0 = time.perf_counter()
        if not self._evaluated(server_round):
            return []
        msgs = []
        last = int(server_round == self.cfg.train.rounds)
        for node in self._nodes():
            content = self._content(node, round=server_round, with_states=last)
            put_state(content, "shared", self.state.shared)
            msgs.append(Message(content, dst_node_id=node, message_type=MessageType.EVALUATE,
                                group_id=str(server_round)))
        self._sent = msgs
        return msgs

    def aggregate_evaluate(self, server_round: int, replies: Iterable[Message]) -> MetricRecord | None:
        row, s = self._row, self.state
        out = None
        if self._evaluated(server_round):
            got = self._replies(replies, self._sent, "evaluate", server_round)
            rows = []
            for cid in range(self.num_clients):
                m = self._metrics(self.node_of[cid], got[self.node_of[cid]].content, f"eval.{cid}",
                                  ("correct", "total", "loss_sum", "f1"))
                res = EvalResult(correct=int(m["correct"]), total=int(m["total"]), loss_sum=float(m["loss_sum"]),
                                 f1_macro=float(m["f1"]),
                                 extra={k[2:]: float(v) for k, v in m.items() if k.startswith("x.")})
                rows.append(client_row(server_round, cid, res, cid in self.held_out))
            s.client_rows.extend(rows)
            if server_round == self.cfg.train.rounds:  # the last round's replies carry the clients' states
                self._store_states(got)
            row.update(summarize_round(rows))
            if self.global_test is not None:
                row.update(evaluate_global(self.method, s, self.global_test, self.cfg.seed, server_round))
            row["time_eval_s"] = time.perf_counter() - self._t0
            out = MetricRecord({"acc_mean": row["acc_mean"]})
            if self._bar is not None:
                self._bar.set_postfix(acc=f"{row['acc_mean']:.3f}")
        s.round_rows.append(row)
        s.next_round = server_round
        if self._bar is not None:
            self._bar.update(1)
        if self.on_round_end is not None:
            self.on_round_end(s)
        t = self.cfg.train
        if (self.flat_rule and self._evaluated(server_round) and server_round < t.rounds
                and stops_at(server_round, evaluated_acc(s.round_rows), t.flat_window, t.flat_from)):
            raise _FlatStop(server_round)
        return out

    # Running ---------------------------------------------------------------------------------
    def fetch_states(self, grid: Grid) -> None:
        """Every client's state from its node, into ``state.client_states`` (for ``final_state.pt``)."""
        nodes = self._nodes()
        msgs = []
        for n in nodes:
            content = self._content(n, action="states")
            msgs.append(Message(content, dst_node_id=n, message_type=MessageType.QUERY))
        self._store_states(self._replies(grid.send_and_receive(msgs, timeout=self.timeout), msgs, "final-state",
                                         len(self.state.round_rows) + 1))

    def _store_states(self, got: dict[int, Message]) -> None:
        for cid in range(self.num_clients):
            self.state.client_states[cid] = get_state(got[self.node_of[cid]].content, f"state.{cid}", self.device)

    def run(self, grid: Grid) -> SimState:
        """Connect, train every round (the last one's replies bring the clients' final states). A diverged run raises
        :class:`TrainingDivergedError` with ``.state`` (the rounds before), as the engine does."""
        self.connect(grid)
        rounds = self.cfg.train.rounds
        self._bar = tqdm(total=rounds, desc=f"{self.cfg.method.name} s{self.cfg.seed} (flower)",
                         disable=not self.progress, leave=False)
        try:
            self.start(grid, ArrayRecord(), num_rounds=rounds, timeout=self.timeout)
        except _FlatStop:  # flat at an evaluated round before the last: the clients' states as they are
            self.fetch_states(grid)
        except TrainingDivergedError as err:
            err.state = self.state  # type: ignore[attr-defined]
            err.round = err.round or len(self.state.round_rows) + 1
            self.fetch_states(grid)  # the nodes are alive: store their states as the engine would
            raise
        finally:
            self._bar.close()
        return self.state
