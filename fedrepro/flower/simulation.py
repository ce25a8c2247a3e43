"""``fedrepro run --engine flower``: a run trained by Flower's simulation engine (Ray backend), or
over the Grid of a deployed SuperLink (:mod:`.app`), and stored like any other run.

:func:`train` is an engine of :func:`fedrepro.execute.run.run` (``ENGINES["flower"]``): ``run``
finds a stored run, checks staleness and holds the run's lock as usual; this trains it. The config
hash does not include the engine: on one machine (same device, same ``threads``) the Flower engine
gives the in-process engine's numbers bit for bit (tests/test_flower.py checks FedAvg, FedPer and
FedPFT), so a run trained by either is the same run. ``meta.json`` records the engine, its mode,
the flwr and Ray versions and each node's clients, host and device.
"""
from __future__ import annotations

import importlib.metadata
import logging
import os
import sys
from typing import Any

import torch

from ..config import RunConfig
from ..data import ImageDataset
from ..data.partition import Partition
from ..errors import FederationError, TrainingDivergedError
from ..fl.client_data import ClientData
from ..env.host import environ_kept
from ..env.localray import LOOPBACK, init_local_ray
from ..runs.store import RunResult, RunStore
from . import require_flwr
from ..runs.train import begin_run, finish_run, flat_rule_applies
from ..runs.pipeline import global_test_of
from ..errors import ConfigError

log = logging.getLogger("fedrepro")


def _version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def _start_ray(address: str | None, cpus: int | None, device: torch.device, attempts: int = 3) -> None:
    """Start (or join, with ``address``) the Ray instance Flower's simulation runs on, before Flower
    does: a Ray that fails to start is then an error here, instead of a simulation whose ServerApp
    waits for nodes that never come. A local start is retried: on a busy machine the raylet gives up
    waiting for its agents after a fixed 15-30 s."""
    import ray

    if ray.is_initialized():
        return
    env = {"env_vars": {"PYTHONPATH": os.pathsep.join(p for p in (os.environ.get("PYTHONPATH"), *sys.path) if p)}}
    kwargs: dict[str, Any]
    if address is not None:
        kwargs = {"address": address}
    else:
        # A Ray of its own ("local"), even where another local cluster runs (plain ray.init() would
        # join it), listening on loopback only (fedrepro.env.localray).
        kwargs = {"num_cpus": int(cpus or os.cpu_count() or 1), "include_dashboard": False}
        if device.type == "cuda":
            kwargs["num_gpus"] = torch.cuda.device_count()
    for attempt in range(1, attempts + 1):
        try:
            if address is None:
                init_local_ray(LOOPBACK, runtime_env=env, **kwargs)  # nothing off this machine may join it
            else:
                ray.init(runtime_env=env, **kwargs)
            return
        except Exception as e:  # noqa: BLE001  (Ray raises a bare Exception when its node does not start)
            ray.shutdown()
            if address is not None or attempt == attempts:
                where = f"the Ray cluster at {address!r}" if address else f"a local Ray instance ({attempts} tries)"
                raise FederationError(f"could not start {where}: {e}. On a busy machine start one cluster "
                                      "(`ray start --head --num-cpus N`) and pass its address (--ray-address)") from e
            log.warning("fedrepro: Ray did not start (%s); trying again", e)


