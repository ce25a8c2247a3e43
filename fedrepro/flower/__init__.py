"""One federation on Flower: any registered method's steps hosted as a Flower ``ClientApp`` and
``ServerApp`` (Message API), run on Flower's simulation engine or deployed on SuperLink/SuperNodes.

- :mod:`.records`: method states <-> Flower records, bit for bit;
- :mod:`.client`: the ``ClientApp`` (a node hosts one or more clients, their state in its context);
- :mod:`.strategy`: the server side, a Flower ``Strategy`` that calls the method's ``aggregate``;
- :mod:`.simulation`: ``fedrepro run --engine flower`` (Flower's simulation engine, Ray backend);
- :mod:`.app`: the apps a deployment loads; :mod:`.deploy`: a loopback deployment in one command.

Flower is optional: :func:`require_flwr` names what to install when it is missing.
"""
from __future__ import annotations

import importlib.util

from ..errors import ConfigError


def require_flwr(simulation: bool = False) -> None:
    """A ConfigError naming the package to install when flwr (or Ray, for the simulation) is missing."""
    if importlib.util.find_spec("flwr") is None:
        raise ConfigError("the flower engine needs flwr; install it with `pip install -r requirements.txt "
                          "-c constraints.txt` (flwr==1.41.0)")
    if simulation and importlib.util.find_spec("ray") is None:
        raise ConfigError("Flower's simulation engine needs Ray; install it with `pip install -r requirements.txt "
                          "-c constraints.txt` (ray==2.55.1, flwr[simulation])")
