"""LrSearch(halving=...): successive halving. Every rate trains a fraction of the rounds, the best
1/eta train the rest, and the row's rate is the best of those; off by default, so existing searches
name the same runs and choose the same rates."""
from __future__ import annotations

import dataclasses

import pandas as pd
import pytest

import fedrepro
from fedrepro.errors import ConfigError
from fedrepro.execute.tuning import LrSearch, TuningPending
from fedrepro.papers.tables import Rows, TableDef, halving_changes

GRID = (0.1, 1e-5, 1e-6)  # the two tiny rates barely move the model: 0.1 wins after 2 rounds or 4


@pytest.fixture(autouse=True)
def _best_rate_wins(monkeypatch):
    """These runs score a few validation images on 4 clients: too little data to tell the rates apart,
    so the search's rule would pick every row's rate (tests/test_tuning.py checks the rule). What is
    tested here is halving's ranking, so the best-ranked rate is taken as the decision."""
    from fedrepro.execute import tuning

    real = tuning.decide_rate
    monkeypatch.setattr(tuning, "decide_rate", lambda scores, units, n, ranked, *a, **k: dataclasses.replace(
        real(scores, units, n, ranked, *a, **k), rate=ranked[0]))


def _train(search, cfg):
    """Train what ``search`` waits for, stage by stage; the hashes trained, in order."""
    trained = []
    while True:
        try:
            return search.choose(cfg), trained
        except TuningPending as e:
            for c in e.configs:
                fedrepro.run(c)
            trained.append([c.hash() for c in e.configs])


def test_off_a_search_names_the_same_runs_as_before(tiny):
    cfg = tiny(**{"train.rounds": 4})
    search = LrSearch(grid=GRID)
    assert search.halving == 0 and search.search_configs(cfg) == search.full_configs(cfg)
    assert [c.train.rounds for c in search.search_configs(cfg)] == [4, 4, 4]
    with pytest.raises(ConfigError, match="halving"):
        LrSearch(grid=GRID, halving=1.0)
    with pytest.raises(ConfigError, match="eta"):
        LrSearch(grid=GRID, halving=0.5, eta=1)


def test_halving_chooses_the_full_searchs_rate_from_fewer_rounds(tiny):
    cfg = tiny(**{"train.rounds": 4, "train.lr": 1e-5})
    full = LrSearch(grid=GRID, validation=0.25)
    cut = dataclasses.replace(full, halving=0.5, eta=3)
    chosen_cut, stages = _train(cut, cfg)
    # Stage 1: every rate at 2 rounds; stage 2: the one survivor (ceil(3 / 3)) at 4, which is the
    # full search's own run of that rate.
    short, survivor = stages
    assert [c.train.rounds for c in cut.short_configs(cfg)] == [2, 2, 2]
    assert short == [c.hash() for c in cut.short_configs(cfg)]
    assert survivor == [full.full_configs(cfg)[0].hash()] and cut.survivors(cfg) == [0.1]
    chosen_full, _ = _train(full, cfg)
    assert chosen_cut.train.lr == chosen_full.train.lr == 0.1
    # The search's table shows the short scores and leaves the pruned rates' full scores empty.
    shown = cut.table([cfg], lambda c: c.method.name)
    assert list(shown.columns) == ["short lr=0.1", "short lr=1e-05", "short lr=1e-06", "lr=0.1", "lr=1e-05",
                                   "lr=1e-06", "chosen lr", "lr best", "lr runner-up", "lr margin", "lr SE",
                                   "lr n val", "lr seeds", "lr rule"]
    assert shown["lr=1e-05"].isna().all() and shown["chosen lr"].tolist() == [0.1]


