"""Metrics beside the per-client accuracy: macro-F1, a method's own per-client metrics, the global
model's accuracy on the whole test split, and pFedCSPC's I_local and HM derived from them."""
from __future__ import annotations

import math

import pytest
import torch

import fedrepro
from fedrepro.errors import ConfigError
from fedrepro.fl.local import macro_f1
from fedrepro.methods.fedavg import FedAvg
from fedrepro.methods.registry import METHODS
from fedrepro.papers.pfedcspc.metrics import harmonic_mean, round_scores, run_scores, with_scores


def test_macro_f1_over_present_classes_matches_a_hand_count():
    y = torch.tensor([0, 0, 1, 1, 1, 3])
    p = torch.tensor([0, 1, 1, 1, 2, 3])
    # class 0: tp 1, true 2, pred 1 -> 2/3; class 1: tp 2, true 3, pred 3 -> 2/3; class 3: 1.
    # Class 2 is absent from y: not averaged, though predicting it cost class 1 its recall.
    assert macro_f1(y, p) == pytest.approx((2 / 3 + 2 / 3 + 1) / 3)
    assert macro_f1(y, y) == 1.0
    assert math.isnan(macro_f1(torch.tensor([], dtype=torch.long), torch.tensor([], dtype=torch.long)))


def test_i_local_is_the_harmonic_mean_of_accuracy_and_macro_f1():
    assert harmonic_mean(0.8, 0.5) == pytest.approx(2 * 0.8 * 0.5 / 1.3)
    assert math.isnan(harmonic_mean(0.5, float("nan")))  # no F1 computed
    assert harmonic_mean(0.0, 0.0) == 0.0


class _Scored(FedAvg):
    """FedAvg that reports one more per-client metric, which the engine knows nothing about."""

    name = "test_scored"

    def evaluate(self, shared, state, data, gen):
        res = super().evaluate(shared, state, data, gen)
        res.extra["double_acc"] = 2 * res.acc
        return res


def test_a_method_s_own_metric_is_averaged_with_its_best_and_final(tiny, monkeypatch):
    monkeypatch.setitem(METHODS._items, "test_scored", _Scored)
    res = fedrepro.run(tiny(**{"method.name": "test_scored"}))
    clients, rounds, s = res.clients, res.rounds, res.summary
    assert (clients["double_acc"] == 2 * clients["acc"]).all()
    assert rounds["double_acc_mean"].tolist() == pytest.approx((2 * rounds["acc_mean"]).tolist())
    assert s["best_double_acc_mean"] == pytest.approx(rounds["double_acc_mean"].max())
    assert s["final_double_acc_mean"] == pytest.approx(rounds["double_acc_mean"].iloc[-1])
    table = fedrepro.run_grid(tiny(**{"method.name": "test_scored"}), progress=False, workers=1)
    assert table["final_double_acc_mean"].iloc[0] == pytest.approx(s["final_double_acc_mean"])


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


def test_no_global_model_no_global_accuracy(tiny):
    res = fedrepro.run(tiny(**{"train.global_eval": True, "method.name": "local"}))
    assert "global_acc" not in res.rounds.columns
    assert "best_global_acc" not in res.summary


def test_global_eval_off_keeps_old_config_hashes(tiny):
    cfg = tiny()
    assert "global_eval" not in cfg.hashed_dict()["train"]
    on = cfg.replace(**{"train.global_eval": True})
    assert on.hashed_dict()["train"]["global_eval"] is True and on.hash() != cfg.hash()
    with pytest.raises(ConfigError, match="train.global_eval"):
        cfg.replace(**{"train.global_eval": "yes"})


def test_eval_finetune_scores_a_finetuned_copy_and_leaves_training_alone(tiny):
    plain = fedrepro.run(tiny(**{"train.global_eval": True}))
    ft = fedrepro.run(tiny(**{"train.global_eval": True, "train.eval_finetune_epochs": 2}))
    # Training (hence the global model) is the same; only the clients' scores change.
    assert ft.rounds["global_acc"].tolist() == plain.rounds["global_acc"].tolist()
    assert ft.rounds["acc_mean"].tolist() != plain.rounds["acc_mean"].tolist()
    assert "eval_finetune_epochs" not in tiny().hashed_dict()["train"]
