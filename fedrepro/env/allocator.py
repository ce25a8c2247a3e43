"""The memory allocator of the processes that train: tcmalloc or jemalloc where installed.

A training step on the laptop's models allocates and frees dozens of activation and gradient
buffers of a few hundred KB each, so the allocator is on the hot path; tcmalloc and jemalloc serve
such churn from per-thread caches. Preloaded into the pool's workers and the notebook kernels of
``fedrepro reproduce``, either trained the laptop's conv models 5-12% faster than glibc's malloc
on this CPU (docs/speed.md) and gives the same numbers bit for bit
(``tests/test_allocator.py``): the allocator decides where tensors live, never what is summed.

``FEDREPRO_ALLOCATOR`` chooses: ``auto`` (the default: tcmalloc, else jemalloc, else the system's),
``system``, ``tcmalloc``, ``jemalloc``, or the path of a tcmalloc or jemalloc shared library
(``libtcmalloc*.so*``, ``libjemalloc*.so*``). Preloading needs Linux's dynamic loader
(``LD_PRELOAD``); elsewhere ``auto`` means the system allocator.

What is recorded is what was loaded: a library is used only once a child process started with it
preloaded shows that it serves ``malloc`` (the dynamic loader skips a file it cannot preload with
a message, and the process goes on with glibc's), and a run's meta records the allocator that
serves ``malloc`` in the process that trained it (:func:`in_use`). A setting that names a file
which is not such a library is a one-line error.
"""
from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import re
import stat
import subprocess
import sys
from functools import lru_cache
from typing import Iterator

from ..errors import ConfigError
from .host import environ_kept

ENV = "FEDREPRO_ALLOCATOR"
# Debian's packages: libtcmalloc-minimal4 and libjemalloc2 (`make setup` installs them when root).
LIBRARIES = {"tcmalloc": "tcmalloc_minimal", "jemalloc": "jemalloc"}
CHOICES = ("auto", "system", *LIBRARIES)


# The file names of the allocators' shared libraries (Debian's libtcmalloc_minimal.so.4 and
# libjemalloc.so.2, and a build's own): what a path in FEDREPRO_ALLOCATOR must be called, and how
# the file that serves malloc tells which allocator a process runs on.
_FILE_NAME = re.compile(r"lib(tcmalloc|jemalloc)[\w+-]*\.so(\.\d+)*")
VALID = (f"{', '.join(CHOICES)} or the path of a tcmalloc or jemalloc shared library (libtcmalloc*.so*, "
         "libjemalloc*.so*)")
# An ELF file's first bytes, and the e_type of a shared object (ET_DYN).
_ELF_MAGIC, _ET_DYN = b"\x7fELF", 3


def _find(name: str) -> str | None:
    return ctypes.util.find_library(LIBRARIES[name])


def claimed(path: str) -> str | None:
    """The allocator a library's file name says it is (``tcmalloc``, ``jemalloc``), or None."""
    m = _FILE_NAME.fullmatch(os.path.basename(path))
    return m.group(1) if m else None


def symbol_file(symbol: str) -> str | None:
    """The real path of the file whose ``symbol`` this process calls (None when no loaded file has
    it, or where it cannot be told): for ``malloc``, glibc's or a preloaded allocator's."""
    class DlInfo(ctypes.Structure):
        _fields_ = [("fname", ctypes.c_char_p), ("fbase", ctypes.c_void_p), ("sname", ctypes.c_char_p),
                    ("saddr", ctypes.c_void_p)]

    try:
        libc = ctypes.CDLL(None)
        dladdr = getattr(libc, "dladdr", None) or ctypes.CDLL(ctypes.util.find_library("dl")).dladdr
        info = DlInfo()
        if not dladdr(ctypes.cast(getattr(libc, symbol), ctypes.c_void_p), ctypes.byref(info)) or not info.fname:
            return None
    except (OSError, AttributeError, TypeError):
        return None
    return os.path.realpath(os.fsdecode(info.fname))


# A function each allocator exports beside malloc, which release_free_memory calls: a library that
# serves malloc without it is not the allocator its name claims.
MARKERS = {"tcmalloc": "MallocExtension_ReleaseFreeMemory", "jemalloc": "mallctl"}


