"""The rate a search may choose on its data (fedrepro.execute.tuning, issue 55): the best rate wins
only on at least MIN_VALIDATION_IMAGES validation images and by more than the standard error of its
paired difference from every other rate; otherwise the stated rule picks among the rates within
noise (the paper's rate if it is one of them, else the median), and the decision says which."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

import fedrepro
from fedrepro.execute import tuning
from fedrepro.execute.tuning import (MIN_VALIDATION_IMAGES, RULE_MARGIN, RULE_MEDIAN, RULE_PAPER, TOO_LITTLE, LrSearch,
                                     decide_rate, median_candidate)
from fedrepro.runs.pipeline import prepare_data

GRID = (1.0, 0.1, 0.01, 0.001)


def units(means: dict, clients: int = 30, noise: float = 0.02, seed: int = 0) -> dict:
    """Per-(seed, client) values: a client effect shared by every rate, plus each rate's mean and noise."""
    rng = np.random.default_rng(seed)
    index = pd.MultiIndex.from_product([[1000], range(clients)], names=["seed", "client"])
    shared = rng.normal(0, 0.1, clients)
    return {lr: pd.Series(m + shared + rng.normal(0, noise, clients), index=index) for lr, m in means.items()}


def run(means, n_images, paper_rate=None, **kw):
    u = units(means, **kw)
    scores = {lr: float(v.mean()) for lr, v in u.items()}
    ranked = sorted(scores, key=lambda lr: -scores[lr])
    return decide_rate(scores, u, n_images, ranked, paper_rate, seeds=(1000,))


def test_a_winner_decided_by_fewer_than_the_minimum_of_images_goes_to_the_rule():
    # FedOTP's old search: 10 validation images, and lr 1.0 ahead by one of them.
    d = run({1.0: 0.7, 0.1: 0.6, 0.01: 0.5, 0.001: 0.6}, n_images=10, paper_rate=0.001)
    assert d.best == 1.0 and d.too_little_data and not d.separated
    assert d.rate == 0.001 and d.rule == f"{TOO_LITTLE} (10 < {MIN_VALIDATION_IMAGES} images); {RULE_PAPER}"
    assert "too little data" in d.text()
    # However far ahead: with too little data every scored rate is a candidate, and no paper rate means
    # the median (of four, the lower middle one).
    d = run({1.0: 0.9, 0.1: 0.2, 0.01: 0.2, 0.001: 0.2}, n_images=MIN_VALIDATION_IMAGES - 1)
    assert d.rate == 0.01 and d.rule.endswith(RULE_MEDIAN) and d.candidates == (0.001, 0.01, 0.1, 1.0)
    # At the minimum the same data decides on its margin.
    d = run({1.0: 0.9, 0.1: 0.2, 0.01: 0.2, 0.001: 0.2}, n_images=MIN_VALIDATION_IMAGES)
    assert d.rate == 1.0 and d.rule == RULE_MARGIN and d.separated and d.margin > d.se > 0


def test_within_noise_the_paper_rate_if_it_is_a_candidate_else_the_median_candidate():
    # 0.01 and 0.1 within noise of each other, 1.0 and 0.001 far below.
    means = {1.0: 0.3, 0.1: 0.801, 0.01: 0.8, 0.001: 0.5}
    d = run(means, n_images=500, paper_rate=0.01)
    assert d.best == 0.1 and d.runner_up == 0.01 and d.margin <= d.se
    assert d.candidates == (0.01, 0.1) and d.rate == 0.01 and d.rule == RULE_PAPER
    # The paper's rate is not among them: the lower of the two middle candidates.
    d = run(means, n_images=500, paper_rate=0.001)
    assert d.rate == 0.01 and d.rule == RULE_MEDIAN and 0.001 not in d.candidates
    assert median_candidate([0.1, 0.001, 0.01]) == 0.01 and median_candidate([1.0, 0.1]) == 0.1


