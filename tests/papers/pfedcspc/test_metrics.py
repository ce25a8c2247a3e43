"""pFedCSPC's metrics: I_local is the harmonic mean of accuracy and macro-F1, and HM is derived from
the stored rows of a run with global evaluation."""
from __future__ import annotations

import math

import pytest

import fedrepro
from fedrepro.papers.pfedcspc.metrics import harmonic_mean, round_scores, run_scores, with_scores


def test_i_local_is_the_harmonic_mean_of_accuracy_and_macro_f1():
    assert harmonic_mean(0.8, 0.5) == pytest.approx(2 * 0.8 * 0.5 / 1.3)
    assert math.isnan(harmonic_mean(0.5, float("nan")))  # no F1 computed
    assert harmonic_mean(0.0, 0.0) == 0.0


def test_global_eval_logs_global_accuracy_and_pfedcspc_scores_derive_hm(tiny):
    res = fedrepro.run(tiny(**{"train.global_eval": True}))
    rounds = res.rounds
    assert {"global_acc", "f1_mean"} <= set(rounds.columns)
    assert rounds["global_acc"].between(0, 1).all()
    r = rounds.iloc[-1]
    s = res.summary
    assert s["final_global_acc"] == pytest.approx(r["global_acc"])
    assert s["best_global_acc"] == pytest.approx(rounds["global_acc"].max())
    clients = res.clients
    assert "f1" in clients.columns
    # FedAvg's global model is what every client evaluates: on the whole test split (the union of
    # the clients' splits here) its accuracy is the test-size-weighted client mean.
    assert r["global_acc"] == pytest.approx(r["acc_weighted"])
    # pFedCSPC's scores, derived from the stored rows.
    scores = round_scores(res)
    last = clients[clients["round"] == clients["round"].max()]
    i_local = sum(harmonic_mean(a, f) for a, f in zip(last["acc"], last["f1"])) / len(last)
    assert scores["i_local_mean"].iloc[-1] == pytest.approx(i_local)
    assert scores["hm"].iloc[-1] == pytest.approx(harmonic_mean(r["global_acc"], i_local))
    summary = run_scores(res)
    assert summary["final_hm"] == scores["hm"].iloc[-1]
    assert summary["best_i_local_mean"] == scores["i_local_mean"].max()
    table = with_scores(fedrepro.run_grid(tiny(**{"train.global_eval": True}), progress=False, workers=1))
    assert table["final_hm"].iloc[0] == summary["final_hm"]
