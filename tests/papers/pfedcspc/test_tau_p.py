"""PMI's temperature τ_p chosen per row of Tables V and VI (fedrepro.papers.pfedcspc.tau_p): each PMI
row searches its own τ_p on its own validation objective at the tuning seed, and the rule keeps the
neutral τ_p = 1 unless the validation score moves it by more than its noise."""
from __future__ import annotations

import dataclasses
import math

import pandas as pd
import pytest
from support import BN_CNN

from fedrepro.papers.pfedcspc import ABLATION_PERSONAL, TABLES
from fedrepro.papers.pfedcspc.setup import TAU_P as SETUP_TAU_P
from fedrepro.papers.pfedcspc.tables import _ablation_rows, plug_row, tau_p_grid
from fedrepro.execute.tuning import RULE_MARGIN, RULE_MEDIAN, TUNING_SEED
from fedrepro.papers.pfedcspc.tau_p import GLOBAL, LOCAL, RULE_NEUTRAL, TauPSearch, decide_tau_p, tau_p_search
from fedrepro.papers.pfedcspc.variants import setting_of

CSPC = {"method.name": "pfedcspc", **BN_CNN,
        "method.args": {"server_epochs": 5, "proj_dim": 16, "clusters": 2, "n_repeat": 3}}
PMI_ROWS = ("FedAvg+PMI+FT_CE", "FedAvg+PMI+FT_CE+Align", "FedCSPC+PMI+FT_CE", "FedCSPC+PMI+FT_CE+Align")


def _setting(cfg) -> str:
    return setting_of(cfg, ABLATION_PERSONAL)


def test_every_pmi_row_searches_its_own_config_on_the_same_grid_at_the_tuning_seed():
    for table, metric, rows in (("ablation_personal", LOCAL, PMI_ROWS),
                                ("orthogonality", GLOBAL, ("fedprox+pfedcspc", "moon+pfedcspc", "fedasam+pfedcspc"))):
        t = TABLES[table]
        search = t.search("laptop")
        assert isinstance(search, TauPSearch) and search.metric == metric
        name = _setting if table == "ablation_personal" else plug_row
        by_row: dict[str, list] = {}
        for c in t.search_configs("laptop"):
            by_row.setdefault(name(c), []).append(c)
        assert sorted(by_row) == sorted(rows)
        untuned = {name(c): c for c in t.configs("laptop", tuned=False) if c.method.name == "pfedcspc"}
        for row, cfgs in by_row.items():
            # The same candidates and budget for every row, on validation data at the tuning seed, each
            # from the row's own config (only τ_p, the seed and the held-out share differ).
            assert sorted(c.method.args["tau_p"] for c in cfgs) == sorted(tau_p_grid("laptop"))
            assert {(c.seed, c.data.validation) for c in cfgs} == {(TUNING_SEED, 0.2)}
            own = untuned[row]
            assert all(c.train == own.train and {k: v for k, v in c.method.args.items() if k != "tau_p"}
                       == {k: v for k, v in own.method.args.items() if k != "tau_p"} for c in cfgs)
    # Rows without PMI search nothing; at smoke one row of each table exercises the search.
    assert {_setting(c) for c in TABLES["ablation_personal"].search_configs("smoke")} == {"FedAvg+PMI+FT_CE"}
    assert {plug_row(c) for c in TABLES["orthogonality"].search_configs("smoke")} == {"moon+pfedcspc"}


def _stub(monkeypatch, scores_of):
    """TauPSearch reads ``scores_of(search, cfg)`` (τ_p -> score) as its stored validation scores, with
    per-client I_local equal to the score for every one of 10 clients at ±0.01 (the same pattern for
    every τ_p, so the paired SE is 0) and 400 validation images: in place of stored search runs."""
    offsets = [0.01 * (i % 3 - 1) for i in range(10)]
    monkeypatch.setattr(TauPSearch, "scores", lambda self, cfg: scores_of(self, cfg))
    monkeypatch.setattr(TauPSearch, "units", lambda self, cfg: (
        {t: pd.Series([v + o for o in offsets]) for t, v in scores_of(self, cfg).items()}, 400))


