"""No process outlives the command that started it.

Three ways a command ends early, and what ends its children each time:

- **SIGTERM or SIGINT** to the command: :func:`children_end_with_me` ends every descendant (pool
  workers, papermill and the kernel it started, which runs in a session of its own) before the
  command stops, so that nothing waits for a worker to finish its run first;
- **the command's death** (SIGKILL, a crash): each pool worker and each papermill process asked the
  kernel for a signal when its parent dies (:func:`die_with_parent`, Linux's parent-death signal);
  a Jupyter kernel polls its papermill parent and exits when it is gone.

The store stays consistent through all of them (its writes are atomic and its locks die with their
process), so the next run of the command resumes where this one stopped.
"""
from __future__ import annotations

import contextlib
import ctypes
import os
import runpy
import signal
import sys
import threading
from typing import Iterator

import psutil

# prctl option: the signal a process gets when the thread that created it exits (linux/prctl.h).
_PR_SET_PDEATHSIG = 1
# How long the children get to exit after SIGTERM before they are killed.
GRACE_S = 3.0


def die_with_parent(parent: int | None = None, sig: int = signal.SIGKILL) -> None:
    """Have the OS send ``sig`` to this process when its parent dies (Linux; elsewhere nothing), and
    exit at once if ``parent`` (its pid) is already gone: it may have died before this ran."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(Exception):  # best effort: no libc prctl, no parent-death signal
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
    if parent is not None and os.getppid() != parent:
        os._exit(1)


def parent_bound(argv: list[str]) -> list[str]:
    """The command line that runs the Python command ``argv`` (``["-m", "papermill", ...]``) in a
    process that gets SIGTERM when this one dies."""
    return [sys.executable, "-m", "fedrepro.env.lifetime", str(os.getpid()), *argv]


def descendants() -> set[int]:
    """The pids of this process's descendants now."""
    try:
        return {p.pid for p in psutil.Process().children(recursive=True)}
    except psutil.Error:
        return set()


def resource_tracker(p: psutil.Process) -> bool:
    """Whether ``p`` is multiprocessing's resource tracker. It is left to end by itself when this
    process exits (its pipe closes): killed first, it is started again, and the new one prints a
    KeyError traceback for every semaphore the workers then release."""
    try:
        return any("multiprocessing.resource_tracker" in arg for arg in p.cmdline())
    except psutil.Error:
        return False


def end_children(grace: float = GRACE_S, keep: set[int] = frozenset()) -> int:
    """SIGTERM every descendant of this process but those in ``keep`` (pids, e.g. :func:`descendants`
    before a pool started), then SIGKILL those still there after ``grace`` seconds; returns how many
    there were. The whole tree is listed first: a kernel whose papermill parent ends first is no
    longer this process's descendant."""
    try:
        tree = [p for p in psutil.Process().children(recursive=True) if p.pid not in keep and not resource_tracker(p)]
    except psutil.Error:
        return 0
    for p in tree:
        with contextlib.suppress(psutil.Error):
            p.terminate()
    _, alive = psutil.wait_procs(tree, timeout=grace)
    for p in alive:
        with contextlib.suppress(psutil.Error):
            p.kill()
    psutil.wait_procs(alive, timeout=grace)
    return len(tree)


class Terminated(KeyboardInterrupt):
    """The command got SIGTERM. A KeyboardInterrupt, so that it passes every ``except Exception``
    on its way out, as Ctrl-C does."""

    signum = signal.SIGTERM


def _on_signal(signum: int, frame) -> None:
    end_children()
    raise Terminated() if signum == signal.SIGTERM else KeyboardInterrupt()


@contextlib.contextmanager
def children_end_with_me() -> Iterator[None]:
    """Within the block, SIGTERM and SIGINT end every child process, then raise :class:`Terminated`
    (or KeyboardInterrupt) here. (Signal handlers can only be set from the main thread: elsewhere
    the block changes nothing.)"""
    main = threading.current_thread() is threading.main_thread()
    old = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)} if main else {}
    for s in old:
        signal.signal(s, _on_signal)
    try:
        yield
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)


def main(argv: list[str]) -> None:
    """``python -m fedrepro.env.lifetime PARENT_PID -m MODULE ARGS...``: run ``MODULE`` as ``python -m``
    would, in a process that gets SIGTERM when PARENT_PID dies."""
    if len(argv) < 3 or argv[1] != "-m":
        raise SystemExit("usage: python -m fedrepro.env.lifetime PARENT_PID -m MODULE [ARGS...]")
    die_with_parent(int(argv[0]), signal.SIGTERM)
    sys.argv = [argv[2], *argv[3:]]
    runpy.run_module(argv[2], run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main(sys.argv[1:])
