"""One federation on Flower: the same numbers as the in-process engine, on Flower's simulation engine
and on a loopback deployment (one SuperLink, two SuperNodes), and a clear error when a SuperNode dies.

Equality is bit for bit: a client's update and evaluation run the same code with the same seeds on
a SuperNode as in-process (one thread each, same device), states travel as exact bytes
(``fedrepro.flower.records``), and the server aggregates in the same order. Only the wall-clock
columns (``time_*``) differ. Each federation uses at most 2 CPUs (Ray's ``num_cpus=2``; two
SuperNodes of one thread each).
"""
from __future__ import annotations

import importlib.util
import math
import struct
import time

import pytest
import torch

pytest.importorskip("flwr", reason="flwr is not installed (pip install -r requirements.txt -c constraints.txt)")

from fedrepro.config import make_config  # noqa: E402
from fedrepro.errors import ConfigError, FederationError  # noqa: E402
from fedrepro.execute.run import run  # noqa: E402
from fedrepro.runs.store import RunStore  # noqa: E402

needs_ray = pytest.mark.skipif(importlib.util.find_spec("ray") is None,
                               reason="ray is not installed: Flower's simulation engine needs flwr[simulation]")


def _smoke(method: str, runs_dir, **kw):
    return make_config("smoke", method__name=method, runs_dir=str(runs_dir), progress=False, **kw)


def _drop_times(df):
    return df.drop(columns=[c for c in df.columns if c.startswith("time_")])


