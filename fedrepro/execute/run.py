"""``fedrepro.run(cfg)``: one config's run, loaded from the store when it is finished, otherwise trained
by an engine (this process's simulator, or Flower's) into the store.
"""
from __future__ import annotations

import functools
import os
from typing import Any, Callable, Iterable, Mapping

from ..config import RunConfig, check_seeds, make_config
from ..errors import ConfigError
from ..flower import require_flwr
from ..runs.store import RunResult, RunStore
from ..runs.train import train_inprocess, train_or_load
from ..flower.simulation import train  # defers flwr


def run(cfg: RunConfig | Mapping[str, Any] | None = None, *, force_progress: bool | None = None,
        on_round_end=None, on_busy: str = "wait", on_stale: str | None = None, store: RunStore | None = None,
        engine: str = "inprocess", engine_options: Mapping[str, Any] | None = None,
        **overrides: Any) -> RunResult:
    """Run one config (or load it when already finished) and return its :class:`RunResult`.

    ``cfg`` may be a :class:`RunConfig`, a dict of overrides, a YAML config file's path, or None;
    keyword overrides use ``__`` for nesting: ``run(profile="smoke", method__name="fedper",
    train__rounds=3)``.

    ``on_busy`` is what happens when another process is writing the same run (same config and
    runs folder): ``"wait"`` for it, then reuse its result (or resume the run if it stopped
    unfinished); ``"reuse"``: wait for its result but never train here (RunBusyError if it stopped
    unfinished); ``"error"``: raise :class:`~fedrepro.errors.RunBusyError` at once.

    ``on_stale`` (default ``$FEDREPRO_STALE``, else ``"retrain"``) is what happens to a stored run
    whose code fingerprint differs from today's code (:mod:`fedrepro.runs.fingerprint`): ``"retrain"``
    moves it to ``<runs>/.stale/`` and trains the config anew, ``"keep"`` reuses it, ``"error"``
    raises :class:`~fedrepro.errors.StaleRunError`.

    ``store``: the store to train into instead of ``RunStore(cfg.runs_dir)`` (a Ray worker trains
    into a private one and sends the files to the driver's; the config records ``runs_dir`` as given).
    ``engine`` (:data:`ENGINES`) trains a run that is not stored yet: ``"inprocess"`` (this process's
    simulator) or ``"flower"`` (Flower's simulation engine, :mod:`fedrepro.flower.simulation`). Both
    give the same numbers, so the engine is not part of the config hash; ``meta.json`` records it.
    ``engine_options`` go to the engine (Flower's: ``nodes``, ``cpus``, ``timeout``).
    """
    trainer = engine_trainer(engine, engine_options)
    if cfg is not None and not isinstance(cfg, (RunConfig, Mapping, str, os.PathLike)):
        raise ConfigError(f"run(cfg={cfg!r}); valid: a RunConfig, a mapping of config keys, a YAML file's path, "
                          "or None")
    if not isinstance(cfg, RunConfig):
        profile = overrides.pop("profile", None)
        if isinstance(cfg, (str, os.PathLike)):  # a YAML config file, as `fedrepro run --config` takes
            cfg = make_config(profile, yaml_path=cfg, **overrides)
        else:
            cfg = make_config(profile, overrides=dict(cfg or {}), **overrides)
    elif overrides:
        cfg = cfg.replace(**{k.replace("__", "."): v for k, v in overrides.items()})
    return train_or_load(cfg, trainer, force_progress=force_progress, on_round_end=on_round_end, on_busy=on_busy,
                         on_stale=on_stale, store=store)


# Who trains a run that is not stored yet (``run(engine=...)``, ``fedrepro run --engine``).
ENGINES: dict[str, Callable[..., RunResult]] = {"inprocess": train_inprocess, "flower": train}


def engine_trainer(engine: str, options: Mapping[str, Any] | None = None) -> Callable[..., RunResult]:
    """The trainer of ``engine`` with its ``options`` bound (the in-process engine takes none)."""
    try:
        trainer = ENGINES[engine]
    except (KeyError, TypeError):
        raise ConfigError(f"engine={engine!r}; valid: {', '.join(ENGINES)}") from None
    if engine == "flower":  # before anything is written: a missing package is bad input, not a half-made run
        require_flwr(simulation="grid" not in (options or {}))
    if not options:
        return trainer
    if engine == "inprocess":
        raise ConfigError(f"engine_options={dict(options)!r}: the in-process engine takes none")
    return functools.partial(trainer, **options)


def run_seeds(cfg: RunConfig, seeds: Iterable[int], **kw: Any) -> list[RunResult]:
    return [run(cfg.replace(seed=s), **kw) for s in check_seeds(seeds)]
