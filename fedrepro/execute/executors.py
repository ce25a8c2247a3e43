"""The executor registry and what every executor has: its name, its options, ``train(cfgs)``."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar, ContextManager, Sequence

from ..errors import ConfigError
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

    def train(self, cfgs: Sequence[Any], progress: bool = True) -> int:
        """Train those of ``cfgs`` (run configs) that are not finished in their store, and return how
        many were pending. Each executor stores every run exactly as :func:`fedrepro.run` would."""
        raise NotImplementedError

    def session(self, progress: bool = True, desc: str = "runs") -> ContextManager:
        """A remote executor's connection, which takes runs (``submit(cfg) -> Future[RunOutcome]``)."""
        raise NotImplementedError(f"executor {self.name!r} trains runs in this machine's worker pool")


def pending(cfgs: Sequence[Any]) -> list:
    """The distinct configs of ``cfgs`` not finished in their store, after restoring from the reference
    archive those it holds (:mod:`fedrepro.runs.archive`; ``FEDREPRO_ARCHIVE=off``: none, and a run
    restored earlier counts as not finished; ``resume``: only an unfinished pass's, :func:`~fedrepro.runs.
    archive.stands_for_trained`)."""
    from ..runs import archive  # defers pandas for a process that only names an executor
    from ..runs.store import RunStore

    unique = list({c.hash(): c for c in cfgs}.values())
    archive.restore_missing(unique)
    def finished(c) -> bool:
        store = RunStore(c.runs_dir)
        return store.status(c) == "done" and archive.stands_for_trained(store.path(c))

    return [c for c in unique if not finished(c)]


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
                          "object (fedrepro.execute)")
    return EXECUTORS.get(executor).from_options(**options)