def test_survivors_are_the_best_by_short_score_with_ties_to_the_setups_rate(tiny, monkeypatch):
    cfg = tiny(**{"train.rounds": 8, "train.lr": 0.01})
    cut = LrSearch(grid=(0.1, 0.03, 0.01, 0.003, 0.001), halving=0.25, eta=2)
    short = {0.1: 0.2, 0.03: 0.5, 0.01: 0.5, 0.003: 0.5, 0.001: float("-inf")}
    monkeypatch.setattr(LrSearch, "_stored_scores", lambda self, runs: {float(c.train.lr): short[c.train.lr]
                                                                         for c in runs})
    assert cut.short_rounds(cfg) == 2
    # ceil(5 / 2) = 3 survive: the three tied at 0.5, nearest the setup's 0.01 first (0.003 before 0.03)
    assert cut.survivors(cfg) == [0.01, 0.003, 0.03]


def test_a_table_with_a_halving_search_trains_its_stages_then_its_rows(tiny):
    base = tiny(**{"train.rounds": 4})
    table = TableDef("tour", "halved", "a halved table", [Rows({"method.name": ["fedavg", "local"]})],
                     tune=lambda profile: LrSearch(grid=GRID, validation=0.25, halving=0.5, eta=3))
    results = table.run("smoke", seeds=[0], base=base, progress=False)
    assert results["lr"].tolist() == [0.1, 0.1]
    search = table.search("smoke")
    assert {c.hash() for c in table.search_configs("smoke", seeds=[0], base=base)} == {
        c.hash() for cfg in table._untuned("smoke", [0], None, None, base, {})
        for c in search.short_configs(cfg) + search.full_configs(cfg)[:1]}


def test_halving_changes_lists_the_rows_whose_rate_moves(tiny, monkeypatch):
    base = tiny(**{"train.rounds": 4})
    rows = [Rows({"method.name": ["fedavg", "local"]})]
    table = TableDef("tour", "t", "t", rows, tune=lambda p: LrSearch(grid=(0.1, 0.01, 0.001)))

    # Short runs favour 0.1, full ones 0.01 for FedAvg: halving keeps 0.1 alone and misses 0.01.
    # Local ranks 0.01 first either way.
    def fake(self, runs):
        out = {}
        for c in runs:
            fav = 0.1 if c.train.rounds < 4 and c.method.name == "fedavg" else 0.01
            out[float(c.train.lr)] = 1.0 if c.train.lr == fav else 0.5
        return out

    monkeypatch.setattr(LrSearch, "_stored_scores", fake)
    monkeypatch.setattr(LrSearch, "units", lambda self, cfg: ({}, 0))  # no runs: the ranking decides (fixture)
    changed = _changes_on(table, base, halving=0.5, eta=3)
    assert changed[["row", "full lr", "halving lr"]].values.tolist() == [["fedavg α=0.5", 0.01, 0.1]]
    assert changed["short runs"].tolist() == ["2 of 4 rounds"]


def _changes_on(table, base, **kw):
    """halving_changes of ``table`` with its rows on the tiny ``base`` config."""
    class OnBase(TableDef):
        def _untuned(self, profile, seeds, table_seeds, variant, b, overrides):
            return TableDef._untuned(self, profile, seeds, table_seeds, variant, base, overrides)

    fields = {f.name: getattr(table, f.name) for f in dataclasses.fields(TableDef)}
    return halving_changes({"t": OnBase(**fields)}, "smoke", **kw)


def test_halving_changes_is_empty_where_halving_agrees_and_trains_what_it_needs(tiny):
    base = tiny(**{"train.rounds": 4})
    table = TableDef("tour", "t", "t", [Rows({"method.name": ["fedavg"]})],
                     tune=lambda p: LrSearch(grid=GRID, validation=0.25))
    with pytest.raises(TuningPending):
        _changes_on(table, base, halving=0.5)
    got = _changes_on(table, base, halving=0.5, train=True)
    assert isinstance(got, pd.DataFrame) and got.empty and list(got.columns)[:2] == ["table", "row"]


def _stored_rounds(c):
    return fedrepro.RunResult(fedrepro.run(c).path).rounds


