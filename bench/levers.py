"""Two compute levers of docs/speed.md, measured on a laptop pass's stored runs; nothing trains.

Run it on the output root of a laptop pass trained with both levers off (the default)::

    FEDREPRO_OUTPUT=/path/to/pass python bench/levers.py [--out bench/levers.json]

- **Stopping runs once flat** (``train.stop_when_flat``). A run that stops at round s holds the
  first s rounds of the same run trained without the option, bit for bit
  (:mod:`fedrepro.fl.converge`), so :func:`fedrepro.analysis.by_round.flat_stop` reads off each
  stored run where it would have stopped, and the stored per-round times what it would have saved.
  Every stored run of the pass is read (runs evaluated only at their last round have no curve:
  they would train to their maximum), with the rule allowed to stop a run from round 0 and from
  :data:`FRACTIONS` of its paper's budget (``train.flat_from``). For the claims, each paper's
  ``BY_ROUND`` groups (the convergence notebooks' tables, with the same per-round scores) are judged
  as trained and at the flat stop from each first round
  (:func:`fedrepro.papers.verdicts.verdicts_at_flat_stop`).
- **Halving the learning-rate searches** (``LrSearch(halving=0.25, eta=3)``). A short run is the
  first rounds of its rate's full run, so each searched row's halving choice is read off the full
  search's stored runs (:func:`fedrepro.papers.tables.halving_replay`), with the seconds the
  dropped rates' later rounds took.

Runs a paper's groups or searches need that the store lacks are reported as missing, not trained.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pandas as pd

from fedrepro.analysis.by_round import evaluated, last_round, run_flat_stop
from fedrepro.app.compute import paper_of, planned_runs
from fedrepro.env.host import repo_root
from fedrepro.errors import FedreproError
from fedrepro.papers import paper
from fedrepro.papers.tables import halving_replay
from fedrepro.papers.verdicts import by_round_papers, stored_groups, verdicts_at_flat_stop
from fedrepro.runs.store import RunStore

PROFILE = "laptop"  # --profile smoke reads a smoke pass (tests)
SEARCHED = ("fedotp", "pep_fedpt", "pfedcspc", "fedpft")
HALVING, ETA = 0.25, 3
# Each paper's laptop budget (train.rounds of its setup); the early stop is replayed from round 0
# (the option alone) and from these fractions of the budget (train.flat_from).
# The tour and FedOTP (no budget here) are replayed from round 0 only: their pilots found them flat.
BUDGET = {"fedpft": 50, "pfedcspc": 40, "pep_fedpt": 30}
FRACTIONS = (0.0, 0.5, 0.7)


def stops(planned, fractions) -> pd.DataFrame:
    """One row per stored run of the plan and ``flat_from`` fraction: its paper, rounds trained, the
    round the rule would stop it at from ``first`` (the fraction of its paper's budget) and the
    seconds of the rounds after it."""
    rows = []
    for h, cfg in planned.runs.items():
        store = RunStore(cfg.runs_dir)
        if store.status(cfg) != "done":
            continue
        rounds = store.load(cfg).rounds
        if rounds.empty:  # diverged in its first round: no curve, and nothing after a stop to save
            continue
        times = rounds[["time_train_s", "time_eval_s"]].sum(axis=1)
        name = paper_of(planned.notebook[h])
        for first in sorted({round(f * BUDGET.get(name, 0)) for f in fractions}):
            stop = run_flat_stop(store.path(cfg), cfg.train.flat_window, lambda _: rounds, first)
            rows.append({"paper": name, "hash": h, "method": cfg.method.name, "search": h in planned.searches,
                         "flat_from": first, "rounds": last_round(rounds), "evaluated": len(evaluated(rounds)),
                         "stop": stop, "seconds": float(times.sum()),
                         "saved_s": float(times[rounds["round"] > stop].sum())})
    return pd.DataFrame(rows)


def per_run(runs: pd.DataFrame) -> list[dict]:
    """One record per run, its stop and saved seconds keyed by the first round replayed from."""
    out = {}
    for r in runs.to_dict("records"):
        row = out.setdefault(r["hash"], {k: r[k] for k in ("paper", "hash", "method", "search", "rounds", "evaluated",
                                                           "seconds")} | {"stop": {}, "saved_s": {}})
        row["stop"][str(r["flat_from"])], row["saved_s"][str(r["flat_from"])] = r["stop"], round(r["saved_s"], 2)
    return list(out.values())


def flat_verdicts(name: str, profile: str, first: int) -> tuple[pd.DataFrame, int]:
    """The paper's BY_ROUND claims as trained and at the flat stop from round ``first``; the number
    of runs missing."""
    pkg = paper(name)
    groups, missing = stored_groups(name, profile)
    if groups is None:
        return pd.DataFrame(), missing
    return verdicts_at_flat_stop(groups, pkg.BY_ROUND, rounds_of=pkg.ROUNDS_OF, first=first), 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=str(repo_root() / "bench" / "levers.json"))
    ap.add_argument("--profile", default=PROFILE, choices=("smoke", "laptop"))
    args = ap.parse_args(argv)
    profile = args.profile
    nb_root = repo_root() / "notebooks"
    planned = planned_runs(sorted(nb_root.rglob("*.ipynb")), nb_root, profile)
    runs = stops(planned, FRACTIONS)
    report: dict = {"profile": profile, "stop_when_flat": {}, "halving": {}, "verdicts": {}}
    if not runs.empty:
        by = runs.groupby(["paper", "flat_from"])
        summary = pd.DataFrame({"runs": by.size(), "CPU-h trained": by["seconds"].sum() / 3600,
                                "CPU-h saved": by["saved_s"].sum() / 3600,
                                "rounds saved": 1 - by["stop"].sum() / by["rounds"].sum()})
        summary["share saved"] = summary["CPU-h saved"] / summary["CPU-h trained"]
        print("stop_when_flat from train.flat_from, read off the stored runs:\n" + summary.round(3).to_string() + "\n")
        report["stop_when_flat"] = {"by_paper": {f"{p} from {first}": v for (p, first), v
                                                 in summary.round(4).to_dict("index").items()},
                                    "runs": per_run(runs)}
    for name in by_round_papers():
        report["verdicts"][name] = {}
        for f in FRACTIONS:
            first = round(f * BUDGET[name])
            verdicts, missing = flat_verdicts(name, profile, first)
            if missing:
                print(f"{name}: BY_ROUND claims not judged, {missing} of their runs are not stored\n")
                report["verdicts"][name] = {"missing_runs": missing}
                break
            changed = verdicts[verdicts["changed"]]
            print(f"{name}, flat_from {first}: {len(changed)} of {len(verdicts)} BY_ROUND verdicts change\n"
                  + changed[["claim_id", "verdict full", "verdict flat", "effect flat"]].to_string() + "\n")
            report["verdicts"][name][f"from {first}"] = verdicts.to_dict("records")
    for name in SEARCHED:
        try:
            replay = halving_replay(paper(name).TABLES, profile, HALVING, ETA)
        except FedreproError as e:  # a search not stored (TuningPending names its runs), or a run unreadable
            print(f"{name}: halving not replayed ({type(e).__name__}: {e})\n")
            report["halving"][name] = {"not_replayed": f"{type(e).__name__}: {e}"}
            continue
        replayed = replay["note"] == ""
        print(f"{name}: halving ({HALVING}, eta {ETA}) replayed on {int(replayed.sum())} of {len(replay)} searched "
              f"rows, {int(replay['changed'].sum())} change rate, {replay['saved_s'].sum() / 3600:.2f} CPU-h saved"
              + (f"; {int((~replayed).sum())} not replayable, e.g. {replay.loc[~replayed, 'note'].iloc[0]}"
                 if (~replayed).any() else "") + "\n" + replay.drop(columns=["note"]).to_string() + "\n")
        report["halving"][name] = replay.to_dict("records")
    Path(args.out).write_text(json.dumps(report, indent=1, default=float) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
