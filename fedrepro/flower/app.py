"""The apps a deployed federation loads (``[tool.flwr.app.components]`` of the app that
:mod:`.deploy` writes): ``client_app`` on every SuperNode, ``server_app`` behind the SuperLink.

The ServerApp reads the run from the app's run config (``fedrepro-config``: the resolved config as
JSON) and trains it through :func:`fedrepro.runs.train.train_or_load` over the SuperLink's Grid, so the run
lands in the store (``runs_dir`` on the SuperLink's host) exactly as a local run does: found if it
is finished, locked while it trains, finished with the same files and summary.
"""
from __future__ import annotations

import functools
import json
import logging

from flwr.app import Context
from flwr.serverapp import Grid, ServerApp

from ..config import from_dict
from .client import app as client_app

__all__ = ["client_app", "server_app"]
log = logging.getLogger("fedrepro")

server_app = ServerApp()


@server_app.main()
def main(grid: Grid, context: Context) -> None:
    from ..runs.train import train_or_load
    from .simulation import train
    rc = context.run_config
    cfg = from_dict(json.loads(str(rc["fedrepro-config"])))
    trainer = functools.partial(train, grid=grid, timeout=float(rc.get("timeout", 3600.0)),
                                connect_timeout=float(rc.get("connect-timeout", 120.0)))
    res = train_or_load(cfg, trainer, on_busy="error")
    log.warning("fedrepro: run %s finished: best %.4f, final %.4f; stored in %s", cfg.hash(), res.best, res.final,
                res.path)