def test_tau_p_is_read_per_row_on_its_own_objective(monkeypatch):
    """Two rows whose validation objectives favour different τ_p get different τ_p; the FedAvg chain's
    PMI rows do not take the full method's (setup.TAU_P, 0.1 at laptop) where their own search
    favours τ_p = 1."""
    full = {1.0: 0.70, 0.1: 0.80, 0.02: 0.75}  # the full method's objective: τ_p = 0.1 decisively
    fedavg = {1.0: 0.80, 0.1: 0.70, 0.02: 0.60}  # the FedAvg chain's: τ_p = 1
    plug = {1.0: 0.50, 0.1: 0.55, 0.02: 0.65}  # MOON+pFedCSPC's global accuracy: τ_p = 0.02

    def scores_of(search, cfg):
        if search.metric == GLOBAL:
            return plug if plug_row(cfg) == "moon+pfedcspc" else full
        return fedavg if _setting(cfg).startswith("FedAvg") else full

    _stub(monkeypatch, scores_of)
    assert SETUP_TAU_P["laptop"] == 0.1
    taus = {(_setting(c), c.method.args.get("tau_p")) for c in TABLES["ablation_personal"].configs("laptop")
            if c.method.name == "pfedcspc" and c.method.args.get("pmi", True)}
    assert taus == {("FedAvg+PMI+FT_CE", 1.0), ("FedAvg+PMI+FT_CE+Align", 1.0), ("FedCSPC+PMI+FT_CE", 0.1),
                    ("FedCSPC+PMI+FT_CE+Align", 0.1)}
    taus = {(plug_row(c), c.method.args.get("tau_p")) for c in TABLES["orthogonality"].configs("laptop")
            if c.method.name == "pfedcspc"}
    assert taus == {("moon+pfedcspc", 0.02), ("fedprox+pfedcspc", 0.1), ("fedasam+pfedcspc", 0.1)}


def test_rule_keeps_the_neutral_tau_p_unless_the_best_clears_its_noise():
    def decide(scores, se, n_images=400):
        ranked = sorted(scores, key=lambda t: (-scores[t], abs(t - 1.0)))
        return decide_tau_p(scores, ranked, n_images, lambda a, b: se.get((a, b), 0.001))

    # The best clears every other τ_p by more than its SE: it wins, and the margin is over the runner-up.
    d = decide({1.0: 0.70, 0.1: 0.72, 0.02: 0.60}, {(0.1, 1.0): 0.005})
    assert (d.rate, d.best, d.runner_up, d.rule) == (0.1, 0.1, 1.0, RULE_MARGIN)
    assert d.margin == pytest.approx(0.02) and d.se == 0.005
    # Within noise of τ_p = 1: the neutral τ_p, said so.
    d = decide({1.0: 0.70, 0.1: 0.72, 0.02: 0.60}, {(0.1, 1.0): 0.033})
    assert d.rate == 1.0 and d.best == 0.1 and d.rule == RULE_NEUTRAL and d.candidates == (0.1, 1.0)
    # Within noise of another τ_p but clear of the neutral one: the median candidate.
    d = decide({1.0: 0.50, 0.1: 0.72, 0.02: 0.71}, {(0.1, 0.02): 0.05})
    assert d.rate == 0.02 and d.rule == RULE_MEDIAN
    # Too few validation images to tell: the neutral τ_p; a diverged neutral run is told apart.
    assert decide({1.0: 0.70, 0.1: 0.80}, {}, n_images=50).rate == 1.0
    assert decide({1.0: float("-inf"), 0.1: 0.60, 0.02: 0.50}, {}).rate == 0.1
    assert decide({1.0: 0.70, 0.1: 0.70}, {}).rate == 1.0  # a tie goes to the neutral τ_p


