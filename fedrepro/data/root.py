"""Where dataset files live, whether we may download them, and the "not found" error.

Resolution order is explicit argument, then environment variable, then default,
so notebooks, CI and clusters can each point at their own copy without code edits.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable

from ..env.settings import ENV_DATA_ROOT, REHEARSAL_ROOT, env_flag
from ..errors import ConfigError, DataNotFoundError

ENV_DOWNLOAD = "FEDREPRO_DOWNLOAD"
DEFAULT_DATA_ROOT = Path("~/.cache/fedrepro/data")



def data_root(root: str | os.PathLike[str] | None = None) -> Path:
    """The data root: ``root`` if given, else ``$FEDREPRO_DATA``, else ``~/.cache/fedrepro/data``.

    The folder is not created; loaders only create it when they download.
    """
    if root is None:
        root = os.environ.get(ENV_DATA_ROOT) or DEFAULT_DATA_ROOT
    return Path(root).expanduser()


def is_rehearsal(root: str | os.PathLike[str] | None = None) -> bool:
    """Whether the data root (``root``, else ``$FEDREPRO_DATA``) is :data:`REHEARSAL_ROOT`."""
    if root is None:
        root = os.environ.get(ENV_DATA_ROOT)
    return root is not None and os.fspath(root) == REHEARSAL_ROOT


def download_allowed(download: bool | None = None) -> bool:
    """Whether loaders may download: ``download`` if given, else ``$FEDREPRO_DOWNLOAD`` (default off).

    Off by default because silent multi-GB downloads on a cluster node (or an
    offline machine hanging on a socket) are worse than a clear error.
    """
    if download is not None:
        if not isinstance(download, bool):
            raise ConfigError(f"download must be True, False or None, got {download!r}")
        return download
    return env_flag(ENV_DOWNLOAD)


def data_not_found(
    dataset: str,
    searched: Iterable[Path],
    *,
    downloadable: bool,
    manual: str | None = None,
    reason: str | None = None,
) -> DataNotFoundError:
    """Build (not raise) the error for a dataset whose files are missing.

    The message names the dataset, every path that was searched, and how to get
    the data, so the user never has to read loader code to fix it. Returned
    rather than raised so call sites read ``raise data_not_found(...)``.
    """
    lines = [f"dataset {dataset!r} not found."]
    if reason:
        lines.append(reason)
    lines.append("Looked in:")
    lines.extend(f"  - {p}" for p in searched)
    lines.append("To get it:")
    if downloadable:
        lines.append(
            f"  - pass download=True to load_dataset (or set {ENV_DOWNLOAD}=1) to download it into the data root"
        )
    if manual:
        lines.append(f"  - {manual}")
    lines.append(
        f"  - or point the data root elsewhere with load_dataset(..., root=...) or {ENV_DATA_ROOT}=/path"
    )
    return DataNotFoundError("\n".join(lines))
