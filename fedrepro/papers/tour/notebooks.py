"""What the tour notebook reads (``fedrepro.papers.plan``)."""
from __future__ import annotations

from ...config import RunConfig, default_seeds, make_config
from ...execute.grid import grid_points
from ..plan import Need

METHODS = ("local", "fedavg", "fedper")
ALPHAS = (0.1, 0.5, 10.0)
GRID = {"method.name": METHODS, "data.partition_args.alpha": ALPHAS}


def tour_runs(profile: str, seeds=None) -> list[RunConfig]:
    """Local, FedAvg and FedPer at each α over the profile's seeds (the grid notebook 00 runs)."""
    base = make_config(profile, progress=False)
    return [base.replace(**point, seed=s) for point, s in grid_points(GRID, seeds or default_seeds(profile))]


NOTEBOOKS: dict[str, list[Need]] = {"00_tour": [Need(runs=tour_runs)]}
