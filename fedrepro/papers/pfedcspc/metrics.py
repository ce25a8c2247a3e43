"""pFedCSPC's two scores and their combination (pFedCSPC (TNNLS) §V-A2, "Evaluation Measures").

- **I_local** (Eq. 20): per client, the harmonic mean of its local test accuracy and macro-F1; the
  Local score is its mean over clients.
- **HM** (Eq. 21): the harmonic mean of the global model's accuracy on the whole test split (the engine's
  ``global_acc``, logged with ``train.global_eval``) and the mean I_local.

Both are derived from what every run stores (per-client ``acc`` and ``f1`` rows, per-round
``global_acc``), so any method's run can be scored this way, and the engine needs to know neither.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ...runs.store import RunResult

NAN = float("nan")


def harmonic_mean(a: float, b: float) -> float:
    """2ab/(a+b); 0 when both are 0, NaN when either is NaN."""
    if a != a or b != b:
        return NAN
    return 0.0 if a + b == 0 else 2 * a * b / (a + b)


def _nanmean(values: list[float]) -> float:
    v = [x for x in values if x == x]
    return float(np.mean(v)) if v else NAN


def round_scores(result: RunResult | str | Path) -> pd.DataFrame:
    """One row per evaluated round: ``i_local_mean`` (over participating clients), ``global_acc``
    (when logged) and ``hm``."""
    res = result if isinstance(result, RunResult) else RunResult(result)
    clients = res.clients
    part = clients[~clients["held_out"].astype(bool)]
    rounds = res.rounds.set_index("round")
    rows = []
    for rnd, group in part.groupby("round", sort=True):
        i_local = _nanmean([harmonic_mean(a, f) for a, f in zip(group["acc"], group["f1"])])
        row = {"round": int(rnd), "i_local_mean": i_local}
        g = rounds["global_acc"].get(rnd, NAN) if "global_acc" in rounds else NAN
        if g == g:
            row["global_acc"] = float(g)
            row["hm"] = harmonic_mean(float(g), i_local)
        rows.append(row)
    return pd.DataFrame(rows) if rows else pd.DataFrame({"round": [], "i_local_mean": []})  # none: diverged at once


def run_scores(result: RunResult | str | Path) -> dict[str, float]:
    """``best_`` (max over evaluated rounds) and ``final_`` values of I_local and HM for one run; the
    final values are NaN for a run that diverged (as the engine's own final metrics are)."""
    res = result if isinstance(result, RunResult) else RunResult(result)
    table = round_scores(res)
    out = {}
    for k in ("i_local_mean", "hm"):
        if k not in table:
            continue
        vals = [v for v in table[k] if v == v]
        if vals:
            out[f"best_{k}"] = float(max(vals))
            out[f"final_{k}"] = float(table[k].iloc[-1])
    if "diverged_round" in res.summary:
        out.update({k: NAN for k in out if k.startswith("final_")})
    return out


def rounds_with_scores(path) -> pd.DataFrame:
    """A run's stored rounds with :func:`round_scores`' ``i_local_mean`` and ``hm`` joined on (the
    per-round input of :func:`fedrepro.analysis.by_round.at_round` for pFedCSPC's tables)."""
    res = RunResult(path)
    scores = round_scores(res).drop(columns=["global_acc"], errors="ignore")
    return res.rounds.merge(scores, on="round", how="left")


def with_scores(table: pd.DataFrame) -> pd.DataFrame:
    """A :func:`fedrepro.run_grid` table with ``best_``/``final_`` ``i_local_mean`` and ``hm`` columns,
    derived from each run's stored rows."""
    scores = pd.DataFrame([run_scores(p) for p in table["path"]], index=table.index)
    out = table.drop(columns=[c for c in scores.columns if c in table.columns])
    return pd.concat([out, scores], axis=1)


def local_units(res: RunResult) -> tuple[pd.Series, int]:
    """``(per-client I_local of the final round, validation images)`` of a stored run (participating
    clients with test data; empty for a run that diverged)."""
    final = res.final_clients()
    scored = final[~final["held_out"].fillna(False).astype(bool) & (final["n_test"].fillna(0) > 0)]
    n = int(scored["n_test"].sum())
    if "diverged_round" in res.summary or scored.empty:
        return pd.Series(dtype=float), n
    return pd.Series([harmonic_mean(a, f) for a, f in zip(scored["acc"], scored["f1"])],
                     index=scored["client"].astype(int).to_numpy(), dtype=float), n


def by_seed_and_client(values: pd.Series, seed: int) -> pd.Series:
    """Per-client values of one run (:func:`local_units`) indexed by ``(seed, client)``, so that two
    candidates' runs pair client by client across the seeds."""
    return pd.Series(values.to_numpy(dtype=float), index=pd.MultiIndex.from_arrays(
        [[int(seed)] * len(values), values.index.to_numpy()], names=["seed", "client"]))


def paired_se(a: pd.Series, b: pd.Series) -> float:
    """The standard error of the mean of ``a − b`` over the units (``(seed, client)``) both hold
    (finite differences only); infinite with fewer than two."""
    common = a.index.intersection(b.index)
    d = (a.loc[common] - b.loc[common]).to_numpy(dtype=float)
    d = d[np.isfinite(d)]
    return float(d.std(ddof=1) / np.sqrt(d.size)) if d.size >= 2 else float("inf")
