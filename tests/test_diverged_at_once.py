"""A run that diverges in its first round stores no round and no client row. Every reader of stored
runs takes it as an empty curve, not a KeyError: the store gives its tables their key columns, and
the analyses, figures and replays read it as a run with nothing evaluated."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import fedrepro  # noqa: E402
from fedrepro.analysis.by_round import at_flat_stop, at_round, evaluated, flat_stop, flatness  # noqa: E402
from fedrepro.analysis.convergence import rounds_to_target  # noqa: E402
from fedrepro.app.figures import plot_curves  # noqa: E402
from fedrepro.execute.grid import run_grid  # noqa: E402
from fedrepro.papers.pfedcspc.metrics import round_scores, rounds_with_scores, run_scores  # noqa: E402
from fedrepro.runs.catalog import list_runs  # noqa: E402


def test_every_reader_takes_a_run_that_diverged_in_round_one_as_an_empty_curve(tiny):
    blown = tiny(**{"train.rounds": 3, "train.lr": 1e12})
    res = fedrepro.run(blown)
    assert res.summary["diverged_round"] == 1 and len(res.rounds) == 0 and len(res.clients) == 0
    assert {"round", "acc_mean", "time_train_s"} <= set(res.rounds.columns)
    assert {"round", "client", "held_out", "acc"} <= set(res.clients.columns)
    assert evaluated(res.rounds).empty and flat_stop(res.rounds) == 0
    assert rounds_to_target(res, 0.5, metric="acc_mean") is None
    assert round_scores(res).empty and run_scores(res) == {} and rounds_with_scores(res.path).empty
    # Beside a run that trained: the tables, the by-round cuts and the curves keep it as a row
    # without a score.
    table = run_grid(tiny(**{"train.rounds": 3}), {"train.lr": [0.05, 1e12]}, progress=False)
    assert len(table) == 2
    for cut in (at_round(table, 2), at_flat_stop(table, window=2), flatness(table, window=2)):
        assert len(cut) == 2
    assert len(list_runs(blown.runs_dir)) >= 1
    plot_curves({"trained": [fedrepro.RunResult(table["path"].iloc[0])], "diverged": [res]})
