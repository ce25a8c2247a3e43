"""Exception types. Every error names the offending parameter and what would be valid."""


class FedreproError(Exception):
    """Base class for all fedrepro errors."""


class ConfigError(FedreproError, ValueError):
    """An invalid configuration value, unknown key, or unknown registry name."""


class DataNotFoundError(FedreproError, FileNotFoundError):
    """A dataset's files are not under the data root (and downloading was not allowed or failed)."""


class CorruptCacheError(FedreproError, RuntimeError):
    """A cached file (dataset cache, run folder) is unreadable, partial or inconsistent."""


class RunBusyError(FedreproError, RuntimeError):
    """Another process is writing the same run (same config, same runs folder) and the caller
    asked not to wait for it (``on_busy="error"``), or it stopped unfinished (``on_busy="reuse"``)."""


class StaleRunError(FedreproError, RuntimeError):
    """A stored run was trained by other code than today's (its code fingerprint differs) and the
    caller asked not to retrain it silently (``on_stale="error"``)."""


class PartitionError(FedreproError, ValueError):
    """A partition request cannot be satisfied (too many clients, k > classes, bad alpha...)."""


class TrainingDivergedError(FedreproError, FloatingPointError):
    """Training produced NaN or infinite parameters or features (usually: the learning rate is too
    high for this method and model). ``round`` is the 1-based round that diverged (None when a
    method detects it inside a client update)."""

    def __init__(self, round: int | None, message: str):
        super().__init__(message)
        self.round = round


class FederationError(FedreproError, RuntimeError):
    """A federation on Flower could not finish: a SuperNode left or failed mid-run, a client is held by
    no node (or by two), or a reply did not come in time. The run is not stored as finished."""


class ResourceError(FedreproError, RuntimeError):
    """The machine ran out of something a run needs: memory (a model or batch too large for it), or
    disk space (a file could not be written). What was stored before stays intact, and an unfinished
    run resumes from its last checkpoint once the cause is fixed."""


class ArchivedRunError(FedreproError, RuntimeError):
    """A run restored from the reference archive was asked for what the archive does not keep (its
    model weights); training it (``FEDREPRO_ARCHIVE=off``) gives them."""
