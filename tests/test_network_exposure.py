"""What the package's own Ray and Flower processes listen on: loopback only (issue 53).

Ray has no authentication and Flower's local deployment runs in insecure mode, so a socket of
theirs bound beyond loopback would let anyone on the network submit code or join a federation. Each
test starts the services as the package does and lists the listening sockets (TCP in LISTEN, bound
UDP) of every process it started: the Ray executor's local instance (GCS, raylet, the runtime-env and
dashboard agents, the autoscaler monitor, a worker: the relay actor), Flower's simulation engine
during a round, and the one-command deployment (SuperLink, SuperNodes). They skip only where the
platform does not let a process list its sockets (psutil), or where ray/flwr is not installed.
"""
from __future__ import annotations

import contextlib
import importlib.util
import socket
import threading
import time
from pathlib import Path

import pytest

from fedrepro.env.localray import is_loopback

psutil = pytest.importorskip("psutil")


def _can_list_sockets() -> bool:
    try:
        psutil.Process().net_connections(kind="inet")
        return True
    except (psutil.AccessDenied, NotImplementedError, OSError):
        return False


needs_sockets = pytest.mark.skipif(not _can_list_sockets(),
                                   reason="this platform does not let a process list its sockets (psutil)")
needs_ray = pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="ray is not installed")
needs_flwr = pytest.mark.skipif(importlib.util.find_spec("flwr") is None, reason="flwr is not installed")


def listening(roots=None) -> set[tuple[str, str, int]]:
    """(process name, address, port) of every listening socket of ``roots`` (default: this process)
    and all their descendants: TCP sockets in LISTEN and bound UDP sockets."""
    procs = [psutil.Process()] if roots is None else [psutil.Process(p) for p in roots]
    seen = set()
    for root in procs:
        with contextlib.suppress(psutil.NoSuchProcess):
            for p in [root, *root.children(recursive=True)]:
                try:
                    name = p.name()
                    conns = p.net_connections(kind="inet")
                except (psutil.NoSuchProcess, psutil.ZombieProcess):
                    continue  # it ended while we looked
                for c in conns:
                    if c.laddr and (c.status == psutil.CONN_LISTEN or c.type == socket.SOCK_DGRAM):
                        seen.add((name, c.laddr.ip, c.laddr.port))
    return seen


def exposed(sockets) -> list:
    return sorted(s for s in sockets if not is_loopback(s[1]))


@contextlib.contextmanager
def listening_during(roots=None, every: float = 0.3):
    """Collect :func:`listening` sockets every ``every`` seconds while the block runs."""
    seen: set = set()
    done = threading.Event()

    def poll():
        while not done.is_set():
            seen.update(listening(roots))
            done.wait(every)
    thread = threading.Thread(target=poll, daemon=True)
    thread.start()
    try:
        yield seen
    finally:
        done.set()
        thread.join()
        seen.update(listening(roots))


def test_loopback_addresses_are_told_apart():
    assert all(map(is_loopback, ["127.0.0.1", "127.0.0.53", "::1", "::ffff:127.0.0.1", "localhost"]))
    assert not any(map(is_loopback, ["0.0.0.0", "::", "192.0.2.2", "::ffff:192.0.2.2", "fe80::1"]))


def test_the_bind_option_is_checked():
    from fedrepro.errors import ConfigError
    from fedrepro.execute import RayExecutor

    assert RayExecutor().bind == "127.0.0.1"
    assert RayExecutor(bind="192.0.2.2").bind == "192.0.2.2"
    for bad in ("0.0.0.0", "::", "head-node", ""):
        with pytest.raises(ConfigError, match=rf"invalid bind={bad!r}; valid: '127.0.0.1' \(loopback only\)"):
            RayExecutor(bind=bad)
    with pytest.raises(ConfigError, match="bind applies only to the Ray instance started here"):
        RayExecutor(address="auto", bind="192.0.2.2").session()  # before anything connects or trains