def test_search_se_is_paired_over_clients_for_i_local_and_binomial_for_global_accuracy(monkeypatch):
    cfg = next(c for c in TABLES["ablation_personal"].configs("laptop", tuned=False)
               if c.method.name == "pfedcspc" and _setting(c) == "FedAvg+PMI+FT_CE")
    local = TauPSearch(grid=(1.0, 0.1))
    noisy = [0.1 if i % 2 else -0.1 for i in range(10)]
    monkeypatch.setattr(TauPSearch, "scores", lambda self, c: {1.0: 0.70, 0.1: 0.72})
    monkeypatch.setattr(TauPSearch, "units", lambda self, c: (
        {1.0: pd.Series([0.70] * 10), 0.1: pd.Series([0.72 + e for e in noisy])}, 400))
    d = local.decide(cfg)
    assert d.se == pytest.approx(pd.Series(noisy).std(ddof=1) / math.sqrt(10)) and d.n_pairs == 10
    assert d.rate == 1.0 and d.best == 0.1  # +2 points, SE 3.3: within noise
    glob = TauPSearch(grid=(1.0, 0.1), metric=GLOBAL)
    for n, rate in ((100, 1.0), (10_000, 0.1)):
        monkeypatch.setattr(TauPSearch, "units", lambda self, c, n=n: ({1.0: pd.Series([0.7]), 0.1: pd.Series([0.72])},
                                                                       n))
        d = glob.decide(cfg)
        assert d.se == pytest.approx(math.sqrt((0.7 * 0.3 + 0.72 * 0.28) / n)) and d.rate == rate


def test_a_pmi_table_trains_each_rows_search_and_runs_the_row_at_its_choice(tiny):
    """Table V's search end to end on tiny runs: each PMI row's candidates train at the tuning seed on
    validation data, the rows run at the τ_p the rule picks from their own stored scores, and the
    table shows the search and the weights' spread."""
    from fedrepro.papers.pfedcspc.metrics import run_scores
    from fedrepro.papers.pfedcspc.tau_p import tau_p_rows
    from fedrepro.runs.store import RunStore

    base = tiny(**{**CSPC, "train.rounds": 2, "train.global_eval": True})
    settings = {k: ABLATION_PERSONAL[k] for k in ("FedAvg+FT_CE", "FedAvg+PMI+FT_CE", "FedCSPC+PMI+FT_CE+Align")}
    search = tau_p_search((1.0, 0.1), LOCAL, _setting)
    claim = ["FedAvg+PMI+FT_CE", "FedCSPC+PMI+FT_CE+Align"]
    table = dataclasses.replace(TABLES["ablation_personal"], rows=_ablation_rows(settings, lambda p: claim),
                                order=tuple(settings), tune=lambda profile: search)
    t = table.run("smoke", seeds=[0], table_seeds=[0], progress=False, base=base)
    for name in ("FedAvg+PMI+FT_CE", "FedCSPC+PMI+FT_CE+Align"):
        cfg = next(c for c in table.configs("smoke", seeds=[0], table_seeds=[0], base=base, tuned=False)
                   if _setting(c) == name)
        runs = search.full_configs(cfg)
        assert {(c.seed, c.data.validation) for c in runs} == {(TUNING_SEED, 0.2)}
        stored = {search.rate(c): run_scores(RunStore(c.runs_dir).load(c))[LOCAL] for c in runs}
        assert search.scores(cfg) == pytest.approx(stored)  # the row's own validation I_local
        chosen = search.decide(cfg).rate
        assert t.loc[t["setting"] == name, "pmi_tau_p"].tolist() == [chosen]
    assert t.loc[t["setting"] == "FedAvg+FT_CE", "pmi_effective_sources"].isna().all()  # no PMI
    sources = t.loc[t["setting"] != "FedAvg+FT_CE", "pmi_effective_sources"]
    assert ((sources >= 1) & (sources <= 4)).all()  # 4 clients
    view = tau_p_rows(table, t, "smoke", base=base)
    assert {"FedAvg+PMI+FT_CE", "FedCSPC+PMI+FT_CE+Align"} <= set(view.index)
    assert {"τ_p=1", "τ_p=0.1", "chosen τ_p", "τ_p rule", "τ_p margin", "τ_p SE",
            "pmi_effective_sources (claim seeds)"} <= set(view.columns)