def _equal_states(a, b) -> bool:
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and list(a) == list(b) and all(_equal_states(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_equal_states(x, y) for x, y in zip(a, b))
    return a == b or (isinstance(a, float) and math.isnan(a) and math.isnan(b))


def assert_same_run(ref, other) -> None:
    """Bit for bit: every round and client row, the summary and the final state (not the timings)."""
    assert other.path.name == ref.path.name  # the engine is not in the config hash
    assert _drop_times(other.rounds).equals(_drop_times(ref.rounds))
    assert other.clients.equals(ref.clients)
    untimed = lambda s: {k: v for k, v in s.items() if not k.startswith("time_")}  # noqa: E731
    assert untimed(other.summary) == untimed(ref.summary)
    assert _equal_states(other.final_state(), ref.final_state())


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """In-process runs, trained once per method for the whole module."""
    root = tmp_path_factory.mktemp("inprocess")
    cache = {}

    def get(method: str):
        if method not in cache:
            cache[method] = run(_smoke(method, root))
        return cache[method]

    return get


@pytest.fixture(scope="module")
def simulated(tmp_path_factory):
    root = tmp_path_factory.mktemp("simulation")
    cache = {}

    def get(method: str):
        if method not in cache:
            cache[method] = run(_smoke(method, root), engine="flower", engine_options={"cpus": 2, "nodes": 2})
        return cache[method]

    return get


# Simulation ---------------------------------------------------------------------------------

@needs_ray
@pytest.mark.parametrize("method", ["fedavg", "fedper", "fedpft"])
def test_simulation_matches_inprocess(method, reference, simulated):
    sim = simulated(method)
    assert_same_run(reference(method), sim)
    engine = sim.meta["engine"]
    assert engine["name"] == "flower" and engine["mode"] == "simulation"
    assert [n["clients"] for n in engine["nodes"]] == [[0, 2], [1, 3]]  # client c on node c % 2
    again = run(sim.config)  # the in-process engine finds it finished: the same run, reused, not retrained
    assert again.path == sim.path and again.meta["engine"]["name"] == "flower"


@needs_ray
def test_a_run_that_stops_when_flat_stops_at_the_same_round_on_flower(tmp_path):
    # A rate too small to move the model: the curve is flat, so both engines stop at the same
    # evaluated round, before the maximum; FedPer keeps client states, which Flower fetches from the
    # nodes at the stop.
    flat = {"train.rounds": 8, "train.lr": 1e-9, "train.stop_when_flat": True, "train.flat_window": 2}
    ref = run(_smoke("fedper", tmp_path / "inprocess").replace(**flat))
    sim = run(_smoke("fedper", tmp_path / "flower").replace(**flat), engine="flower",
              engine_options={"cpus": 2, "nodes": 2})
    assert ref.summary["stopped_early"] and ref.summary["rounds"] < ref.summary["max_rounds"] == 8
    assert_same_run(ref, sim)


def test_engine_name_and_options_are_checked(tmp_path):
    cfg = _smoke("fedavg", tmp_path)
    with pytest.raises(ConfigError, match="engine='ray'; valid: inprocess, flower"):
        run(cfg, engine="ray")
    with pytest.raises(ConfigError, match="in-process engine takes none"):
        run(cfg, engine_options={"nodes": 2})
    assert not any(tmp_path.iterdir())  # nothing written


# Deployment ---------------------------------------------------------------------------------

@pytest.fixture
def deployment(tmp_path):
    from fedrepro.flower.deploy import Deployment

    dep = Deployment(num_clients=4, nodes=2, workdir=tmp_path / "flower")
    try:
        yield dep.start()
    finally:
        dep.close()  # every SuperLink/SuperNode/flwr process it started, killed if it does not stop in 10 s


@needs_ray
def test_deployment_matches_simulation(deployment, tmp_path, reference, simulated):
    from test_network_exposure import exposed, listening_during, needs_sockets

    # Every process of the federation (SuperLink, SuperNodes, their ServerApp and ClientApp
    # processes) listens on loopback only while it runs (tests/test_network_exposure.py).
    with listening_during([p.pid for p in deployment.processes.values()]) as seen:
        res = deployment.run(_smoke("fedavg", tmp_path / "runs"), wait=300)
    if not needs_sockets.args[0]:  # the platform lets this process list sockets
        assert len(seen) >= 3 and exposed(seen) == [], seen
    assert_same_run(simulated("fedavg"), res)
    assert_same_run(reference("fedavg"), res)
    engine = res.meta["engine"]
    assert engine["mode"] == "deployment"
    assert [n["clients"] for n in engine["nodes"]] == [[0, 1], [2, 3]]


def test_killed_supernode_is_an_error_not_a_result(deployment, tmp_path):
    cfg = _smoke("fedavg", tmp_path / "runs", train__rounds=200)
    store = RunStore(cfg.runs_dir)
    import threading

    outcome = {}
    worker = threading.Thread(target=lambda: outcome.setdefault("error", _expect_error(deployment, cfg)))
    worker.start()
    deadline = time.monotonic() + 240
    while store.status(cfg) == "missing" and worker.is_alive() and time.monotonic() < deadline:  # until connected
        time.sleep(0.5)
    assert store.status(cfg) == "partial", "the federation did not start"
    node = deployment.processes["supernode-1"]
    import os
    import signal

    os.killpg(node.pid, signal.SIGKILL)
    worker.join(timeout=300)
    assert not worker.is_alive()
    err = outcome["error"]
    assert isinstance(err, FederationError), err
    assert "SuperNode" in str(err) and "clients [2, 3]" in str(err) and "left the federation" in str(err)
    assert store.status(cfg) == "partial"  # no summary: never mistaken for a finished run


def _expect_error(deployment, cfg):
    try:
        deployment.run(cfg, wait=300)  # no reply timeout: the SuperLink notices the node is gone
    except FederationError as e:
        return e
    return None


# Pieces -------------------------------------------------------------------------------------

def test_state_records_round_trip_bit_for_bit():
    from flwr.app import RecordDict

    from fedrepro.flower.records import get_state, put_state

    state = {"w": torch.randn(4, 3, 3, 3).contiguous(memory_format=torch.channels_last), "n": torch.tensor(7),
             "p": torch.nn.Parameter(torch.randn(3)), "h": torch.randn(2).bfloat16(), "k": 3, "l": [torch.ones(2)]}
    rd = RecordDict()
    put_state(rd, "s", state)
    back = get_state(rd, "s")
    assert list(back) == list(state)
    assert back["w"].stride() == state["w"].stride() and torch.equal(back["w"], state["w"])
    assert back["n"].shape == () and isinstance(back["p"], torch.nn.Parameter) and back["h"].dtype == torch.bfloat16
    assert back["k"] == 3 and torch.equal(back["l"][0], state["l"][0])


_NAN_WITH_PAYLOAD = struct.unpack("<d", struct.pack("<Q", 0xFFF8000000000123))[0]  # negative, payload 0x123


def _bits(v):
    """A value with every tensor as (type, dtype, shape, strides, requires_grad, its bytes) and every
    float as its IEEE bits: equal bits compare equal, NaN payloads and -0.0 included."""
    if isinstance(v, torch.Tensor):
        raw = v.detach().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()
        return (type(v), v.dtype, tuple(v.shape), v.stride(), v.requires_grad, raw)
    if isinstance(v, float):
        return ("float", struct.pack("<d", v))
    if isinstance(v, dict):
        return ("dict", [(type(k), k, _bits(x)) for k, x in v.items()])
    if isinstance(v, (list, tuple)):
        return (type(v), [_bits(x) for x in v])
    return (type(v), v)


def _round_trip(state):
    from flwr.app import RecordDict

    from fedrepro.flower.records import get_state, put_state

    rd = RecordDict()
    put_state(rd, "s", state)
    return get_state(rd, "s")


@pytest.mark.parametrize("value", [
    torch.randn(2, 3), torch.randn(4, 3, 3, 3).contiguous(memory_format=torch.channels_last), torch.randn(3, 2).t(),
    torch.tensor(7), torch.tensor(2.5, dtype=torch.bfloat16), torch.randn(3, 2).bfloat16(), torch.zeros(0, 4),
    torch.tensor([True, False]), torch.randn(3, dtype=torch.complex64), torch.arange(6).to(torch.uint16),
    torch.randn(2, 2, dtype=torch.float64).t(), torch.randn(3).half(), torch.tensor([-128, 5], dtype=torch.int8),
    torch.randn(3, requires_grad=True), torch.nn.Parameter(torch.randn(2, 2)),
    torch.nn.Parameter(torch.randn(2).bfloat16(), requires_grad=False),
    3, -(2 ** 70), True, None, "prompt", 0.1, -0.0, float("inf"), float("nan"), _NAN_WITH_PAYLOAD,
    [torch.ones(2), 1, [None, "x"]], (torch.ones(1), 2.0), {"a": torch.ones(2), 3: {"b": None}}, [], {},
    torch.randn(3, 2).bfloat16().t(), [torch.randn(2, 3, requires_grad=True).t()],
])
def test_every_kind_a_state_holds_round_trips_bit_for_bit(value):
    state = {"first": torch.ones(2), "v": value, "last": 1}
    back = _round_trip(state)
    assert list(back) == list(state)
    assert _bits(back) == _bits(state)


def test_state_records_refuse_what_they_cannot_carry():
    import numpy as np

    for bad, where in [(np.ones(2), "'w'"), (object(), "'w'"), ({1, 2}, "'w'"), ([torch.ones(1), b"raw"], r"'w'\[1\]"),
                       ({"k": torch.Size([2])}, r"'w'\['k'\]"), ({(1, 2): 0}, "a key of 'w'"),
                       (np.float32(1.0), "'w'")]:
        with pytest.raises(FederationError, match=rf"state 's' holds a .* at {where}; a Flower record carries only"):
            _round_trip({"w": bad})
    with pytest.raises(FederationError, match="float8_e4m3fn tensor at 'w'"):
        _round_trip({"w": torch.zeros(2, dtype=torch.float8_e4m3fn)})


class _Payload:
    """What a hostile peer would send: unpickling it creates ``marker``."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def test_a_record_carrying_a_pickle_is_refused_and_never_run(tmp_path):
    import io
    import pickle

    import numpy as np
    from flwr.app import Array, ArrayRecord, ConfigRecord, RecordDict

    from fedrepro.flower.records import get_state, put_state

    control = tmp_path / "control"
    pickle.loads(pickle.dumps(_Payload(control)))  # unsafe-load-ok: the control, a payload it built
    assert control.exists()  # the payload is live: unpickling it would have run it

    marker = tmp_path / "pwned"
    blob = io.BytesIO()
    torch.save({"w": _Payload(marker)}, blob)
    npy = io.BytesIO()
    np.save(npy, np.array([_Payload(marker)], dtype=object), allow_pickle=True)
    good = RecordDict()
    put_state(good, "upload.3", {"w": torch.ones(2), "k": torch.nn.Parameter(torch.ones(1))})
    meta = dict(good.config_records["upload.3.meta"])

    def hostile(**changes):
        rd = RecordDict()
        rd["upload.3"] = good.array_records["upload.3"]
        rd["upload.3.meta"] = ConfigRecord({**meta, **changes})
        return rd

    cases = [
        hostile(rest=pickle.dumps({"k": _Payload(marker)})),  # the blob of earlier versions, now a payload
        hostile(rest=blob.getvalue()),  # a torch.save blob (zip of pickles)
        hostile(format="torch.save", rest=blob.getvalue()),
        hostile(rest='{"k": {"pickle": "gASV"}}'),  # an unknown tag
        hostile(rest='{"k": {"tensor": {"data": "t.0", "dtype": "float32", "shape": [100], "strides": null, '
                     '"requires_grad": false, "parameter": false}}}'),  # bytes of the wrong size
        hostile(**{"t.9": bytes(8)}, rest='{"k": {"tensor": {"data": "t.9", "dtype": "float32", "shape": [2], '
                  '"strides": [1000000000000], "requires_grad": false, "parameter": false}}}'),  # a huge storage
        hostile(rest="[" * 100000 + "]" * 100000),  # nesting deeper than any parser's stack
        hostile(keys='["w", "k", "missing"]'),
        hostile(shapes='{"w": [3]}'),
    ]
    evil = RecordDict()
    evil["upload.3"] = ArrayRecord({"w": Array(dtype="object", shape=(1,), stype="numpy.ndarray", data=npy.getvalue())})
    evil["upload.3.meta"] = ConfigRecord({**meta, "keys": '["w"]', "rest": "{}"})
    cases.append(evil)
    for rd in cases:
        with pytest.raises(FederationError, match=r"^record 'upload.3' is not a valid fedrepro state \(.*\); refused$"):
            get_state(rd, "upload.3")
    assert not marker.exists()


def test_node_clients_and_blocks():
    from fedrepro.flower.client import node_clients, parse_clients
    from fedrepro.flower.deploy import client_blocks

    assert parse_clients("0-2,5", 6) == [0, 1, 2, 5]
    assert node_clients({"partition-id": 1, "num-partitions": 2}, 5) == [1, 3]
    assert client_blocks(5, 2) == ["0-2", "3-4"]
    with pytest.raises(ConfigError, match="valid: ids in"):
        parse_clients("0-9", 4)
    with pytest.raises(ConfigError, match="clients="):
        node_clients({}, 4)
    with pytest.raises(ConfigError, match="nodes=5"):
        client_blocks(4, 5)


def test_aggregate_reading_a_client_state_is_an_error():
    from fedrepro.flower.strategy import _StateNotOnServer

    with pytest.raises(FederationError, match="stays on the client's SuperNode"):
        dict(_StateNotOnServer("mymethod", 3))
