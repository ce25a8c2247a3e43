"""fedrepro: reproducible personalised and prompt-based federated learning, notebook first.

Quick start::

    import fedrepro
    res = fedrepro.run(profile="smoke", method__name="fedper")
    res.rounds      # per-round table
    res.summary     # best-round and final-round accuracy
"""
import os as _os

from .version import VERSION as __version__
from .config import RunConfig, default_seeds, make_config, profile_from_env, resolve_profile  # noqa: E402
from .env import settings  # noqa: E402,F401  (fedrepro.env.settings.configure(output_root=...))
from .env import inline as _inline  # noqa: E402

# In a notebook kernel started under MPLBACKEND=Agg, figures would never reach the notebook.
_inline.activate()

# In a kernel Jupyter started for a notebook, the notebook's setup cell (fedrepro.resolve_profile)
# first prints the runs it needs, those stored and the predicted time (fedrepro.app.notebook_header,
# issue 58); the CLI and scripts never import it.
if _os.environ.get("JPY_SESSION_NAME"):
    from .app import notebook_header as _notebook_header  # noqa: E402

    _notebook_header.register()

# The rest load torch, so they are imported when first used (PEP 562): the scheduling process of
# ``fedrepro reproduce`` and ``fedrepro --help`` never pay torch's ~400 MiB.
_LAZY = {name: ".runs.tables" for name in ("format_mean_std", "mean_std", "pivot_mean_std", "results_by")}
_LAZY.update(run=".execute.run", run_seeds=".execute.run", run_grid=".execute.grid", prepare_data=".runs.pipeline")
_LAZY.update(RunResult=".runs.store", RunStore=".runs.store")
# The stored runs as a table (reads small JSON files only: no torch).
_LAZY.update(list_runs=".runs.catalog", run_rounds=".runs.catalog")


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name], __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'fedrepro' has no attribute {name!r}")


__all__ = ["RunConfig", "RunResult", "RunStore", "default_seeds", "format_mean_std", "make_config", "mean_std",
           "pivot_mean_std", "prepare_data", "profile_from_env", "resolve_profile", "results_by", "run", "run_grid",
           "run_seeds", "settings", "__version__"]
__all__ += ["list_runs", "run_rounds"]