def test_replaying_halving_on_the_full_searchs_runs_is_training_it(tiny):
    cfg = tiny(**{"train.rounds": 4, "train.lr": 1e-5})
    full = LrSearch(grid=(0.1, 0.01, 1e-5), validation=0.25)
    cut = dataclasses.replace(full, halving=0.5, eta=2)
    _train(full, cfg)
    rate, keep = cut.replay_halving(cfg, _stored_rounds)  # from the full runs alone
    chosen, _ = _train(cut, cfg)  # the short runs trained for real
    assert keep == cut.survivors(cfg) and rate == chosen.train.lr
    # What the replay rests on: a short run's score is its full run's at the short run's last round.
    for s, f in zip(cut.short_configs(cfg), full.full_configs(cfg)):
        at = _stored_rounds(f).set_index("round")["acc_mean"]
        assert fedrepro.RunResult(fedrepro.run(s).path).summary["final_acc_mean"] == at.loc[2]


def test_replaying_halving_reads_a_run_that_diverged_before_the_cut_as_losing(tiny):
    # A rate so large that the run diverges in its first round: it stores no round, and its short
    # run would diverge in the same round, so the replay ranks it last, as the trained search does.
    cfg = tiny(**{"train.rounds": 4, "train.lr": 1e-5})
    full = LrSearch(grid=(1e12, 0.1, 1e-5), validation=0.25)
    cut = dataclasses.replace(full, halving=0.5, eta=2)
    _train(full, cfg)
    blown = next(c for c in full.full_configs(cfg) if c.train.lr == 1e12)
    assert fedrepro.RunResult(fedrepro.run(blown).path).summary["diverged_round"] == 1
    rate, keep = cut.replay_halving(cfg, _stored_rounds)
    chosen, _ = _train(cut, cfg)
    assert 1e12 not in keep and keep == cut.survivors(cfg) and rate == chosen.train.lr


def test_replaying_halving_refuses_runs_whose_short_round_was_not_evaluated(tiny):
    cfg = tiny(**{"train.rounds": 4, "train.eval_every": 4})
    full = LrSearch(grid=(0.1, 0.01), validation=0.25)
    _train(full, cfg)
    with pytest.raises(ConfigError, match="round 2"):
        dataclasses.replace(full, halving=0.5).replay_halving(cfg, _stored_rounds)
    with pytest.raises(ConfigError, match="halving=0"):
        full.replay_halving(cfg, _stored_rounds)


def test_halving_replay_lists_every_searched_row_with_both_choices(tiny):
    from fedrepro.papers.tables import halving_replay

    base = tiny(**{"train.rounds": 4})
    table = TableDef("tour", "t", "t", [Rows({"method.name": ["fedavg", "local"]})],
                     tune=lambda p: LrSearch(grid=GRID, validation=0.25))

    class OnBase(TableDef):
        def _untuned(self, profile, seeds, table_seeds, variant, b, overrides):
            return TableDef._untuned(self, profile, seeds, table_seeds, variant, base, overrides)

    fields = {f.name: getattr(table, f.name) for f in dataclasses.fields(TableDef)}
    on_base = OnBase(**fields)
    on_base.run("smoke", seeds=[0], base=base, progress=False)  # the full search, and the rows
    got = halving_replay({"t": on_base}, "smoke", halving=0.5, eta=3)
    assert got["row"].tolist() == ["fedavg α=0.5", "local α=0.5"] and (got["stage"] == "train.lr").all()
    assert (got["full"] == 0.1).all() and not got["changed"].any() and (got["note"] == "").all()
    # Two of the three rates are dropped after 2 of 4 rounds: their last 2 rounds are saved.
    search = on_base.search("smoke")
    for (_, row), cfg in zip(got.iterrows(), on_base._untuned("smoke", None, None, None, None, {})):
        dropped = [c for c in search.full_configs(cfg) if c.train.lr != 0.1]
        want = sum(float(_stored_rounds(c).query("round > 2")[["time_train_s", "time_eval_s"]].sum().sum())
                   for c in dropped)
        assert row["saved_s"] == pytest.approx(want)
