"""Where this process runs: the repository, the cores it may use, the CPU. Nothing here imports
torch, so that ``fedrepro reproduce``'s own process (which only schedules) stays small."""
from __future__ import annotations

import os
import platform
from pathlib import Path


def repo_root() -> Path:
    here = Path(__file__).resolve().parent.parent
    return here if (here / "pyproject.toml").is_file() else Path.cwd()


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
