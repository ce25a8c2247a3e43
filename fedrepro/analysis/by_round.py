"""Have the runs converged, and does a claim's verdict still move with the number of rounds?

- :func:`flatness`: per run of a ``run_grid`` table, how much the mean client accuracy still moves:
  the mean over the last ``window`` evaluated rounds against the mean over the ``window`` before.
  The stated rule (:func:`is_flat`, defined in :mod:`fedrepro.fl.flatness` and re-exported here): a
  run has flattened when that change is below half a point (:data:`FLAT_TOLERANCE`) or below twice
  its own round-to-round noise (:func:`window_noise`, :data:`FLAT_Z`), whichever is larger. The
  noise allowance matters for methods whose evaluated accuracy jumps by a point or more from round
  to round without a trend: their window means never agree to half a point, however long they
  train. A run trained with ``train.stop_when_flat`` stopped at the first evaluated round that met
  this rule; its stored rounds are every round it trained, so :func:`at_round` cuts it like any
  other (at a cut after its stop, it reads as at its stop).
- :func:`at_round`: the table as it would read had every run stopped at round ``r`` (best round and
  final round up to ``r``), from the stored per-round metrics: no training. :func:`at_flat_stop`:
  the same with each run stopped where ``train.stop_when_flat`` would have stopped it
  (:func:`flat_stop`), so the option's effect on a claim is read off runs trained without it.
- :func:`verdicts_by_round`: each claim's verdict on :func:`at_round` tables for a list of rounds,
  so a reader sees which verdicts settle and which still flip when the budget ends.
- :func:`run_groups`, :func:`flatness_by_group`, :func:`verdicts_by_group`, :func:`verdict_changes`:
  the same for a paper's ``BY_ROUND`` (groups of tables → the claims that read them together), the
  convergence notebooks' whole loop.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import pandas as pd

from ..errors import ConfigError
from ..methods import METHODS
from ..runs.store import RunResult
from ..runs.train import flat_rule_can_stop
# The rule itself lives at the engine's layer, which stops runs by it (train.stop_when_flat); it is
# re-exported here, where the notebooks and analyses read it.
from ..fl.flatness import (FLAT_TOLERANCE, FLAT_WINDOW, FLAT_Z, is_flat, judge, stops_at, window_change,  # noqa: F401
                           window_noise)

RoundsOf = Callable[[str], pd.DataFrame]


def stored_rounds(path) -> pd.DataFrame:
    """A run's per-round metrics as the engine stored them."""
    return RunResult(path).rounds


def evaluated(rounds: pd.DataFrame) -> pd.DataFrame:
    """The rows of a run's per-round metrics at which it was evaluated (``acc_mean`` set), always
    with the ``round`` and ``acc_mean`` columns, so a run never evaluated (or one that diverged in
    its first round and stored no round) reads as an empty curve."""
    missing = {c: pd.Series(dtype=float) for c in ("round", "acc_mean") if c not in rounds}
    if missing:
        return rounds.iloc[0:0].assign(**missing)
    return rounds[rounds["acc_mean"].notna()]


def _evaluated(path, rounds_of: RoundsOf = stored_rounds) -> pd.DataFrame:
    return evaluated(rounds_of(path))


def flatness(table: pd.DataFrame, window: int = FLAT_WINDOW, tol: float = FLAT_TOLERANCE,
             z: float = FLAT_Z) -> pd.DataFrame:
    """``table`` with ``last_change`` (mean of the last ``window`` evaluated rounds minus the mean of
    the ``window`` before), ``noise`` (its standard error from round-to-round noise,
    :func:`window_noise`) and ``flat`` (:func:`is_flat`; False when there are too few rounds)."""
    judged = [judge(_evaluated(path)["acc_mean"].to_numpy(), window, tol, z) for path in table["path"]]
    out = table.copy()
    out["last_change"], out["noise"], out["flat"] = ([j[i] for j in judged] for i in range(3))
    return out


