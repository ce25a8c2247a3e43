"""Verdicts by round: tables recomputed from the stored rounds, and the flatness rule."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import fedrepro
from fedrepro.analysis.by_round import (at_flat_stop, at_round, flatness, flatness_by_group, is_flat, verdict_changes,
                                        window_change, window_noise)
from fedrepro.papers.verdicts import verdicts_by_group, verdicts_by_round


def _grid(tiny, rounds=6):
    base = tiny(**{"train.rounds": rounds})
    return fedrepro.run_grid(base, {"method.name": ["fedavg", "local"]}, seeds=[0, 1], progress=False, workers=1)


def test_at_round_is_the_run_cut_at_that_round(tiny):
    table = _grid(tiny)
    full = at_round(table, 6)
    pd.testing.assert_series_equal(full["best"], table["best"], check_names=False)
    pd.testing.assert_series_equal(full["final"], table["final"], check_names=False)
    cut = at_round(table, 3)
    for (_, row), (_, c) in zip(table.iterrows(), cut.iterrows()):
        acc = fedrepro.RunResult(row["path"]).rounds.set_index("round")["acc_mean"]
        assert c["final"] == acc.loc[3] and c["best"] == acc.loc[:3].max() and c["best_round"] <= 3


def test_flatness_compares_the_last_two_windows(tiny):
    table = flatness(_grid(tiny), window=2, tol=1.0)
    acc = fedrepro.RunResult(table["path"].iloc[0]).rounds["acc_mean"].to_numpy()
    assert table["last_change"].iloc[0] == acc[-2:].mean() - acc[-4:-2].mean()
    assert table["flat"].all()  # a 100-point tolerance
    assert flatness(table, window=4)["last_change"].isna().all()  # 6 rounds < two windows of 4
    assert not flatness(table, window=4)["flat"].any()


def test_verdicts_by_round_evaluates_each_cut(tiny):
    table = _grid(tiny).assign(**{"data.partition_args.alpha": 0.1})
    out = verdicts_by_round(table, ["tour.local_beats_fedavg_skewed"], [2, 6])
    assert out["round"].tolist() == [2, 6]
    assert "NOT RUN" not in set(out["verdict"])  # both cuts have the rows the claim reads
    # The round-6 verdict is the claim on the table itself.
    from fedrepro.papers.verdicts import evaluate_claims

    assert out["verdict"].iloc[1] == evaluate_claims(table, ids=["tour.local_beats_fedavg_skewed"])["verdict"].item()


def test_window_noise_is_the_standard_error_of_the_window_change():
    rng = np.random.default_rng(0)
    sigma = 0.02
    # Pure noise around a constant: the change of many such series has the stated standard error.
    changes = [window_change(0.8 + sigma * rng.standard_normal(10), 5) for _ in range(4000)]
    noises = [window_noise(0.8 + sigma * rng.standard_normal(10), 5) for _ in range(4000)]
    assert np.std(changes) == pytest.approx(sigma * np.sqrt(2 / 5), rel=0.08)
    assert np.mean(noises) == pytest.approx(sigma * np.sqrt(2 / 5), rel=0.15)
    assert np.isnan(window_noise(np.ones(9), 5))


def test_is_flat_allows_for_noise_but_not_for_a_trend():
    steady = np.array([0.80, 0.82, 0.79, 0.81, 0.80, 0.82, 0.79, 0.81, 0.80, 0.83])
    climbing = np.linspace(0.70, 0.80, 10)
    assert is_flat(window_change(steady), window_noise(steady), tol=0.001)  # only the noise allowance
    assert not is_flat(window_change(steady), window_noise(steady), tol=0.001, z=0.0)
    assert not is_flat(window_change(climbing), window_noise(climbing))  # a trend has tiny differences' spread
    assert is_flat(0.004, float("nan")) and not is_flat(0.006, float("nan"))  # tol alone without noise
    assert not is_flat(float("nan"), 0.1)


def test_groups_cut_each_group_at_every_round_of_its_runs(tiny):
    short = _grid(tiny, rounds=4).assign(**{"data.partition_args.alpha": 0.1})
    long = _grid(tiny, rounds=6).assign(**{"data.partition_args.alpha": 0.1})
    groups = {("short",): short, ("long",): long}
    by_round = {("short",): ["tour.local_beats_fedavg_skewed"], ("long",): ["tour.local_beats_fedavg_skewed"]}
    out = verdicts_by_group(groups, by_round)
    assert out["round"].tolist() == [1, 2, 3, 4, 1, 2, 3, 4, 5, 6]
    flat, summary = flatness_by_group(groups)
    assert list(summary.index) == ["short", "long"] and len(flat) == len(short) + len(long)
    assert summary.loc["long", "flat runs"] == f"{flatness(long)['flat'].mean():.0%}"


def test_verdict_changes_counts_each_flip_and_keeps_the_last_cut():
    verdicts = pd.DataFrame({"round": [1, 2, 3, 4, 1, 2], "claim_id": ["a"] * 4 + ["b"] * 2,
                             "verdict": ["FAIL", "PASS", "FAIL", "FAIL", "PASS", "PASS"]})
    out = verdict_changes(verdicts)
    assert out.loc["a"].tolist() == [4, "FAIL", 2] and out.loc["b"].tolist() == [2, "PASS", 0]


def test_flat_stop_replays_the_engine_rule_on_a_stored_curve():
    from fedrepro.analysis.by_round import flat_stop

    def rounds(acc, every=1):
        r = np.arange(1, len(acc) * every + 1)
        return pd.DataFrame({"round": r, "acc_mean": [acc[i // every] if (i + 1) % every == 0 else np.nan
                                                      for i in range(len(r))]})
    assert flat_stop(rounds([0.5] * 12), window=2) == 4  # judged (and met) at the 4th evaluated round
    assert flat_stop(rounds([min(r, 7) / 20 for r in range(1, 31)]), window=2) == 9  # rises, then flat
    assert flat_stop(rounds([r / 100 for r in range(1, 13)]), window=2) == 12  # never flat: its last round
    assert flat_stop(rounds([0.5] * 7, every=3), window=2) == 12  # evaluated rounds only: 3, 6, 9, 12
    # flat_from: a curve flat from the start stops at that round, in the engine and in the replay.
    assert flat_stop(rounds([0.5] * 12), window=2, first=7) == 7


def test_a_run_never_evaluated_reads_as_an_empty_curve():
    from fedrepro.analysis.by_round import evaluated, flat_stop
    never = pd.DataFrame({"round": [1, 2, 3], "loss": [1.0, 0.9, 0.8]})  # no acc_mean column at all
    assert evaluated(never).empty and list(evaluated(never)["acc_mean"]) == []
    assert flat_stop(never, window=2) == 3  # nothing to judge: it trains to its last round
    diverged_at_once = pd.DataFrame()  # a run that diverged in round 1 stores no round
    assert evaluated(diverged_at_once).empty and flat_stop(diverged_at_once, window=2) == 0
    once = never.assign(acc_mean=[np.nan, np.nan, 0.4])
    assert list(evaluated(once)["round"]) == [3]


def test_at_flat_stop_is_what_a_run_with_stop_when_flat_reports(tiny):
    # A rate too small to move the model: flat from the start, so the stopped run ends early.
    off = tiny(**{"train.rounds": 10, "train.lr": 1e-9})
    on = off.replace(**{"train.stop_when_flat": True, "train.flat_window": 2})
    table = fedrepro.run_grid(off, {"method.name": ["fedavg"]}, seeds=[0], progress=False, workers=1)
    stopped = fedrepro.RunResult(fedrepro.run(on).path).summary
    cut = at_flat_stop(table, window=2)
    assert stopped["rounds"] < 10 and cut["stop_round"].item() == stopped["rounds"]
    assert cut["final"].item() == stopped["final_acc_mean"] and cut["best"].item() == stopped["best_acc_mean"]


def test_verdicts_at_flat_stop_read_the_cut_table(tiny):
    from fedrepro.papers.verdicts import evaluate_claims, verdicts_at_flat_stop

    table = _grid(tiny, rounds=8).assign(**{"data.partition_args.alpha": 0.1})
    cid = "tour.local_beats_fedavg_skewed"
    out = verdicts_at_flat_stop({("t",): table}, {("t",): (cid,)}, window=2).set_index("claim_id")
    assert out.at[cid, "verdict full"] == evaluate_claims(table, ids=[cid])["verdict"].item()
    assert out.at[cid, "verdict flat"] == evaluate_claims(at_flat_stop(table, 2), ids=[cid])["verdict"].item()
    stops = at_flat_stop(table, 2).drop_duplicates("path")["stop_round"]
    assert out.at[cid, "rounds_saved"] == pytest.approx(1 - stops.sum() / (8 * len(stops)))


def test_final_over_last_is_the_mean_of_the_last_evaluated_rounds(tiny):
    from fedrepro.analysis.by_round import final_over_last
    from fedrepro.errors import ConfigError

    table = _grid(tiny)
    same = final_over_last(table, 1)
    pd.testing.assert_frame_equal(same, table)
    three = final_over_last(table, 3)
    for (_, row), (_, c) in zip(table.iterrows(), three.iterrows()):
        acc = fedrepro.RunResult(row["path"]).rounds.set_index("round")["acc_mean"]
        assert c["final"] == pytest.approx(acc.loc[4:6].mean()) and c["best"] == row["best"]
    assert not np.allclose(three["final"], table["final"])
    # More rounds than the run has: all of them.
    assert final_over_last(table, 50)["final"].iloc[0] == pytest.approx(
        fedrepro.RunResult(table["path"].iloc[0]).rounds["acc_mean"].mean())
    for bad in (0, -1, 2.0, True):
        with pytest.raises(ConfigError, match="k="):
            final_over_last(table, bad)


def test_a_group_naming_a_table_the_paper_lacks_is_named():
    from fedrepro.analysis.by_round import run_groups
    from fedrepro.errors import ConfigError
    from fedrepro.papers import fedpft

    with pytest.raises(ConfigError, match="by_round names table 'nosuch'"):
        run_groups(fedpft.TABLES, {("main_default", "nosuch"): ("x",)}, "smoke")
