"""fedrepro: reproducible personalised and prompt-based federated learning, notebook first.

Quick start::

    import fedrepro
    res = fedrepro.run(profile="smoke", method__name="fedper")
    res.rounds      # per-round table
    res.summary     # best-round and final-round accuracy
"""
__version__ = "0.1.0"

from .config import RunConfig, default_seeds, make_config, profile_from_env  # noqa: E402
from .experiment import (format_mean_std, mean_std, pivot_mean_std, prepare_data, results_by, run, run_grid,
                         run_seeds)  # noqa: E402
from .store import RunResult, RunStore  # noqa: E402

__all__ = ["RunConfig", "RunResult", "RunStore", "default_seeds", "format_mean_std", "make_config", "mean_std",
           "pivot_mean_std", "prepare_data", "profile_from_env", "results_by", "run", "run_grid", "run_seeds", "__version__"]
