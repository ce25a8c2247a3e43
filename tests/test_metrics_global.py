"""Local-test macro-F1 / I_local and the global model's accuracy on the whole test split
(specs/pfedcspc.md §1.8), which the engine logs beside the per-client accuracy."""
from __future__ import annotations

import math

import pytest
import torch

import fedrepro
from fedrepro.errors import ConfigError
from fedrepro.fl.local import macro_f1
from fedrepro.fl.method import EvalResult, harmonic_mean


def test_macro_f1_over_present_classes_matches_a_hand_count():
    y = torch.tensor([0, 0, 1, 1, 1, 3])
    p = torch.tensor([0, 1, 1, 1, 2, 3])
    # class 0: tp 1, true 2, pred 1 -> 2/3; class 1: tp 2, true 3, pred 3 -> 2/3; class 3: 1.
    # Class 2 is absent from y: not averaged, though predicting it cost class 1 its recall.
    assert macro_f1(y, p) == pytest.approx((2 / 3 + 2 / 3 + 1) / 3)
    assert macro_f1(y, y) == 1.0
    assert math.isnan(macro_f1(torch.tensor([], dtype=torch.long), torch.tensor([], dtype=torch.long)))


def test_i_local_is_the_harmonic_mean_of_accuracy_and_macro_f1():
    r = EvalResult(correct=8, total=10, loss_sum=0.0, f1_macro=0.5)
    assert r.i_local == pytest.approx(2 * 0.8 * 0.5 / 1.3)
    assert math.isnan(EvalResult(1, 2, 0.0).i_local)  # no F1 computed
    assert harmonic_mean(0.0, 0.0) == 0.0


def test_global_eval_logs_global_accuracy_and_hm(tiny):
    res = fedrepro.run(tiny(**{"train.global_eval": True}))
    rounds = res.rounds
    assert {"global_acc", "hm", "i_local_mean"} <= set(rounds.columns)
    assert rounds["global_acc"].between(0, 1).all()
    r = rounds.iloc[-1]
    assert r["hm"] == pytest.approx(harmonic_mean(r["global_acc"], r["i_local_mean"]))
    s = res.summary
    assert s["final_global_acc"] == pytest.approx(r["global_acc"])
    assert s["best_global_acc"] == pytest.approx(rounds["global_acc"].max())
    clients = res.clients
    assert {"f1", "i_local"} <= set(clients.columns)
    # FedAvg's global model is what every client evaluates: on the whole test split (the union of
    # the clients' splits here) its accuracy is the test-size-weighted client mean.
    assert r["global_acc"] == pytest.approx(r["acc_weighted"])


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
