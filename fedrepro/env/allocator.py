"""The memory allocator of the processes that train: tcmalloc or jemalloc where installed.

A training step on the laptop's models allocates and frees dozens of activation and gradient
buffers of a few hundred KB each, so the allocator is on the hot path; tcmalloc and jemalloc serve
such churn from per-thread caches. Preloaded into the pool's workers and the notebook kernels of
``fedrepro reproduce``, either trained the laptop's conv models 5-12% faster than glibc's malloc
on this CPU (docs/speed.md) and gives the same numbers bit for bit
(``tests/test_allocator.py``): the allocator decides where tensors live, never what is summed.

``FEDREPRO_ALLOCATOR`` chooses: ``auto`` (the default: tcmalloc, else jemalloc, else the system's),
``system``, ``tcmalloc``, ``jemalloc``, or the path of a shared library. Preloading needs Linux's
dynamic loader (``LD_PRELOAD``); elsewhere ``auto`` means the system allocator.
"""
from __future__ import annotations

import contextlib
import ctypes.util
import os
import sys
from functools import lru_cache
from pathlib import Path
from typing import Iterator

from ..errors import ConfigError
from .host import environ_kept

ENV = "FEDREPRO_ALLOCATOR"
# Debian's packages: libtcmalloc-minimal4 and libjemalloc2 (`make setup` installs them when root).
LIBRARIES = {"tcmalloc": "tcmalloc_minimal", "jemalloc": "jemalloc"}
CHOICES = ("auto", "system", *LIBRARIES)


def _find(name: str) -> str | None:
    return ctypes.util.find_library(LIBRARIES[name])


def library(setting: str | None = None) -> str | None:
    """The library to preload for ``setting`` (default: ``$FEDREPRO_ALLOCATOR`` or ``auto``); None
    for the system allocator."""
    setting = (os.environ.get(ENV) or "auto") if setting is None else setting
    if setting == "system" or (setting == "auto" and not sys.platform.startswith("linux")):
        return None
    if setting == "auto":
        return next((lib for lib in map(_find, LIBRARIES) if lib), None)
    if setting in LIBRARIES:
        lib = _find(setting)
        if lib is None:
            pkg = {"tcmalloc": "libtcmalloc-minimal4", "jemalloc": "libjemalloc2"}[setting]
            raise ConfigError(f"{ENV}={setting}: lib{LIBRARIES[setting]} is not installed (Debian: apt-get install "
                              f"{pkg}); valid: {', '.join(CHOICES)} or the path of a shared library")
        return lib
    if "/" in setting:
        if not Path(setting).is_file():
            raise ConfigError(f"{ENV}={setting}: no such file; valid: {', '.join(CHOICES)} "
                              "or the path of a shared library")
        return setting
    raise ConfigError(f"{ENV}={setting!r}; valid: {', '.join(CHOICES)} or the path of a shared library")


def child_env(env: dict[str, str] | None = None, setting: str | None = None) -> dict[str, str]:
    """``env`` (default: this process's) with the allocator preloaded for a child process."""
    out = dict(os.environ if env is None else env)
    lib = library(setting)
    if lib is not None:
        preload = [p for p in out.get("LD_PRELOAD", "").split(":") if p]
        if lib not in preload:
            out["LD_PRELOAD"] = ":".join([lib, *preload])
    return out


@contextlib.contextmanager
def for_children(setting: str | None = None) -> Iterator[str | None]:
    """While open, processes started from this one (a spawned pool's workers start whenever a task
    needs one) get the allocator; yields the library, or None."""
    lib = library(setting)
    if lib is None:
        yield None
        return
    with environ_kept("LD_PRELOAD", child_env(setting=setting)["LD_PRELOAD"]):
        yield lib


@lru_cache(maxsize=1)
def in_use() -> str:
    """The allocator this process runs on: ``tcmalloc``, ``jemalloc`` or ``system`` (recorded in
    each run's meta)."""
    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:
        return "system"
    for name, lib in LIBRARIES.items():
        if f"lib{lib}." in maps:
            return name
    return "system"


def release_free_memory() -> None:
    """Give the pages that the allocator holds free back to the OS (tcmalloc and jemalloc keep freed
    pages for reuse, glibc keeps the top of its heaps). A pool worker calls this between tasks, so
    that a worker waiting for its next task holds what it uses, not the high-water mark of the last
    one; the next task's first steps pay a few page faults."""
    libc = ctypes.CDLL(None)
    name = in_use()
    try:
        if name == "tcmalloc":
            libc.MallocExtension_ReleaseFreeMemory()
        elif name == "jemalloc":
            # MALLCTL_ARENAS_ALL (4096): purge the unused dirty pages of every arena.
            libc.mallctl(b"arena.4096.purge", None, None, None, ctypes.c_size_t(0))
        elif sys.platform.startswith("linux"):
            libc.malloc_trim(ctypes.c_size_t(0))
    except AttributeError:  # a libc without malloc_trim (musl): nothing to release
        pass
