"""Where fedrepro writes: one output root for runs, executed notebooks, claims and figures.

The root is chosen, first match wins, by

1. an explicit argument: ``output_root(root)`` / ``output_path(..., root=)``, or for the whole
   process the setting ``output_root`` (``fedrepro.env.settings.configure(output_root=...)``);
2. the environment variable ``FEDREPRO_OUTPUT``;
3. the per-user data folder ``$XDG_DATA_HOME/fedrepro`` (``~/.local/share/fedrepro`` when
   ``XDG_DATA_HOME`` is unset), so that a notebook run from anywhere, a read-only checkout or a
   shared install never writes over a repository's committed figures.

``make reproduce``, ``make lab`` and ``make smoke`` set ``FEDREPRO_OUTPUT`` to the repository.
The setting is not part of any run's config, so it never changes a run's hash. Under the root
(:data:`LAYOUT`)::

    runs/<config-hash>/              stored runs ($FEDREPRO_RUNS moves this folder alone)
    output/<profile>/notebooks/      executed notebooks and timings.json of `fedrepro reproduce`
    output/<profile>/trace/          which runs and figures each rendered notebook read and wrote
    output/<profile>/claims/         each notebook's claim verdicts (JSON)
    figures/                         laptop-profile figures (the ones the repository commits)
    figures/paper/                   paper-profile figures
    output/<profile>/figures/        figures of every other profile (smoke)
    docs/results/<profile>/          the results pages `fedrepro results` writes

``$FEDREPRO_FIGURES`` moves the figures folder alone, as ``$FEDREPRO_RUNS`` does the runs.

The setting ``tensorboard`` (else ``$FEDREPRO_TENSORBOARD``; off by default) is the folder that
:mod:`fedrepro.runs.tensorboard` writes each trained run's per-round metrics to; it is outside the
output root and, like it, never part of a run's hash.
"""
from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

from ..errors import ConfigError
from .host import environ_kept

ENV_OUTPUT = "FEDREPRO_OUTPUT"
ENV_RUNS = "FEDREPRO_RUNS"
ENV_FIGURES = "FEDREPRO_FIGURES"
ENV_TENSORBOARD = "FEDREPRO_TENSORBOARD"
ENV_DATA_ROOT = "FEDREPRO_DATA"  # read by fedrepro.data.root
# The data root that reads no files: every dataset is served as seeded stand-in images of its real
# shape (fedrepro.data.rehearsal), to rehearse a profile end to end where the data is not installed.
REHEARSAL_ROOT = "rehearsal:"
# MiB of stand-in images one rehearsal dataset may take (fedrepro.data.rehearsal.budget_bytes).
ENV_REHEARSAL_BUDGET = "FEDREPRO_REHEARSAL_MIB"
# The paper profile's ViT-B/16 IN-21k weights: a local file named by this variable (our choice of
# name), read through timm's own loader (fedrepro.papers.pep_fedpt.setup; docs/backbones.md).
ENV_VIT_B16_WEIGHTS = "FEDREPRO_VIT_B16_WEIGHTS"


@dataclass
class Settings:
    """Process-wide settings that are not part of a run's config (and so never of its hash)."""

    output_root: Path | None = None  # None: $FEDREPRO_OUTPUT, else the per-user data folder
    tensorboard: Path | None = None  # None: $FEDREPRO_TENSORBOARD, else no TensorBoard logging


SETTINGS = Settings()
_KEEP = object()  # configure()'s "leave this setting as it is"


# The values a yes/no environment variable may take (lower case, stripped); unset or empty is no.
FLAG_TRUE = frozenset({"1", "true", "yes", "on"})
FLAG_FALSE = frozenset({"", "0", "false", "no", "off"})


def env_flag(name: str) -> bool:
    """The yes/no environment variable ``name``: a one-line error naming it for any other value, so a
    misspelt ``false`` never reads as yes."""
    raw = os.environ.get(name, "").strip().lower()
    if raw in FLAG_TRUE:
        return True
    if raw in FLAG_FALSE:
        return False
    raise ConfigError(f"environment variable {name}={os.environ[name]!r} is not a yes/no value; "
                      "valid: 1/0, true/false, yes/no, on/off, or unset")


def configure(output_root: str | os.PathLike[str] | None = _KEEP,  # type: ignore[assignment]
              *, tensorboard: str | os.PathLike[str] | None = _KEEP) -> Settings:  # type: ignore[assignment]
    """Set the output root and/or the TensorBoard log folder for this process; a setting not given
    stays as it is, ``None`` goes back to its environment variable (``FEDREPRO_OUTPUT`` /
    ``FEDREPRO_TENSORBOARD``) or default. Processes it starts (``fedrepro reproduce``'s workers
    and notebook kernels) get both through the environment, see :func:`child_env`."""
    if output_root is not _KEEP:
        if output_root is not None and not isinstance(output_root, (str, os.PathLike)):
            raise ConfigError(f"output_root={output_root!r}; valid: a folder path (str or Path), or None for "
                              f"${ENV_OUTPUT} / the default {default_output_root()}")
        SETTINGS.output_root = None if output_root is None else Path(output_root).expanduser()
    if tensorboard is not _KEEP:
        if tensorboard is not None and (not isinstance(tensorboard, (str, os.PathLike)) or str(tensorboard) == ""):
            raise ConfigError(f"tensorboard={tensorboard!r}; valid: a folder path (str or Path) to write "
                              f"TensorBoard logs to, or None for ${ENV_TENSORBOARD} (unset: no logging)")
        SETTINGS.tensorboard = None if tensorboard is None else Path(tensorboard).expanduser()
    return SETTINGS


