"""A real Flower deployment on this machine (loopback, insecure local mode), in one command::

    python -m fedrepro.flower.deploy --profile smoke --method fedavg --nodes 2

It starts one SuperLink and ``--nodes`` SuperNodes, each holding a contiguous block of the clients
(``--node-config "clients='0-1'"``; each node derives only those clients' partitions from the config),
submits the federation with ``flwr run`` and waits for it. The ServerApp (:mod:`.app`) stores the
run in the usual runs folder; the command prints its summary, then stops every process it started.
Logs of each process are kept under ``<runs_dir>/.flower/<hash>/`` when the run fails.

Across machines the same pieces are started by hand (docs/scale-out-flower.md): ``flower-superlink``
on one host, ``flower-supernode --superlink HOST:8000 --node-config "clients='...'"`` on the others,
and ``flwr run`` of the app written by :func:`write_app` from any machine that reaches the SuperLink.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from ..config import RunConfig, make_config, parse_cli_sets
from ..errors import ConfigError, FederationError, FedreproError
from ..runs.store import RunResult, RunStore
from . import require_flwr
from ..runs.store import default_runs_dir

_PACKAGE_ROOT = Path(__file__).resolve().parents[2]
_BIN = Path(sys.executable).parent
# The prefix of the environment variables that switch on Flower's legacy gRPC servers (see Deployment._env).
_FLWR_INTERNAL = "FLWR_INTERNAL_GRPC_"


def client_blocks(num_clients: int, nodes: int) -> list[str]:
    """``nodes`` contiguous blocks of client ids as node-config specs (``"0-4"``), as even as can be."""
    if not 1 <= nodes <= num_clients:
        raise ConfigError(f"nodes={nodes}; valid: 1 to data.num_clients={num_clients} (each node holds >= 1 client)")
    base, extra = divmod(num_clients, nodes)
    out, start = [], 0
    for i in range(nodes):
        n = base + (i < extra)
        out.append(f"{start}-{start + n - 1}")
        start += n
    return out


def write_app(folder: Path, cfg: RunConfig, timeout: float = 3600.0, connect_timeout: float = 120.0) -> Path:
    """A Flower app (``pyproject.toml`` only) whose components are :mod:`.app`'s and whose run config
    holds ``cfg``. Every machine that runs it needs fedrepro importable (installed or on PYTHONPATH)."""
    folder.mkdir(parents=True, exist_ok=True)
    cfg_json = json.dumps(cfg.to_dict(), sort_keys=True)
    (folder / "pyproject.toml").write_text(f"""[build-system]
requires = ["hatchling"]
build-backend = "hatchling.build"

[project]
name = "fedrepro-federation"
version = "1.0.0"
description = "A fedrepro run ({cfg.method.name}, config {cfg.hash()}) as a Flower app"
license = "MIT"
dependencies = []

[tool.flwr.app]
publisher = "fedrepro"

[tool.flwr.app.components]
serverapp = "fedrepro.flower.app:server_app"
clientapp = "fedrepro.flower.app:client_app"

