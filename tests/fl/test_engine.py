"""The simulation loop (fl.engine): client sampling, who is evaluated when, held-out clients, bitwise
reproducibility, resuming, divergence, global evaluation and a method's own metrics."""
from __future__ import annotations

import pandas as pd
import pytest
from support import interrupt_at

import fedrepro
from fedrepro.fl import sample_clients
from fedrepro.methods.fedavg import FedAvg
from fedrepro.methods.registry import METHODS
from fedrepro.runs.store import RunStore

METRICS = ["acc_mean", "acc_weighted", "acc_std", "acc_min", "acc_max", "loss_mean", "train_loss"]


def test_sampling_is_seeded_sized_and_varies_by_round():
    cands = list(range(20))
    a = sample_clients(0, 3, cands, 0.5)
    assert a == sample_clients(0, 3, cands, 0.5) and len(a) == 10 and len(set(a)) == 10
    assert a != sample_clients(0, 4, cands, 0.5) or a != sample_clients(1, 3, cands, 0.5)
    assert sample_clients(0, 0, cands, 1.0) == cands
    assert len(sample_clients(0, 0, cands, 0.01)) == 1


def test_every_client_is_evaluated_every_eval_round(tiny):
    res = fedrepro.run(tiny(**{"train.participation": 0.5, "train.rounds": 4, "train.eval_every": 2}))
    c = res.clients
    assert sorted(c["round"].unique()) == [2, 4]
    for _, g in c.groupby("round"):
        assert sorted(g["client"]) == [0, 1, 2, 3]
    r = res.rounds
    assert (r["n_sampled"] == 2).all()
    assert r["acc_mean"].isna().tolist() == [True, False, True, False]
    s = res.summary
    assert s["final_acc_mean"] == pytest.approx(c[c["round"] == 4]["acc"].mean())
    assert s["best_acc_mean"] == pytest.approx(r["acc_mean"].max())
    w = c[c["round"] == 4]
    assert s["final_acc_weighted"] == pytest.approx((w["acc"] * w["n_test"]).sum() / w["n_test"].sum())


def test_held_out_clients_never_train_but_are_evaluated(tiny):
    res = fedrepro.run(tiny(**{"data.holdout_clients": 1, "train.rounds": 2}))
    held = res.meta["held_out"]
    assert len(held) == 1
    c = res.final_clients()
    assert c[c["held_out"]]["client"].tolist() == held
    assert res.summary["final_heldout_acc_mean"] == pytest.approx(c[c["held_out"]]["acc"].mean())
    assert (res.rounds["n_sampled"] == 3).all()


def test_same_seed_gives_bitwise_equal_metrics(tiny, tmp_path):
    a = fedrepro.run(tiny())
    b = fedrepro.run(tiny(runs_dir=str(tmp_path / "other")))
    assert a.path != b.path
    pd.testing.assert_frame_equal(a.rounds[METRICS], b.rounds[METRICS], check_exact=True)
    pd.testing.assert_frame_equal(a.clients, b.clients, check_exact=True)


def test_different_seeds_differ(tiny):
    a, b = fedrepro.run(tiny()), fedrepro.run(tiny(seed=1))
    assert not a.clients["acc"].equals(b.clients["acc"])


@pytest.mark.parametrize("method", ["fedavg", "local", "fedbn"])
def test_resume_after_interruption_matches_uninterrupted(tiny, tmp_path, method):
    cfg = tiny(**{"method.name": method, "model.name": "cnn", "model.args": {"width": 4, "feature_dim": 16},
                  "train.rounds": 4})
    full = fedrepro.run(cfg.replace(runs_dir=str(tmp_path / "full")))

    cut = cfg.replace(runs_dir=str(tmp_path / "cut"))
    interrupt_at(cut, 2)
    store = RunStore(cut.runs_dir)
    assert store.status(cut) == "partial"
    assert (store.path(cut) / "checkpoint.pt").is_file()
    resumed = fedrepro.run(cut)
    assert store.status(cut) == "done"
    pd.testing.assert_frame_equal(full.rounds[METRICS], resumed.rounds[METRICS], check_exact=True)
    pd.testing.assert_frame_equal(full.clients, resumed.clients, check_exact=True)


def test_a_diverged_round_stops_with_a_clear_error(tiny):
    from support import setup

    from fedrepro.errors import TrainingDivergedError
    from fedrepro.fl.engine import simulate

    method, clients, st = setup(tiny(**{"method.name": "fedavg", "train.rounds": 3}))
    aggregate = method.aggregate

    def poisoned(shared, updates, server_state, rnd):
        shared, server_state = aggregate(shared, updates, server_state, rnd)
        if rnd == 1:
            k = next(k for k, v in shared.items() if v.is_floating_point())
            shared = {**shared, k: shared[k] * float("nan")}
        return shared, server_state

    method.aggregate = poisoned
    with pytest.raises(TrainingDivergedError, match="round 2: .*NaN/inf.*Lower train.lr"):
        simulate(method, clients, seed=0, rounds=3, state=st, progress=False)
    assert len(st.round_rows) == 1  # round 1 is kept, round 2 is not recorded


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


def test_no_global_model_no_global_accuracy(tiny):
    res = fedrepro.run(tiny(**{"train.global_eval": True, "method.name": "local"}))
    assert "global_acc" not in res.rounds.columns
    assert "best_global_acc" not in res.summary


class _TwoPart(FedAvg):
    """FedAvg whose clients report two loss parts beside their loss, as FedPFT+Con does (L_CE, L_Con)."""

    name = "test_two_part"

    def client_update(self, shared, state, data, gen, rnd):
        upd = super().client_update(shared, state, data, gen, rnd)
        loss = upd.metrics["train_loss"]
        upd.metrics.update({"loss_ce": 0.25 * loss, "loss_con": 0.75 * loss + data.cid})
        return upd


def test_loss_parts_are_logged_per_round_as_the_clients_mean(tiny, monkeypatch):
    """ICLR Fig. 9 plots L_CE and L_Con per round: each part's mean over the round's clients is a
    round column ``train_<part>``, and no best/final summary treats a loss as a score."""
    monkeypatch.setitem(METHODS._items, "test_two_part", _TwoPart)
    res = fedrepro.run(tiny(**{"method.name": "test_two_part"}))
    rounds = res.rounds
    n = rounds["n_sampled"].iloc[0]
    assert rounds["train_loss_ce"].tolist() == pytest.approx((0.25 * rounds["train_loss"]).tolist())
    mean_cid = sum(range(n)) / n  # full participation: every client, ids 0..n-1
    assert rounds["train_loss_con"].tolist() == pytest.approx((0.75 * rounds["train_loss"] + mean_cid).tolist())
    assert not any("loss_ce" in k or "loss_con" in k for k in res.summary)
    plain = fedrepro.run(tiny())
    assert not any(c.startswith("train_loss_") for c in plain.rounds.columns)
