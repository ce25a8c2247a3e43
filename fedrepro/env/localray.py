"""A Ray instance of this process's own that listens on loopback only, unless asked otherwise.

Ray has no authentication by default: whoever reaches a port of its GCS, a raylet, a worker or an
agent can submit tasks, that is run code as this user (issue 53). A Ray started for one session
(the ``ray`` executor without an address, Flower's simulation engine) needs no other machine, so
it should not be reachable from one. Ray 2.55 binds its servers to the node's address (the GCS,
raylet and worker gRPC servers, the runtime-env and dashboard agents, the metrics exporter, the
autoscaler monitor's metrics port) and binds all interfaces when that address is not loopback;
but on Linux it takes a node address of ``127.0.0.1`` for a mistake and puts the machine's
routable address in its place (``ray._private.services.resolve_ip_for_localhost``), unless its
single-machine switch is on (``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``, read into
``ray_constants.ENABLE_RAY_CLUSTER`` when ray is imported). :func:`init_local_ray` turns that switch
on around ``ray.init`` (and in the environment its processes inherit), so the node's address is
loopback and every socket of the instance is bound to it; ``tests/test_network_exposure.py``
lists the sockets to check. Its processes also get ``REMOTE_PDB_HOST`` on loopback
(:func:`loopback_env`): a worker's post-mortem debugger (``RAY_DEBUG_POST_MORTEM=1`` with
``RAY_DEBUG=legacy``) listens where that says, and a pdb prompt is code run as this user.
"""
from __future__ import annotations

import ipaddress
import os
from typing import Any, Mapping

LOOPBACK = "127.0.0.1"
_SWITCH = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"  # "0": no multi-node cluster, the node's address is loopback


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a loopback address (``127.0.0.0/8``, ``::1``, or IPv4-mapped loopback)."""
    try:
        ip = ipaddress.ip_address(host.split("%")[0])
    except ValueError:
        return host == "localhost"
    mapped = getattr(ip, "ipv4_mapped", None)
    return ip.is_loopback or (mapped is not None and mapped.is_loopback)


def check_bind(bind: str) -> str | None:
    """What is wrong with ``bind`` as the address of a Ray node on this machine (None: nothing)."""
    try:
        ip = ipaddress.ip_address(bind)
    except ValueError:
        return "not an IP address"
    if ip.is_unspecified or ip.is_multicast:
        return "not the address of one interface (Ray's node address is what other nodes dial)"
    return None


# Where Ray's legacy remote debugger (ray.util.rpdb) listens in a worker: set by a user for a
# cluster's debugging, it must not carry over to an instance that is meant to be reachable from
# this machine only.
_PDB_HOST = "REMOTE_PDB_HOST"


def loopback_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The variables to set, over ``environ``, in the environment the processes of a loopback-only
    Ray instance inherit: the single-machine switch, and ``REMOTE_PDB_HOST`` put back on loopback
    when it names another address (a loopback one is kept)."""
    out = {_SWITCH: "0"}
    host = environ.get(_PDB_HOST)
    if host is not None and not is_loopback(host):
        out[_PDB_HOST] = LOOPBACK
    return out


def init_local_ray(bind: str = LOOPBACK, **kwargs: Any) -> None:
    """``ray.init(address="local", **kwargs)``: a new Ray instance on this machine whose sockets are
    all on loopback when ``bind`` is a loopback address (the default). With another address of this
    machine the instance is one other nodes can join (``ray start --address``): Ray then listens on
    all interfaces, with no authentication unless ``RAY_AUTH_MODE=token`` (docs/scale-out-ray.md)."""
    import ray
    import ray._private.ray_constants as ray_constants

    if not is_loopback(bind):
        ray.init(address="local", _node_ip_address=bind, **kwargs)
        return
    # For the processes ray.init starts (GCS, raylet, agents, and the workers the raylet starts
    # later with its environment); this process's own is restored after.
    overrides = loopback_env(os.environ)
    saved_env, saved = {k: os.environ.get(k) for k in overrides}, ray_constants.ENABLE_RAY_CLUSTER
    os.environ.update(overrides)
    ray_constants.ENABLE_RAY_CLUSTER = False  # for this process, which imported ray before
    try:
        ray.init(address="local", _node_ip_address=LOOPBACK, **kwargs)
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = saved
        for key, value in saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