def at_round(table: pd.DataFrame, r: int, rounds_of: RoundsOf = stored_rounds) -> pd.DataFrame:
    """``table`` (a ``run_grid`` table) with ``best``, ``final`` and every ``best_<m>`` / ``final_<m>``
    column recomputed as if each run had stopped after round ``r``, from ``rounds_of(path)``: the
    stored rounds, or those with a paper's derived per-round scores joined on (pFedCSPC's I_local)."""
    return at_rounds(table, lambda _: r, rounds_of)


def flat_stop(rounds: pd.DataFrame, window: int = FLAT_WINDOW, first: int = 0) -> int:
    """The round at which ``train.stop_when_flat`` (window ``window``, ``train.flat_from`` ``first``)
    would have stopped a run whose stored rounds are ``rounds``: the first evaluated round, from
    ``first`` on, at which the evaluated accuracies so far meet the flatness rule, else the run's
    last round. It replays the engine's own check (:func:`fedrepro.fl.flatness.stops_at`, which
    :func:`fedrepro.fl.converge.simulate_until_flat` tests after each evaluated round), so on a run
    trained without the option it names the round that run would have stopped at with it: the
    stopped run holds exactly those first rounds."""
    ev = evaluated(rounds)
    acc, at = ev["acc_mean"].to_numpy(dtype=float), ev["round"].to_numpy()
    for i in range(2 * window - 1, len(acc)):  # judge() says "not flat" with fewer than 2 * window values
        if stops_at(int(at[i]), acc[:i + 1], window, first):
            return int(at[i])
    return last_round(rounds)


def last_round(rounds: pd.DataFrame) -> int:
    """The last round a run stored (0 when it stored none)."""
    return int(rounds["round"].max()) if "round" in rounds and len(rounds) else 0


def run_flat_stop(path, window: int = FLAT_WINDOW, rounds_of: RoundsOf = stored_rounds, first: int = 0) -> int:
    """:func:`flat_stop` of the stored run at ``path``, where the option applies to its method; a
    method whose schedule reads ``train.rounds`` trains them all
    (:func:`fedrepro.runs.train.flat_rule_can_stop`), so its stop is its last round."""
    rounds = rounds_of(path)
    if not flat_rule_can_stop(METHODS.get(RunResult(path).config.method.name)):
        return last_round(rounds)
    return flat_stop(rounds, window, first)


def at_flat_stop(table: pd.DataFrame, window: int = FLAT_WINDOW,
                 rounds_of: RoundsOf = stored_rounds, first: int = 0) -> pd.DataFrame:
    """``table`` as :func:`at_round` would give it had every run stopped at its own :func:`flat_stop`
    (``window``, ``first``): the table ``train.stop_when_flat`` would have produced, read off runs
    trained without it. ``stop_round`` names each run's stop."""
    stops = {path: run_flat_stop(path, window, rounds_of, first) for path in table["path"].unique()}
    return at_rounds(table, stops.__getitem__, rounds_of).assign(stop_round=table["path"].map(stops).to_numpy())


def at_rounds(table: pd.DataFrame, cut: Callable[[Any], int], rounds_of: RoundsOf = stored_rounds) -> pd.DataFrame:
    """``table`` with each run read as if it had stopped after round ``cut(path)`` (see :func:`at_round`)."""
    rows = []
    for _, row in table.iterrows():
        ev = _evaluated(row["path"], rounds_of)
        ev = ev[ev["round"] <= cut(row["path"])]
        new = row.to_dict()
        if ev.empty:
            rows.append({**new, "best": float("nan"), "final": float("nan")})
            continue
        best = ev.loc[ev["acc_mean"].idxmax()]
        new.update({"best": float(best["acc_mean"]), "final": float(ev["acc_mean"].iloc[-1]),
                    "best_round": int(best["round"])})
        for col in table.columns:
            for kind in ("best_", "final_"):
                metric = col[len(kind):]
                if col.startswith(kind) and metric in ev.columns and metric != "acc_mean":
                    values = ev[metric].dropna()
                    if not values.empty:
                        new[col] = float(values.max() if kind == "best_" else values.iloc[-1])
        rows.append(new)
    return pd.DataFrame(rows, columns=table.columns)