def test_the_standard_error_is_of_the_paired_per_client_differences():
    # A large client effect shared by both rates cancels in the pairs: a steady 2-point lead is decided.
    d = run({0.1: 0.52, 0.01: 0.50}, n_images=600, noise=0.005)
    assert d.separated and d.margin == pytest.approx(0.02, abs=0.005)
    diffs = units({0.1: 0.52, 0.01: 0.50}, noise=0.005)
    diff = diffs[0.1] - diffs[0.01]
    assert d.se == pytest.approx(diff.std(ddof=1) / math.sqrt(len(diff))) and d.n_pairs == 30
    # Unpaired, the client effect (sd 0.1 over 30 clients) would swamp it: the pairing is what decides.
    assert 0.02 < 0.1 * math.sqrt(2 / 30)


def test_a_diverged_runner_up_is_told_apart_by_its_divergence():
    u = units({0.1: 0.6})
    d = decide_rate({0.1: 0.6, 1.0: -math.inf}, u, 500, [0.1, 1.0], None, (1000,))
    assert d.separated and d.rate == 0.1 and d.margin == math.inf
    d = decide_rate({0.1: 0.6, 1.0: -math.inf}, u, 5, [0.1, 1.0], 1.0, (1000,))
    assert d.rate == 0.1 and d.candidates == (0.1,)  # too little data, but a diverged rate is never a candidate


def test_a_search_runs_every_rate_at_each_tuning_seed_and_scores_their_mean(tiny, monkeypatch):
    row = tiny(**{"train.lr": 0.1})
    search = LrSearch(grid=(0.1, 0.01), validation=0.1, repeats=2, paper_rate=0.01)
    runs = search.full_configs(row)
    assert [(c.train.lr, c.seed) for c in runs] == [(0.1, 1000), (0.1, 1001), (0.01, 1000), (0.01, 1001)]
    assert LrSearch(grid=(0.1, 0.01)).seeds == (1000,)  # one seed unless asked: a search's runs keep their hashes
    for c in runs:
        fedrepro.run(c)
    results = {(c.train.lr, c.seed): fedrepro.RunStore(c.runs_dir).load(c) for c in runs}
    scores = search.scores(row)
    for lr in (0.1, 0.01):
        assert scores[lr] == pytest.approx(np.mean([results[(lr, s)].summary["final_acc_mean"] for s in (1000, 1001)]))
    values, n_images = search.units(row)
    # Every client of both seeds, and every validation image of both seeds' splits.
    assert set(values[0.1].index.get_level_values("seed")) == {1000, 1001}
    assert n_images == sum(sum(len(t) for t in prepare_data(c)[1].test) for c in runs if c.train.lr == 0.1)
    d = search.decide(row)
    assert d.n_images == n_images < MIN_VALIDATION_IMAGES and d.too_little_data  # a tiny run scores few images
    assert search.choose(row).train.lr == d.rate == 0.01  # so the rule picks: the paper's rate
    shown = search.table([row], lambda c: "row")
    assert shown.loc["row", "lr rule"] == d.rule and shown.loc["row", "lr n val"] == n_images
    assert shown.loc["row", "lr seeds"] == 2 and shown.loc["row", "chosen lr"] == 0.01
    # Lift the minimum: the same runs decide by their margin where it exceeds its SE (else by the rule).
    monkeypatch.setattr(tuning, "MIN_VALIDATION_IMAGES", 0)
    d = search.decide(row)
    assert d.rate == (d.best if d.margin > d.se else 0.01)


def test_a_rate_that_diverged_at_one_tuning_seed_loses(tiny, monkeypatch):
    search = LrSearch(grid=(0.1, 0.01), repeats=2)
    summaries = {(0.1, 1000): {"final_acc_mean": 0.9}, (0.1, 1001): {"final_acc_mean": None},
                 (0.01, 1000): {"final_acc_mean": 0.5}, (0.01, 1001): {"final_acc_mean": 0.5}}
    assert search._scores_of(summaries) == {0.1: -math.inf, 0.01: 0.5}
