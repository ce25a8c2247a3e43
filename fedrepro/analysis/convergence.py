"""How fast a run gets somewhere: the first round at which a metric reaches a target."""
from __future__ import annotations
from ..runs.store import RunResult


def rounds_to_target(result, target: float, metric: str = "global_acc") -> int | None:
    """The first round whose ``metric`` reaches ``target`` (Table VII), or None if none does."""
    rounds = (result if isinstance(result, RunResult) else RunResult(result)).rounds
    if metric not in rounds:
        return None
    hit = rounds[rounds[metric] >= target]
    return int(hit["round"].iloc[0]) if len(hit) else None
