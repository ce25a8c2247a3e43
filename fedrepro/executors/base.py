"""The executor registry, the executors' common options and the local executor."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar, ContextManager

from ..errors import ConfigError
from ..params import check_fields, hp
from ..registry import Registry

EXECUTORS: Registry[type["Executor"]] = Registry("executor")


@dataclass(frozen=True)
class RunOutcome:
    """What became of a run handed to a remote executor: ``trained`` there (in ``seconds`` of
    training, over ``attempts`` tries), found ``stored`` (finished already), or ``busy`` (another
    process holds its lock and will store it; :func:`fedrepro.run` waits for it)."""

    status: str
    seconds: float = 0.0
    attempts: int = 0


@dataclass(frozen=True)
class Executor:
    """Common to every executor: its registered ``name``, and whether its runs train elsewhere
    (``remote``: they take no local worker slot and come back as files)."""

    name: ClassVar[str] = ""
    remote: ClassVar[bool] = False

    @classmethod
    def from_options(cls, **options: Any) -> "Executor":
        valid = [f.name for f in dataclasses.fields(cls)]
        unknown = sorted(set(options) - set(valid))
        if unknown:
            raise ConfigError(f"unknown option {unknown[0]!r} for executor {cls.name!r}; valid: "
                              f"{', '.join(valid) or 'none'}")
        return cls(**options)

    def session(self, progress: bool = True, desc: str = "runs") -> ContextManager:
        """A remote executor's connection, which takes runs (``submit(cfg) -> Future[RunOutcome]``)."""
        raise NotImplementedError(f"executor {self.name!r} trains runs in this machine's worker pool")


@EXECUTORS.register("local")
@dataclass(frozen=True)
class LocalExecutor(Executor):
    """Worker processes on this machine; ``workers``: how many (default: the cores over the runs'
    thread counts, ``FEDREPRO_WORKERS`` if set)."""

    name: ClassVar[str] = "local"
    workers: int | None = hp(None, ge=1)

    def __post_init__(self) -> None:
        check_fields(self)


def make_executor(executor: "str | Executor | None" = None, **options: Any) -> Executor:
    """An executor from its name and options (``make_executor("ray", address="auto", num_gpus=1)``),
    or ``executor`` itself when it is one already; None is ``local``."""
    if isinstance(executor, Executor):
        if options:
            raise ConfigError(f"executor {executor.name!r} is already built; give its options to its constructor, "
                              f"not also {', '.join(sorted(options))}")
        return executor
    if executor is None:
        executor = "local"
    if not isinstance(executor, str):
        raise ConfigError(f"invalid executor={executor!r}; valid: {', '.join(EXECUTORS.names())} or an executor "
                          "object (fedrepro.executors)")
    return EXECUTORS.get(executor).from_options(**options)