@lru_cache(maxsize=16)
def _preloaded(lib: str, name: str) -> tuple[str | None, str | None]:
    """The files that serve ``malloc`` and allocator ``name``'s marker (:data:`MARKERS`) in a child
    Python started with ``lib`` preloaded (None where none, or where it cannot be told)."""
    env = {**os.environ, "LD_PRELOAD": lib}
    code = ("from fedrepro.env.allocator import symbol_file; "
            f"print(symbol_file('malloc') or ''); print(symbol_file({MARKERS[name]!r}) or '')")
    try:
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None, None
    lines = out.stdout.splitlines()[-2:]
    if out.returncode or len(lines) != 2:
        return None, None
    return lines[0] or None, lines[1] or None


def _elf_problem(path: str) -> str | None:
    """Why ``path`` is not an ELF shared object (None when it is); a FIFO or device is never read."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as e:
        return f"cannot be read ({e.strerror or e})"
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            return "is not a regular file"
        head = f.read(18)
    if len(head) < 18 or head[:4] != _ELF_MAGIC:
        return "is not an ELF shared library"
    order = "little" if head[5] == 1 else "big"
    if int.from_bytes(head[16:18], order) != _ET_DYN:
        return "is an ELF file but not a shared library"
    return None


def check_library(path: str) -> str:
    """``path`` when it is a tcmalloc or jemalloc shared library that, preloaded, serves ``malloc``
    (checked in a child process); otherwise a one-line ConfigError naming the variable."""
    def bad(why: str) -> ConfigError:
        return ConfigError(f"{ENV}={path}: {why}; valid: {VALID}")

    if not os.path.exists(path):
        raise bad("no such file")
    if any(c in path for c in ": \t\n"):  # LD_PRELOAD splits its list there
        raise bad("LD_PRELOAD cannot hold a path with a colon or white space")
    name = claimed(path)
    if name is None:
        raise bad("its file name names neither tcmalloc nor jemalloc")
    problem = _elf_problem(path)
    if problem is not None:
        raise bad(problem)
    served, marker = _preloaded(path, name)
    real = os.path.realpath(path)
    if served != real:
        who = "no file could be told to" if served is None else f"{served} does"
        raise bad(f"preloaded, it does not serve malloc ({who}; the dynamic loader could not preload it, or it is "
                  "no allocator)")
    if marker != real:
        raise bad(f"it serves malloc but has no {MARKERS[name]}, which {name} exports: it is not {name}")
    return os.path.abspath(path)  # a worker that changes its folder preloads the same file


def _named(name: str) -> str | None:
    """The installed library of allocator ``name`` when, preloaded, it serves ``malloc`` (and exports
    the allocator's marker, :data:`MARKERS`); else None."""
    lib = _find(name)
    if lib is None:
        return None
    served, marker = _preloaded(lib, name)
    return lib if served is not None and claimed(served) == name and marker == served else None


def library(setting: str | None = None) -> str | None:
    """The library to preload for ``setting`` (default: ``$FEDREPRO_ALLOCATOR`` or ``auto``); None
    for the system allocator. A library is returned only once a child process preloaded with it
    shows it serving ``malloc``."""
    setting = (os.environ.get(ENV) or "auto") if setting is None else setting
    if setting == "system" or (setting == "auto" and not sys.platform.startswith("linux")):
        return None
    if setting == "auto":
        return next((lib for lib in map(_named, LIBRARIES) if lib), None)
    if setting in LIBRARIES:
        lib = _named(setting)
        if lib is None:
            pkg = {"tcmalloc": "libtcmalloc-minimal4", "jemalloc": "libjemalloc2"}[setting]
            found = _find(setting)
            why = (f"lib{LIBRARIES[setting]} is not installed (Debian: apt-get install {pkg})" if found is None else
                   f"{found} does not serve malloc when preloaded (the dynamic loader could not preload it)")
            raise ConfigError(f"{ENV}={setting}: {why}; valid: {VALID}")
        return lib
    if "/" in setting:
        return check_library(setting)
    raise ConfigError(f"{ENV}={setting!r}; valid: {VALID}")


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
    each run's meta): the one whose library serves ``malloc`` here, not the one a setting asked for."""
    served = symbol_file("malloc")
    return (claimed(served) if served else None) or "system"


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
