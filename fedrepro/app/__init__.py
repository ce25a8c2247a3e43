"""What a user drives: the CLI, ``reproduce`` and its plan's execution, ``verify``, the results pages,
the site, benchmarks, figures and the notebooks' helpers."""
