"""fedrepro.execute.tuning: validation data held out of the training split, the learning-rate search of a
table (the same grid for every row, chosen on validation data), and how tables and plans wait for it."""
from __future__ import annotations

import pandas as pd
import pytest
from support import poison_fedavg

import fedrepro
from fedrepro.errors import ConfigError
from fedrepro.papers.tables import Rows, TableDef
from fedrepro.runs.pipeline import prepare_data
from fedrepro.papers.plan import Need, Plan
from fedrepro.execute.tuning import MIN_VALIDATION_IMAGES, RULE_MARGIN, LrSearch, TuningPending


def test_validation_is_hashed_only_when_set(tiny):
    cfg = tiny()
    assert cfg.replace(**{"data.validation": 0.0}).hash() == cfg.hash()
    assert cfg.replace(**{"data.validation": 0.2}).hash() != cfg.hash()
    with pytest.raises(ConfigError, match="validation"):
        cfg.replace(**{"data.validation": 1.0})


@pytest.mark.parametrize("kw, match", [({"grid": (0.1,)}, r"grid=\(0\.1,\); valid: two or more"),
                                       ({"grid": (0.1, -1.0)}, r"grid=\(0\.1, -1\.0\); valid: .*positive"),
                                       ({"grid": (0.1, 0.1)}, r"grid=\(0\.1, 0\.1\); valid: .*distinct"),
                                       ({"grid": (0.1, 0.01), "validation": 0},
                                        r"validation=0; valid: a number in \(0, 1\)")])
def test_a_search_names_what_is_wrong_with_it(kw, match):
    with pytest.raises(ConfigError, match=match):
        LrSearch(**kw)


def _units(scores: dict, clients: int = 20, spread: float = 0.01) -> dict:
    """Per-(seed, client) validation values around each rate's score: a common client effect plus
    a small noise, so that differences of a few points are many standard errors apart."""
    import numpy as np

    rng = np.random.default_rng(0)
    index = pd.MultiIndex.from_product([[1000], range(clients)], names=["seed", "client"])
    base = rng.normal(0, 0.05, clients)
    return {lr: pd.Series(v + base + rng.normal(0, spread, clients), index=index) for lr, v in scores.items()}


def _fake(monkeypatch, scores, n_images=500, **kw):
    units = _units(scores, **kw)
    monkeypatch.setattr(LrSearch, "scores", lambda self, c: dict(scores))
    monkeypatch.setattr(LrSearch, "units", lambda self, c: (units, n_images))


def test_the_best_validation_score_wins_and_ties_go_to_the_setups_own_rate(tiny, monkeypatch):
    search = LrSearch(grid=(0.1, 0.01, 0.001))
    cfg = tiny(**{"train.lr": 0.01})
    _fake(monkeypatch, {0.1: 0.5, 0.01: 0.7, 0.001: 0.6})
    assert search.choose(cfg).train.lr == 0.01
    _fake(monkeypatch, {0.1: 0.8, 0.01: 0.7, 0.001: 0.6})
    assert search.choose(cfg).train.lr == 0.1
    assert search.decide(cfg).separated and search.decide(cfg).rule == RULE_MARGIN
    # A flat score is within noise: the rule picks (no paper rate: the median candidate, 0.01).
    _fake(monkeypatch, {0.1: 0.7, 0.01: 0.7, 0.001: 0.7})
    assert search.choose(cfg).train.lr == 0.01
    assert LrSearch(grid=(0.1, 0.01), applies=lambda c: False).choose(cfg) is cfg


def _table(profile_grid=(0.2, 0.02)):
    return TableDef("tour", "tuned", "a tuned table", [Rows({"method.name": ["fedavg", "local"]})],
                    tune=lambda profile: LrSearch(grid=profile_grid, validation=0.25, seed=0))


def test_a_tuned_table_waits_for_its_search_then_runs_each_row_at_its_chosen_rate(tiny, monkeypatch):
    base = tiny()
    table = _table()
    search_cfgs = table.search_configs("smoke", seeds=[0, 1], base=base)
    assert len(search_cfgs) == 4  # 2 rows × 2 rates, at the search seed only
    assert all(c.seed == 0 and c.data.validation == 0.25 for c in search_cfgs)
    with pytest.raises(TuningPending) as pending:
        table.configs("smoke", seeds=[0, 1], base=base)
    assert {c.hash() for c in pending.value.configs} == {c.hash() for c in search_cfgs}

    results = table.run("smoke", seeds=[0, 1], base=base, progress=False)
    search = table.search("smoke")
    for cfg in table.configs("smoke", seeds=[0, 1], base=base):
        decision = search.decide(cfg)
        # These runs score a handful of validation images: too few to pick a winner, so the rule picks
        # (no paper rate: the median of the two, the lower).
        assert decision.too_little_data and decision.n_images < MIN_VALIDATION_IMAGES
        assert cfg.train.lr == decision.rate == 0.02
    assert set(results["lr"]) <= {0.2, 0.02} and len(results) == 4
    shown = search.table(table._untuned("smoke", [0], None, None, base, {}), lambda c: c.method.name)
    assert list(shown.index) == ["fedavg", "local"]
    assert list(shown.columns) == ["lr=0.2", "lr=0.02", "chosen lr", "lr best", "lr runner-up", "lr margin", "lr SE",
                                   "lr n val", "lr seeds", "lr rule"]
    assert shown["lr rule"].str.startswith("too little data").all()
    # The search never scored the test split: each client's validation split is cut from its
    # training split (tests/test_validation_split.py checks the cut itself).
    ds, part = prepare_data(search_cfgs[0])
    full, full_part = prepare_data(base.replace(seed=search_cfgs[0].seed))
    for tr, te, whole in zip(part.train, part.test, full_part.train):
        assert len(tr) + len(te) == len(whole)
    assert len(ds.test_y) == sum(len(t) for t in part.test) == sum(len(w) for w in full_part.train) - sum(
        len(t) for t in part.train)