@needs_sockets
@needs_ray
def test_the_ray_executors_local_instance_listens_on_loopback_only():
    import ray

    from fedrepro.execute import RayExecutor

    if ray.is_initialized():
        ray.shutdown()  # another test's instance: this test starts its own, as a grid would
    for attempt in range(3):  # on a busy machine Ray's node can miss its own start-up deadline
        try:
            with RayExecutor().session(progress=False) as session:
                session.status()  # the relay actor answers: a worker process is up, with its gRPC server
                seen = listening()
            break
        except Exception as e:  # noqa: BLE001  (Ray raises a bare Exception for this)
            if "timed out during startup" not in str(e) or attempt == 2:
                raise
            ray.shutdown()
    names = {name for name, _, _ in seen}
    assert "gcs_server" in names and "raylet" in names, seen  # the listing sees Ray's processes
    assert exposed(seen) == [], f"Ray sockets beyond loopback: {exposed(seen)}"


@needs_sockets
@needs_ray
@needs_flwr
def test_a_flower_simulation_listens_on_loopback_only(tmp_path):
    import ray

    from fedrepro.config import make_config
    from fedrepro.execute.run import run

    if ray.is_initialized():
        ray.shutdown()  # the simulation must start its own instance, as `fedrepro run --engine flower` does
    seen: set = set()
    cfg = make_config("smoke", method__name="fedavg", runs_dir=str(tmp_path), progress=False, train__rounds=1)
    # After a round Ray, its workers (the virtual SuperNodes) and Flower's engine are all up.
    run(cfg, engine="flower", engine_options={"cpus": 2, "nodes": 2}, on_round_end=lambda s: seen.update(listening()))
    assert {name for name, _, _ in seen} >= {"gcs_server", "raylet"}, seen
    assert exposed(seen) == [], f"sockets beyond loopback during a Flower simulation: {exposed(seen)}"


@needs_sockets
@needs_flwr
def test_a_local_deployment_listens_on_loopback_only(tmp_path):
    """The SuperLink (Fleet, Control and ServerAppIo APIs on one port in flwr 1.41) and each SuperNode
    (its ClientAppIo API) on 127.0.0.1, each port passed explicitly. The federation itself (its
    ``flwr-serverapp`` and ``flwr-clientapp`` processes open no listening socket) is checked by
    tests/test_flower.py::test_deployment_matches_simulation."""
    from fedrepro.flower.deploy import Deployment

    with Deployment(num_clients=2, nodes=2, workdir=tmp_path / "flower") as dep:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # the SuperNodes listen a moment after they start
            seen = listening(p.pid for p in dep.processes.values())
            if len(seen) >= 3:
                break
            time.sleep(0.2)
    assert len({port for _, _, port in seen}) >= 3, seen  # a SuperLink and two SuperNodes
    assert exposed(seen) == [], f"Flower sockets beyond loopback: {exposed(seen)}"


def test_the_deployment_passes_loopback_for_every_address(tmp_path, monkeypatch):
    """Without starting anything: every host and address the deployment hands Flower's commands
    is 127.0.0.1 (flwr's own defaults are not relied on), and its CLI config points at loopback."""
    pytest.importorskip("flwr")
    from fedrepro.flower import deploy

    started: list[list[str]] = []

    class _Proc:
        pid, returncode = 0, None

        def poll(self):
            return None

    monkeypatch.setattr(deploy, "_wait_port", lambda *a, **k: None)
    monkeypatch.setattr(deploy.Deployment, "_start", lambda self, name, argv, home: started.append(argv) or _Proc())
    dep = deploy.Deployment(num_clients=4, nodes=2, workdir=tmp_path / "flower").start()
    assert len(started) == 3
    for argv in started:
        hosts = [argv[i + 1] for i, a in enumerate(argv) if a in ("--host", "--superlink")]
        assert "--host" in argv and hosts and all(h.split(":")[0] == "127.0.0.1" for h in hosts), argv
        assert not any(a.endswith("-address") for a in argv), argv  # deprecated separate-port flags
    config = (Path(dep.workdir) / "cli" / "config.toml").read_text()
    assert 'address = "127.0.0.1:' in config
