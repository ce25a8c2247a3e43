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
    res = deployment.run(_smoke("fedavg", tmp_path / "runs"), wait=300)
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