def train_on_grid(grid, cfg: RunConfig, store: RunStore, status: str, ds: ImageDataset, part: Partition,
                  method, device: torch.device, progress: bool, on_round_end, mode: str, timeout: float,
                  connect_timeout: float) -> RunResult:
    """Train ``cfg`` over the nodes of ``grid`` and store it (the run's lock is the caller's)."""
    from .strategy import MethodStrategy

    strategy = MethodStrategy(cfg, method, part.hash(), part.held_out, device,
                              global_test=global_test_of(cfg, ds, device) if cfg.train.global_eval else None,
                              progress=progress, timeout=timeout, connect_timeout=connect_timeout,
                              on_round_end=on_round_end, flat_rule=flat_rule_applies(cfg, method))
    strategy.connect(grid)  # before the run folder exists: a federation that never forms leaves nothing
    nodes = sorted(strategy.nodes_info.values(), key=lambda i: i["clients"][:1])
    engine = {"name": "flower", "mode": mode, "flwr": _version("flwr"), "nodes": nodes}
    if mode == "simulation":
        engine["ray"] = _version("ray")
    path = begin_run(cfg, store, status, ds, part, device, engine=engine)
    diverged = None
    try:
        state = strategy.run(grid)
    except TrainingDivergedError as err:
        state = getattr(err, "state", None)
        if state is None:
            raise
        diverged = {"diverged_round": err.round, "diverged": str(err)}
    return finish_run(cfg, store, path, part, state, diverged, meta_update={"engine": engine},
                      flat_rule=strategy.flat_rule)


def train(cfg: RunConfig, store: RunStore, status: str, ds: ImageDataset, part: Partition,
          clients: list[ClientData], method, device: torch.device, force_progress: bool | None, on_round_end,
          *, grid=None, nodes: int | None = None, cpus: int | None = None, gpus_per_node: float | None = None,
          ray_address: str | None = None, timeout: float = 3600.0, connect_timeout: float = 120.0) -> RunResult:
    """Train a run on Flower (the trainer signature of ``fedrepro.runs.train.train_inprocess``).

    With ``grid`` (a deployed SuperLink's, from :mod:`.app`) it runs over that grid's SuperNodes.
    Otherwise it starts Flower's simulation engine with ``nodes`` virtual SuperNodes (default: one
    per client; client ``c`` on node ``c % nodes``) on a Ray instance of ``cpus`` CPUs (default: all),
    each node taking ``cfg.threads`` CPUs and ``gpus_per_node`` GPUs (default: a share of one GPU when
    the run's device is CUDA, else none), or on the Ray cluster at ``ray_address`` (``ray start
    --head`` prints it). ``timeout``: seconds to wait for a round's replies.
    """
    progress = cfg.progress if force_progress is None else force_progress
    args = (cfg, store, status, ds, part, method, device, progress, on_round_end)
    if grid is not None:
        require_flwr()
        return train_on_grid(grid, *args, mode="deployment", timeout=timeout, connect_timeout=connect_timeout)
    require_flwr(simulation=True)
    from flwr.serverapp import ServerApp
    from flwr.simulation import run_simulation

    from .client import app as client_app

    n_nodes = cfg.data.num_clients if nodes is None else int(nodes)
    if n_nodes < 1:

        raise ConfigError(f"nodes={nodes!r}; valid: a positive integer (virtual SuperNodes)")
    if gpus_per_node is None:
        gpus_per_node = 1.0 / n_nodes if device.type == "cuda" else 0.0
    outcome: dict[str, Any] = {}
    server_app = ServerApp()

    @server_app.main()
    def main(grid, context) -> None:  # Flower runs this on a thread of this process
        try:
            outcome["result"] = train_on_grid(grid, *args, mode="simulation", timeout=timeout,
                                              connect_timeout=connect_timeout)
        except BaseException as e:  # noqa: BLE001  (re-raised on the caller's thread below)
            outcome["error"] = e

    backend = {"client_resources": {"num_cpus": cfg.threads, "num_gpus": gpus_per_node}}
    with environ_kept("PYTHONPATH"):
        _start_ray(ray_address, cpus, device)  # Flower's backend uses it (and shuts it down at the end)
        run_simulation(server_app=server_app, client_app=client_app, num_supernodes=n_nodes, backend_config=backend)
    if "error" in outcome:
        raise outcome["error"]
    if "result" not in outcome:
        raise FederationError("Flower's simulation engine stopped before the ServerApp finished (see its log above)")
    return outcome["result"]