[tool.flwr.app.config]
fedrepro-config = {json.dumps(cfg_json)}
timeout = {float(timeout)}
connect-timeout = {float(connect_timeout)}
""")
    return folder


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_port(port: int, proc: subprocess.Popen, what: str, log: Path, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise FederationError(f"{what} exited with code {proc.returncode} while starting; its log:\n"
                                  + _tail(log))
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise FederationError(f"{what} did not listen on port {port} within {timeout:g} s; its log:\n{_tail(log)}")


def _tail(log: Path, lines: int = 25) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


@dataclass
class Deployment:
    """One SuperLink and ``nodes`` SuperNodes on loopback; a context manager that stops them all.

    ``run(cfg)`` submits a federation with ``flwr run`` and returns the stored run. The processes are
    in ``processes`` (name -> Popen) so that a test can kill a SuperNode mid-run.
    """

    num_clients: int
    nodes: int = 2
    workdir: Path | None = None
    processes: dict[str, subprocess.Popen] = field(default_factory=dict)

    def __post_init__(self) -> None:
        require_flwr()
        self.blocks = client_blocks(self.num_clients, self.nodes)
        self._tmp = self.workdir is None
        self.workdir = Path(self.workdir) if self.workdir else Path(tempfile.mkdtemp(prefix="fedrepro-flower-"))
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.logs = self.workdir / "logs"
        self.logs.mkdir(exist_ok=True)

    def _env(self, home: str) -> dict[str, str]:
        # Not Flower's switches for its legacy gRPC servers (FLWR_INTERNAL_GRPC_CONTROL_API and _FLEET_API):
        # inherited, they would start the Control and Fleet APIs at their default addresses, on every
        # interface (0.0.0.0:9093 and :9092), where in insecure mode anyone who reaches them could
        # submit an app, which is code. This deployment talks to the SuperLink over HTTP only.
        env = {k: v for k, v in os.environ.items() if not k.startswith(_FLWR_INTERNAL)}
        env["FLWR_HOME"] = str(self.workdir / home)
        env["PATH"] = f"{_BIN}{os.pathsep}{env.get('PATH', '')}"  # flwr-serverapp / flwr-clientapp of this venv
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(_PACKAGE_ROOT), env.get("PYTHONPATH")) if p)
        env.setdefault("FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION", "1")  # offline: the venv has everything
        return env

    def _start(self, name: str, argv: list[str], home: str) -> subprocess.Popen:
        log = open(self.logs / f"{name}.log", "wb")
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=self._env(home),
                                cwd=self.workdir, start_new_session=True)
        log.close()
        self.processes[name] = proc
        return proc

    def start(self) -> "Deployment":
        # Flower 1.41 serves the Fleet, Control and ServerApp APIs over HTTP on one port. Every address
        # is passed, and is loopback: insecure mode lets whoever reaches a port join, read and inject
        # messages, or submit an app (code) to run (tests/test_network_exposure.py lists the sockets).
        self.port = _free_port()
        link = self._start("superlink", [str(_BIN / "flower-superlink"), "--insecure",
                                         "--disable-runtime-dependency-installation",
                                         "--host", "127.0.0.1", "--port", str(self.port)], "superlink")
        _wait_port(self.port, link, "flower-superlink", self.logs / "superlink.log")
        for i, block in enumerate(self.blocks):
            # Flower's own SuperNode, unchanged: it calls in every 30 s and the SuperLink declares it
            # gone after two missed calls, so a killed node is an error within about a minute.
            self._start(f"supernode-{i}", [str(_BIN / "flower-supernode"), "--insecure",
                                           "--superlink", f"127.0.0.1:{self.port}",
                                           "--node-config", f"clients='{block}'",
                                           "--host", "127.0.0.1", "--port", str(_free_port())], f"node-{i}")
        home = self.workdir / "cli"
        home.mkdir(exist_ok=True)
        (home / "config.toml").write_text(f'[superlink]\ndefault = "fedrepro"\n\n[superlink.fedrepro]\n'
                                          f'address = "127.0.0.1:{self.port}"\ninsecure = true\n')
        return self

    def run(self, cfg: RunConfig, timeout: float = 3600.0, connect_timeout: float = 120.0,
            wait: float | None = None) -> RunResult:
        """Submit ``cfg`` and wait (``wait`` seconds, default unbounded) until the ServerApp has
        stored it; a FederationError with the ServerApp's log when it stopped without doing so."""
        if cfg.runs_dir is None:

            cfg = cfg.replace(runs_dir=str(default_runs_dir().resolve()))
        cfg = cfg.replace(runs_dir=str(Path(cfg.runs_dir).resolve()), progress=False)
        if cfg.data.num_clients != self.num_clients:
            raise ConfigError(f"data.num_clients={cfg.data.num_clients}, but this deployment's nodes hold "
                              f"{self.num_clients} clients")
        store = RunStore(cfg.runs_dir)
        app = write_app(self.workdir / f"app-{cfg.hash()}", cfg, timeout, connect_timeout)
        log = self.logs / f"flwr-run-{cfg.hash()}.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen([str(_BIN / "flwr"), "run", str(app), "fedrepro", "--stream"], stdout=out,
                                    stderr=subprocess.STDOUT, env=self._env("cli"), cwd=self.workdir,
                                    start_new_session=True)
        self.processes["flwr-run"] = proc
        try:
            proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            raise FederationError(f"the federation did not finish within {wait:g} s; flwr run's log:\n{_tail(log)}") \
                from None
        if store.status(cfg) != "done":
            raise FederationError(f"the federation stopped without storing run {cfg.hash()} (flwr run exited with "
                                  f"{proc.returncode}); its log ({log}):\n{_tail(log, 40)}")
        return store.load(cfg)

    def close(self) -> None:
        """Stop every process this deployment started (SIGTERM, then SIGKILL after 10 s)."""
        for proc in self.processes.values():
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + 10
        for proc in self.processes.values():
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()

    def __enter__(self) -> "Deployment":
        try:
            return self.start()
        except BaseException:
            self.close()  # what started before the failure
            raise

    def __exit__(self, *exc) -> None:
        self.close()
        if self._tmp and exc[0] is None:
            shutil.rmtree(self.workdir, ignore_errors=True)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m fedrepro.flower.deploy", description=__doc__.splitlines()[0])
    p.add_argument("--profile", default=None, help="smoke | laptop (default) | paper")
    p.add_argument("--config", default=None, help="YAML file of overrides")
    p.add_argument("--method", default=None, help="shortcut for --set method.name=...")
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--nodes", type=int, default=2, help="SuperNodes to start (default 2)")
    p.add_argument("--timeout", type=float, default=3600.0, help="seconds to wait for a round's replies")
    p.add_argument("--workdir", default=None, help="where the processes' homes and logs go (default: a temp folder)")
    p.add_argument("--write-app", default=None, metavar="DIR",
                   help="only write the Flower app of this run to DIR (for `flwr run DIR <superlink>` against "
                        "SuperNodes started by hand) and start nothing")
    args = p.parse_args(argv)
    try:
        sets = parse_cli_sets(args.sets)
        for key, value in (("method.name", args.method), ("seed", args.seed)):
            if value is not None:
                sets[key] = value
        cfg = make_config(args.profile, overrides=sets, yaml_path=args.config)
        if args.write_app:

            runs = Path(cfg.runs_dir) if cfg.runs_dir else default_runs_dir()
            cfg = cfg.replace(runs_dir=str(runs.resolve()), progress=False)
            app = write_app(Path(args.write_app), cfg, timeout=args.timeout)
            print(f"wrote {app / 'pyproject.toml'}: config {cfg.hash()}, stored on the SuperLink's host in "
                  f"{cfg.runs_dir}")
            return 0
        if args.nodes < 1:
            raise ConfigError(f"--nodes={args.nodes}; valid: a positive integer")
        with Deployment(cfg.data.num_clients, args.nodes, Path(args.workdir) if args.workdir else None) as dep:
            print(f"SuperLink on 127.0.0.1:{dep.port}, SuperNodes holding clients "
                  + ", ".join(dep.blocks), flush=True)
            try:
                res = dep.run(cfg, timeout=args.timeout)
            except FedreproError:
                print(f"logs: {dep.logs}", file=sys.stderr)
                dep._tmp = False  # keep the logs
                raise
        print(json.dumps(res.summary, indent=2))
        print(f"results: {res.path}")
        return 0
    except FedreproError as e:
        print(f"fedrepro: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