def test_a_rate_that_diverges_at_once_is_stored_unscored_and_loses(tiny, monkeypatch):
    restore = poison_fedavg(monkeypatch, rnd=0)
    res = fedrepro.run(tiny(**{"method.name": "fedavg"}))
    assert res.summary["diverged_round"] == 1 and pd.isna(res.summary["final_acc_mean"])
    restore()
    search = LrSearch(grid=(0.3, 0.03))
    _fake(monkeypatch, {0.3: float("-inf"), 0.03: 0.4})
    assert search.choose(tiny()).train.lr == 0.03
    assert search.decide(tiny()).margin == float("inf") and search.decide(tiny()).separated


def test_a_plan_holds_only_the_search_runs_of_a_table_that_waits_and_marks_its_notebook(tiny, monkeypatch):
    base = tiny()
    table = _table()
    from fedrepro import papers

    monkeypatch.setitem(papers.paper("pfedcspc").TABLES, "tuned", table)
    need = Need("tuned", kwargs={"base": base, "seeds": [0, 1]})
    plan = Plan()
    plan.add("nb.ipynb", "pfedcspc", [need], "smoke")
    assert plan.incomplete == ["nb.ipynb"] and len(plan.runs) == 4
    for cfg in plan.runs.values():
        fedrepro.run(cfg)
    plan = Plan()
    plan.add("nb.ipynb", "pfedcspc", [need], "smoke")
    # Once stored, the notebook reads its search and its tuned rows.
    assert plan.incomplete == [] and len(plan.runs) == 4 + 4


def test_straw_men_are_cells_that_did_not_learn_what_their_column_measures():
    import math

    from fedrepro.execute.tuning import straw_men

    nan = math.nan
    # (method, seed, Global, Local, diverged_round)
    runs = [("pfedcspc", 0.78, 0.80, nan), ("fedavg", 0.75, 0.79, nan), ("feddecorr", 0.202, 0.496, nan),
            ("feddc", nan, nan, 38), ("weak", 0.15, 0.81, nan), ("fedfomo", nan, 0.82, nan)]
    table = pd.DataFrame([{"method.name": m, "seed": s, "G": g, "L": lo, "diverged_round": d}
                          for s in range(2) for m, g, lo, d in runs])
    got = straw_men(table, 0.1, values=["G", "L"], by=["method.name"])
    # FedDecorr's global model is at twice chance while the others sit near 0.75: a straw man there,
    # though its fine-tuned Local is not; FedDC diverged; "weak" is below twice chance; FedFomo has no
    # global model at all (not scored), which is not a straw man.
    assert got[["method", "column", "why"]].values.tolist() == [
        ["feddecorr", "G", "below 0.5× the column's median (23.8%)"], ["feddc", "G", "diverged"],
        ["weak", "G", "below 2× chance (20%)"], ["feddc", "L", "diverged"]]
    # By method and α: the columns are the α values, and only the cells the table runs count.
    by_alpha = pd.DataFrame([{"method.name": m, "alpha": a, "seed": 0, "best": b}
                             for m, a, b in [("fedavg", 0.1, 0.8), ("fedpft", 0.1, 0.9), ("fedpft", 1.0, 0.8),
                                             ("local", 0.1, 0.3)]])
    got = straw_men(by_alpha, 0.1, values=["best"], by=["method.name", "alpha"])
    assert got[["method", "column", "why"]].values.tolist() == [["local", "0.1",
                                                                 "below 0.5× the column's median (40.0%)"]]
    with pytest.raises(ConfigError, match="chance"):
        straw_men(table, 1.5, values=["G"], by=["method.name"])
    with pytest.raises(ConfigError, match="not in the results"):
        straw_men(table, 0.1, values=["Global"], by=["method.name"])


def test_provisional_rates_keep_the_setups_rate_and_collect_the_search_it_waits_for(tiny):
    from fedrepro.execute.tuning import provisional_rates

    search = LrSearch(grid=(0.1, 0.01))
    cfg = tiny(**{"train.lr": 0.05})
    with pytest.raises(TuningPending) as pending:  # nothing stored: a plan waits for the search
        search.choose(cfg)
    with provisional_rates() as waiting:
        assert search.choose(cfg) is cfg
    assert sorted(c.hash() for c in waiting) == sorted(c.hash() for c in pending.value.configs)
    with pytest.raises(TuningPending):  # only inside the context
        search.choose(cfg)


def test_a_row_that_stops_when_flat_is_searched_at_one_fixed_budget(tiny):
    import dataclasses

    from fedrepro.execute.tuning import LrSearch

    row = tiny(**{"train.rounds": 8, "train.stop_when_flat": True, "train.flat_from": 4})
    search = LrSearch(grid=(0.1, 0.01), validation=0.25)
    runs = search.full_configs(row)
    # The pilot's budget, trained in full by every rate: no rate is scored at a round its own curve chose.
    assert all(not c.train.stop_when_flat and c.train.rounds == 4 for c in runs)
    # Without a first round, the maximum; and halving cuts the search runs' budget, not the row's.
    assert all(c.train.rounds == 8 for c in search.full_configs(row.replace(**{"train.flat_from": 0})))
    assert dataclasses.replace(search, halving=0.5).short_rounds(row) == 2