def final_over_last(table: pd.DataFrame, k: int, rounds_of: RoundsOf = stored_rounds) -> pd.DataFrame:
    """``table`` with ``final`` and every ``final_<m>`` column read as the mean over each run's last
    ``k`` evaluated rounds (``k = 1``: as stored), from ``rounds_of(path)``: another reading of
    "final accuracy" where a paper does not say which, steadier against round-to-round noise (not
    against seed-to-seed noise). ``best`` columns are left as they are."""
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise ConfigError(f"k={k!r}; valid: a whole number of evaluated rounds >= 1")
    rows = []
    for _, row in table.iterrows():
        ev, new = _evaluated(row["path"], rounds_of), row.to_dict()
        if not ev.empty:
            new["final"] = float(ev["acc_mean"].iloc[-k:].mean())
            for col in table.columns:
                metric = col[len("final_"):]
                if col.startswith("final_") and metric in ev.columns and metric != "acc_mean":
                    values = ev[metric].dropna()
                    if not values.empty:
                        new[col] = float(values.iloc[-k:].mean())
        rows.append(new)
    return pd.DataFrame(rows, columns=table.columns)


Groups = Mapping[tuple[str, ...], Sequence[str]]


def run_groups(tables: Mapping[str, Any], by_round: Groups, profile: str, seeds=None,
               table_seeds=None) -> dict[tuple[str, ...], pd.DataFrame]:
    """Each group of ``by_round`` as one table: its tables (``TableDef`` by id in ``tables``) run or
    loaded at ``profile`` and concatenated, a run shared by two of them once."""
    unknown = sorted({k for group in by_round for k in group} - set(tables))
    if unknown:
        raise ConfigError(f"by_round names table {unknown[0]!r}, which the paper does not have; valid: "
                          f"{', '.join(sorted(tables))}")
    return {group: pd.concat([tables[k].run(profile, seeds, table_seeds) for k in group]).drop_duplicates("path")
            for group in by_round}


def flatness_by_group(groups: Mapping[tuple[str, ...], pd.DataFrame]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """:func:`flatness` of every run of every group (``tables`` names its group), and per group the
    mean and largest last change (points) with the share of flat runs."""
    flat = pd.concat([flatness(t).assign(tables="+".join(k)) for k, t in groups.items()], ignore_index=True)
    by = flat.groupby("tables", sort=False)
    summary = by["last_change"].agg(["mean", "max"]).mul(100).round(2)
    summary["flat runs"] = by["flat"].mean().map("{:.0%}".format)
    return flat, summary


def change_rounds(verdicts: pd.DataFrame) -> dict[str, pd.Series]:
    """Per claim of a verdicts-by-round table (:func:`verdicts_by_round`): the rounds, ascending, at
    which its verdict differs from the cut before."""
    out = {}
    for cid, v in verdicts.sort_values("round").groupby("claim_id", sort=False):
        before = v["verdict"].shift()
        out[cid] = v["round"][v["verdict"].ne(before) & before.notna()]
    return out


def verdict_changes(verdicts: pd.DataFrame) -> pd.DataFrame:
    """Per claim of :func:`verdicts_by_group`: its last cut's round and verdict, and how many times
    the verdict changed from one cut to the next."""
    ends = verdicts.groupby("claim_id", sort=False)["round"].transform("max")
    final = verdicts[verdicts["round"] == ends].set_index("claim_id")
    flips = pd.Series({cid: len(r) for cid, r in change_rounds(verdicts).items()}, dtype=int)
    return final[["round", "verdict"]].assign(changes_of_verdict=flips)
