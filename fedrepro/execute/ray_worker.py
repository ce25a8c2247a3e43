"""What runs inside the Ray cluster: one run's training on a worker, and the relay that carries
its checkpoints between the worker and the driver.

A worker trains into a private store in its own temporary folder (no filesystem is shared with the
driver) and returns the finished run's files; the driver writes them into its store
(:class:`fedrepro.runs.store.RunReceiver`). While it trains, the worker sends its newest checkpoint to
the :class:`Relay` (an actor on the driver's node) every ``send_every_s`` seconds and once more
when it fails, and the driver stores each one. A retry (Ray's ``max_retries``, after the worker
process or its node died) starts from the newest checkpoint the relay holds, so a killed worker
loses only the rounds since its last one; a relay that cannot be reached means starting again.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import socket
import tempfile
import threading
import time
from pathlib import Path
from ..errors import ConfigError
from ..runs import fingerprint

# The temporary folders workers train in, one per attempt: <tmp>/fedrepro-ray/<run hash>.<pid>.
SCRATCH = "fedrepro-ray"


class Relay:
    """Per run (keyed by its hash): the newest checkpoint files, the rounds done, the attempts.

    Each attempt gets a token from :meth:`begin`; only the newest attempt may send, so a worker
    presumed dead that still runs cannot overwrite its successor's checkpoints with older ones."""

    def __init__(self) -> None:
        self._runs: dict[str, dict] = {}

    def _run(self, key: str) -> dict:
        return self._runs.setdefault(key, {"files": None, "version": 0, "token": 0, "attempts": 0, "rounds": 0,
                                           "pid": None, "host": None, "resumed_from": []})

    def seed(self, key: str, files: dict | None) -> None:
        """The driver's partial run of ``key`` (or None), where the first attempt starts."""
        self._runs.pop(key, None)
        self._run(key)["files"] = files

    def begin(self, key: str, pid: int, host: str) -> tuple[int, dict | None]:
        r = self._run(key)
        r["token"] += 1
        r["attempts"] += 1
        r["pid"], r["host"] = pid, host
        return r["token"], r["files"]

    def started(self, key: str, token: int, round_: int) -> None:
        r = self._run(key)
        if token == r["token"]:
            r["resumed_from"].append(round_)
            r["rounds"] = round_

    def put(self, key: str, token: int, files: dict) -> bool:
        r = self._run(key)
        if token != r["token"]:
            return False
        r["files"], r["version"] = files, r["version"] + 1
        return True

    def progress(self, key: str, token: int, rounds: int) -> None:
        r = self._run(key)
        if token == r["token"]:
            r["rounds"] = rounds

    def status(self) -> dict[str, dict]:
        return {k: {n: v for n, v in r.items() if n not in ("files", "token")} for k, r in self._runs.items()}

    def files(self, key: str) -> tuple[dict | None, int]:
        r = self._run(key)
        return r["files"], r["version"]

    def forget(self, key: str) -> None:
        self._runs.pop(key, None)


def _scratch(key: str) -> Path:
    """This attempt's folder; those of earlier attempts of the run whose process is gone are removed."""
    root = Path(tempfile.gettempdir()) / SCRATCH
    root.mkdir(exist_ok=True)
    for old in root.glob(f"{key}.*"):
        try:
            os.kill(int(old.name.rsplit(".", 1)[-1]), 0)
        except (ValueError, ProcessLookupError):
            shutil.rmtree(old, ignore_errors=True)
        except PermissionError:  # another user's live process
            pass
    here = root / f"{key}.{os.getpid()}"
    shutil.rmtree(here, ignore_errors=True)
    here.mkdir()
    return here


class _Sender:
    """Sends the run's checkpoint to the relay whenever the file changed, every ``every`` seconds."""

    def __init__(self, folder: Path, relay, key: str, token: int, every: float):
        self.folder, self.relay, self.key, self.token, self.every = folder, relay, key, token, every
        self._seen = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="fedrepro-ray-sender", daemon=True)

    def send(self) -> None:
        import ray

        from ..runs.store import PARTIAL_FILES, read_files

        try:
            st = (self.folder / "checkpoint.pt").stat()
        except FileNotFoundError:
            return
        sig = (st.st_ino, st.st_mtime_ns, st.st_size)
        if sig == self._seen:
            return
        files = read_files(self.folder, PARTIAL_FILES)
        if "checkpoint.pt" in files:  # gone when the run finished meanwhile
            ray.get(self.relay.put.remote(self.key, self.token, files))
            self._seen = sig

    def _loop(self) -> None:
        while not self._stop.wait(self.every):
            with contextlib.suppress(Exception):  # a missed send costs rounds at a retry, never the run
                self.send()

    def __enter__(self) -> "_Sender":
        self._thread.start()
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self._stop.set()
        self._thread.join()
        if exc_type is not None:  # the newest checkpoint it reached, for the retry or the driver
            with contextlib.suppress(Exception):
                self.send()


def _start_round(files: dict | None) -> int:
    if not files or "checkpoint.pt" not in files:
        return 0
    from ..runs.store import read_checkpoint

    return int(read_checkpoint(files["checkpoint.pt"], Path("checkpoint.pt"))["state"]["next_round"])


def train_run(cfg, relay, key: str, on_stale: str, send_every_s: float, driver_code: str) -> dict:
    """Train ``cfg`` (its hash is ``key``) on this worker, from the newest checkpoint the relay
    holds; return ``{"files": the finished run folder's files, "seconds": ...}``."""
    import ray

    from .run import run
    from ..runs.store import FINISHED_FILES, RunStore, atomic_write_bytes, read_files

    host = socket.gethostname()
    mine = fingerprint.record(cfg)["code_fingerprint"]
    if mine != driver_code:
        raise ConfigError(f"the Ray worker on {host} runs other fedrepro code than the driver (code fingerprint "
                          f"{mine[:12]}, driver {driver_code[:12]}); install the same checkout on every node")
    try:
        token, start = ray.get(relay.begin.remote(key, os.getpid(), host))
    except ray.exceptions.RayError:  # no relay: start again, send nothing
        token, start, relay = 0, None, None
    t0 = time.perf_counter()
    scratch = _scratch(key)
    try:
        store = RunStore(scratch)
        store.prepare_root()
        folder = store.path(cfg)
        if start:
            folder.mkdir()
            for name, data in start.items():
                atomic_write_bytes(folder / name, data)
        if relay is not None:
            relay.started.remote(key, token, _start_round(start))

        def on_round_end(state) -> None:
            if relay is not None:
                relay.progress.remote(key, token, state.next_round)

        with (_Sender(folder, relay, key, token, send_every_s) if relay is not None else contextlib.nullcontext()):
            result = run(cfg.replace(progress=False), store=store, on_stale=on_stale, on_round_end=on_round_end)
        return {"files": read_files(result.path, FINISHED_FILES), "seconds": time.perf_counter() - t0}
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
