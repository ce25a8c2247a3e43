"""Where this process runs: the repository, the cores it may use, the CPU. Nothing here imports
torch, so that ``fedrepro reproduce``'s own process (which only schedules) stays small."""
from __future__ import annotations

import contextlib
import os
import platform
import subprocess
from pathlib import Path
from typing import Iterator, Mapping


# The folder that holds the fedrepro package (the repository, in a checkout).
PACKAGE_PARENT = Path(__file__).resolve().parents[2]


def repo_root() -> Path:
    return PACKAGE_PARENT if (PACKAGE_PARENT / "pyproject.toml").is_file() else Path.cwd()


def cpu_cores() -> int:
    """The cores this process may run on (its affinity mask where the OS has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1


def cpu_model() -> str:
    """The CPU's model name (timings from another CPU are not comparable)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def commits_since(root: Path, commit: str, paths: tuple[str, ...] = ("fedrepro",)) -> list[str] | None:
    """``git log --oneline commit..HEAD -- paths`` at ``root``, newest first; None when git cannot tell
    (no checkout, or a commit it does not have)."""
    try:
        out = subprocess.run(["git", "-C", str(root), "log", "--oneline", f"{commit.removesuffix('-dirty')}..HEAD",
                              "--", *paths], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.splitlines() if out.returncode == 0 else None


def git_commit(root: Path, dirty_paths: tuple[str, ...] = ()) -> str | None:
    """The short commit of the checkout at ``root``, with ``-dirty`` when any of ``dirty_paths``
    differs from it; None outside a git checkout."""
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, timeout=10).stdout.strip()
        dirty = bool(dirty_paths) and bool(subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--", *dirty_paths], capture_output=True, text=True,
            timeout=10).stdout.strip())
    except (OSError, subprocess.SubprocessError):
        return None
    return (head + ("-dirty" if dirty else "")) if head else None


# Whether runs missing from the store are read from the reference archive (fedrepro.runs.archive);
# here, not there, so that a process that only schedules can set it without loading the store.
ENV_ARCHIVE = "FEDREPRO_ARCHIVE"


@contextlib.contextmanager
def environ_set(values: Mapping[str, str | None]) -> Iterator[None]:
    """While open, each variable in ``values`` is its value (None: unset); on exit each is what it was
    before, unset if it was unset, whatever happened to it in between."""
    def put(vals: Mapping[str, str | None]) -> None:
        for k, v in vals.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v

    before = {k: os.environ.get(k) for k in values}
    put(values)
    try:
        yield
    finally:
        put(before)


def environ_kept(name: str, value: str | None = None) -> contextlib.AbstractContextManager[None]:
    """While open, ``$name`` is ``value`` (left as it is when ``value`` is None); on exit it is what it
    was before, unset if it was unset, whatever happened to it in between."""
    return environ_set({name: os.environ.get(name) if value is None else value})