def tensorboard_dir() -> tuple[Path, str] | None:
    """The TensorBoard log folder and the setting that chose it, or None when logging is off (the
    default): the ``tensorboard`` setting, else ``$FEDREPRO_TENSORBOARD``."""
    if SETTINGS.tensorboard is not None:
        return SETTINGS.tensorboard, "fedrepro.env.settings.configure(tensorboard=...)"
    env = os.environ.get(ENV_TENSORBOARD)
    return (Path(env).expanduser(), f"${ENV_TENSORBOARD}") if env else None


def default_output_root() -> Path:
    """``$XDG_DATA_HOME/fedrepro``, else ``~/.local/share/fedrepro`` (the XDG base-directory default)."""
    base = os.environ.get("XDG_DATA_HOME") or "~/.local/share"
    return Path(base).expanduser() / "fedrepro"


def output_root(root: str | os.PathLike[str] | None = None) -> Path:
    """The output root: ``root``, else the ``output_root`` setting, else ``$FEDREPRO_OUTPUT``, else
    :func:`default_output_root`. Resolved only; nothing is created."""
    if root is not None:
        return Path(root).expanduser()
    if SETTINGS.output_root is not None:
        return SETTINGS.output_root
    env = os.environ.get(ENV_OUTPUT)
    return Path(env).expanduser() if env else default_output_root()


def under_output_root(path: str | os.PathLike[str]) -> str | None:
    """``path`` relative to the output root, or None where it lies elsewhere (a folder that its own
    variable moved): what a report or a notebook prints, free of this machine's absolute paths."""
    p, root = Path(path), output_root()
    return str(p.relative_to(root)) if p.is_relative_to(root) else None


def source(root: str | os.PathLike[str] | None = None) -> str:
    """Which setting chose the output root, for error messages."""
    if root is not None:
        return "the root argument"
    if SETTINGS.output_root is not None:
        return "fedrepro.env.settings.configure(output_root=...)"
    if os.environ.get(ENV_OUTPUT):
        return f"${ENV_OUTPUT}"
    return f"the default (set ${ENV_OUTPUT} to write elsewhere)"


def _figures(profile: str) -> str:
    return {"laptop": "figures", "paper": "figures/paper"}.get(profile, f"output/{profile}/figures")


# Every output's place under the root, by kind (profile -> path relative to the root), and the
# environment variable, if any, that moves that one folder on its own.
LAYOUT: dict[str, Callable[[str], str]] = {
    "runs": lambda profile: "runs",
    "notebooks": lambda profile: f"output/{profile}/notebooks",
    "trace": lambda profile: f"output/{profile}/trace",
    "claims": lambda profile: f"output/{profile}/claims",
    "figures": _figures,
    "results": lambda profile: f"docs/results/{profile}",
}
OVERRIDES = {"runs": ENV_RUNS, "figures": ENV_FIGURES}


def output_path(kind: str, profile: str = "laptop", root: str | os.PathLike[str] | None = None,
                create: bool = False) -> Path:
    """The folder of ``kind`` (a key of :data:`LAYOUT`) at ``profile``: its own variable
    (:data:`OVERRIDES`) when set and no ``root`` is given, else its place under :func:`output_root`.
    With ``create``, the folder is made, and a folder that cannot be written is a ConfigError naming
    the setting that chose it."""
    if kind not in LAYOUT:
        raise ConfigError(f"unknown output kind {kind!r}; valid: {', '.join(LAYOUT)}")
    env = OVERRIDES.get(kind)
    if root is None and env and os.environ.get(env):
        path, chosen_by = Path(os.environ[env]).expanduser(), f"${env}"
    else:
        base = output_root(root)
        path, chosen_by = base / LAYOUT[kind](profile), f"the output root {str(base)!r} ({source(root)})"
    if create:
        ensure_writable(path, chosen_by)
    return path


def ensure_writable(path: Path, chosen_by: str, what: str = "outputs", hint: str | None = None,
                    where: str | None = None) -> Path:
    """Create ``path`` (and its parents); a ConfigError naming ``chosen_by`` (and ``hint``, what to do)
    when it cannot be created or written. ``what``: what goes there, for the message; ``where``
    replaces the message's opening (the setting and value at fault) where the caller names it better."""
    hint = hint or f"set {ENV_OUTPUT} (or fedrepro.env.settings.configure(output_root=...)) to a writable folder"
    where = where or f"cannot write {what} to {str(path)!r}, chosen by {chosen_by}"
    try:
        path.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError) as e:
        raise ConfigError(f"{where}: {e.filename or path} is a file; {hint}") from e
    except OSError as e:
        raise ConfigError(f"{where}: {e.strerror or e}; {hint}") from e
    if not os.access(path, os.W_OK | os.X_OK):
        raise ConfigError(f"{where}: the folder is not writable; {hint}")
    return path


def child_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """``env`` (default: this process's) with ``FEDREPRO_OUTPUT`` set to this process's output root
    (and ``FEDREPRO_TENSORBOARD`` to its ``tensorboard`` setting, when set), so that workers and
    notebook kernels write where this process does."""
    out = dict(os.environ if env is None else env)
    out[ENV_OUTPUT] = str(output_root())
    if SETTINGS.tensorboard is not None:
        out[ENV_TENSORBOARD] = str(SETTINGS.tensorboard)
    return out


@contextlib.contextmanager
def for_children() -> Iterator[None]:
    """While open, processes started from this one (a spawned pool's workers start whenever a task
    needs one) inherit the ``tensorboard`` setting through ``$FEDREPRO_TENSORBOARD``."""
    if SETTINGS.tensorboard is None:
        yield
        return

    with environ_kept(ENV_TENSORBOARD, str(SETTINGS.tensorboard)):
        yield
