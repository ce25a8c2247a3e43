"""Table 6: what a method spends to reach a target accuracy: rounds, measured training time, and
the parameters one client uploads per round (PEP-FedPT (arXiv) §5.2.2).

Everything comes from stored runs: the first round whose mean client accuracy reaches the target,
the simulator's training time up to that round, and the element count of one real client upload
(one ``client_update`` of the first participating client from the run's final state), so the
count follows the code: PEP-FedPT's prototypes and class counts are included, as are head biases,
which the paper's count leaves out.
"""
from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
import torch

from ...analysis.convergence import rounds_to_target
from ...fl.seeding import torch_gen
from ...runs.store import RunResult
from ...runs.train import restore


def upload_size(path) -> int:
    """Floating-point elements in one client's upload, from the run's final state."""
    method, clients, state = restore(path)
    client = next(c for c in clients if not c.held_out)
    up = method.client_update(state["shared"], state["client_states"][client.cid], client,
                              torch_gen(0, "analysis", 0, client.cid), 0).upload
    return int(sum(v.numel() for v in up.values() if isinstance(v, torch.Tensor) and v.is_floating_point()))


def cost_table(runs: pd.DataFrame, rows: Sequence[str], target: float | None = None,
               reference_row: str = "fedvpt") -> tuple[pd.DataFrame, float]:
    """One line per row: rounds to reach ``target`` (default: the best mean accuracy of
    ``reference_row``, the paper's rule), the training seconds until then, and the parameters
    uploaded per round and in total until then; means over the row's seeds (rounds and time over
    the seeds that reach the target)."""
    if target is None:
        target = float(runs[runs["row"] == reference_row]["best"].mean())
    out = []
    for name in rows:
        sel = runs[runs["row"] == name]
        if sel.empty:
            continue
        hits, secs = [], []
        for p in sel["path"]:
            rr = RunResult(p)
            r = rounds_to_target(rr, target, metric="acc_mean")
            if r is not None:
                hits.append(r)
                secs.append(float(rr.rounds[rr.rounds["round"] <= r]["time_train_s"].sum()))
        size = upload_size(sel["path"].iloc[0])
        rounds = sum(hits) / len(hits) if hits else float("nan")
        out.append({"row": name, "rounds": rounds, "reached": f"{len(hits)}/{len(sel)}",
                    "train_s": sum(secs) / len(secs) if secs else float("nan"),
                    "upload_per_round": size, "upload_to_target": size * rounds})
    return pd.DataFrame(out).set_index("row"), target
