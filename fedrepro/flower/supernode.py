"""``flower-supernode`` with a shorter heartbeat, for the loopback deployment (:mod:`.deploy`)::

    python -m fedrepro.flower.supernode --heartbeat 10 <flower-supernode arguments>

A SuperNode tells the SuperLink how often it will call in (Flower 1.41: every 30 s, a constant), and
the SuperLink declares it gone after two missed calls; every message still waiting for it then gets
an error reply, which the server turns into a :class:`~fedrepro.errors.FederationError`. On one
machine a 10 s heartbeat (the least a SuperLink accepts) makes a killed SuperNode an error within
about 20 s instead of a minute.
"""
from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    heartbeat = 30.0
    if argv[:1] == ["--heartbeat"]:
        heartbeat = float(argv[1])
        if not 10 <= heartbeat <= 1800:  # the SuperLink refuses others
            raise SystemExit(f"--heartbeat={heartbeat}; valid: 10 to 1800 seconds")
        argv = argv[2:]
    from flwr.supercore import heartbeat as sender
    from flwr.supernode import fleet_http_connection
    from flwr.supernode.cli import flower_supernode

    # Both read the constant by name at each call: the interval announced, and the one kept.
    fleet_http_connection.HEARTBEAT_DEFAULT_INTERVAL = heartbeat
    sender.HEARTBEAT_DEFAULT_INTERVAL = heartbeat
    sys.argv = ["flower-supernode", *argv]
    flower_supernode()


if __name__ == "__main__":
    main()
