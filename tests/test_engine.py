"""Engine invariants: aggregation, sampling, evaluation coverage, determinism, resume."""
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

import fedrepro
from fedrepro.errors import ConfigError
from fedrepro.fl import sample_clients, weighted_average
from fedrepro.store import RunResult, RunStore
from support import interrupt_at

METRICS = ["acc_mean", "acc_weighted", "acc_std", "acc_min", "acc_max", "loss_mean", "train_loss"]


# --- aggregation -------------------------------------------------------------------------------

def test_weighted_average_of_identical_states_is_identity():
    s = {"w": torch.randn(3, 4), "n": torch.tensor(7)}
    out = weighted_average([s, s, s], [1, 5, 2])
    assert torch.allclose(out["w"], s["w"]) and out["n"].item() == 7 and out["n"].dtype == s["n"].dtype


def test_weighted_average_weights_and_permutation_invariance():
    a, b = {"w": torch.zeros(2)}, {"w": torch.ones(2)}
    assert torch.allclose(weighted_average([a, b], [1, 3])["w"], torch.full((2,), 0.75))
    assert torch.allclose(weighted_average([b, a], [3, 1])["w"], torch.full((2,), 0.75))
    # scaling all weights changes nothing
    assert torch.allclose(weighted_average([a, b], [10, 30])["w"], torch.full((2,), 0.75))


def test_weighted_average_is_convex_combination():
    g = torch.Generator().manual_seed(0)
    states = [{"w": torch.randn(5, generator=g)} for _ in range(4)]
    out = weighted_average(states, [1, 2, 3, 4])["w"]
    stacked = torch.stack([s["w"] for s in states])
    assert torch.all(out <= stacked.max(0).values + 1e-6) and torch.all(out >= stacked.min(0).values - 1e-6)


def test_weighted_average_rejects_bad_input():
    with pytest.raises(ValueError):
        weighted_average([], [])
    with pytest.raises(ValueError):
        weighted_average([{"w": torch.zeros(1)}], [0])
    with pytest.raises(ValueError):
        weighted_average([{"w": torch.zeros(1)}, {"v": torch.zeros(1)}], [1, 1])


# --- sampling ------------------------------------------------------------------------------------

def test_sampling_is_seeded_sized_and_varies_by_round():
    cands = list(range(20))
    a = sample_clients(0, 3, cands, 0.5)
    assert a == sample_clients(0, 3, cands, 0.5) and len(a) == 10 and len(set(a)) == 10
    assert a != sample_clients(0, 4, cands, 0.5) or a != sample_clients(1, 3, cands, 0.5)
    assert sample_clients(0, 0, cands, 1.0) == cands
    assert len(sample_clients(0, 0, cands, 0.01)) == 1


# --- runs ------------------------------------------------------------------------------------------

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


def test_finished_config_is_reused_not_rerun(tiny):
    cfg = tiny()
    first = fedrepro.run(cfg)
    calls = []
    again = fedrepro.run(cfg, on_round_end=lambda s: calls.append(s.next_round))
    assert calls == [] and again.path == first.path
    assert again.summary == first.summary


def test_run_grid_and_mean_std(tiny):
    table = fedrepro.run_grid(tiny(), {"method.name": ["fedavg", "local"]}, seeds=[0, 1])
    assert len(table) == 4 and set(table["method.name"]) == {"fedavg", "local"}
    ms = fedrepro.mean_std(table, ["method.name"])
    assert (ms["seeds"] == 2).all()
    row = ms[ms["method.name"] == "local"].iloc[0]
    vals = table[table["method.name"] == "local"]["best"]
    assert row["best_mean"] == pytest.approx(vals.mean()) and row["best_std"] == pytest.approx(vals.std())
    txt = fedrepro.format_mean_std(table, ["method.name"])
    assert "±" in txt["best"].iloc[0]


def test_device_auto_runs_on_cpu_here(tiny):
    res = fedrepro.run(tiny(**{"train.rounds": 1}))
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert res.meta["device"].startswith(expected)


def test_meta_records_provenance(tiny):
    res = fedrepro.run(tiny(**{"train.rounds": 1}))
    m = res.meta
    for key in ("seed", "partition_hash", "torch", "numpy", "python", "fedrepro", "git_commit", "started", "device"):
        assert key in m
    assert res.config == tiny(**{"train.rounds": 1}).replace(runs_dir=res.config.runs_dir)
    assert np.isfinite(res.summary["time_train_s"])


def test_run_grid_workers_match_sequential(tiny, tmp_path):
    """Worker processes (1 thread each, like this test session) give the very numbers of a
    sequential grid, and the parent reads every run back from the store."""
    grid = {"method.name": ["fedavg", "fedper"]}
    par = fedrepro.run_grid(tiny(), grid, seeds=[0, 1], workers=2, progress=False)
    seq = fedrepro.run_grid(tiny(runs_dir=str(tmp_path / "seq")), grid, seeds=[0, 1], workers=1,
                            progress=False)
    assert list(par["final"]) == list(seq["final"]) and list(par["best"]) == list(seq["best"])
    assert all(RunResult(Path(p)).meta["torch_threads"] == 1 for p in par["path"])


def test_default_workers(tiny, monkeypatch):
    monkeypatch.setenv("FEDREPRO_WORKERS", "3")
    assert fedrepro.experiment.default_workers(tiny()) == 3
    monkeypatch.setenv("FEDREPRO_WORKERS", "zero")
    with pytest.raises(ConfigError, match="FEDREPRO_WORKERS"):
        fedrepro.experiment.default_workers(tiny())
    monkeypatch.delenv("FEDREPRO_WORKERS")
    assert fedrepro.experiment.default_workers(tiny()) == 1  # smoke profile
    with pytest.raises(ConfigError, match="workers"):
        fedrepro.run_grid(tiny(), {"method.name": ["fedavg"]}, workers=0)


def test_run_grid_subgrids_with_own_seeds_and_named_variants(tiny):
    table = fedrepro.run_grid(tiny(), [{"method.name": ["fedavg"], "seed": [0, 1]}, {"method.name": ["local"]}],
                              seeds=[0], progress=False)
    assert list(zip(table["method.name"], table["seed"])) == [("fedavg", 0), ("fedavg", 1), ("local", 0)]
    v = fedrepro.run_grid(tiny(), {"train.rounds": [2]}, seeds=[0], progress=False, variant_col="setting",
                          variants={"A": {"method.name": "fedavg"}, "B": {"method.name": "fedprox",
                                                                          "method.args": {"mu": 0.5}}})
    assert list(v["setting"]) == ["A", "B"]
    cfg_b = fedrepro.RunResult(Path(v["path"][1])).config
    assert cfg_b.method.name == "fedprox" and cfg_b.method.args["mu"] == 0.5 and cfg_b.train.rounds == 2


def test_pivot_mean_std_marks_single_seed_cells():
    t = pd.DataFrame([{"m": "a", "alpha": 0.1, "seed": s, "best": b} for s, b in [(0, 0.8), (1, 0.9)]]
                     + [{"m": "b", "alpha": 0.1, "seed": 0, "best": 0.5}, {"m": "b", "alpha": 1.0, "seed": 0, "best": 0.6}])
    p = fedrepro.pivot_mean_std(t, "m", "alpha", label=lambda a: f"α={a}")
    assert list(p.columns) == ["α=0.1", "α=1.0"] and list(p.index) == ["a", "b"]
    assert p.loc["a", "α=0.1"] == "85.00 ± 7.07" and p.loc["b", "α=1.0"] == "60.00¹" and p.loc["a", "α=1.0"] == ""
    from fedrepro.reference import beside, paper_table

    both = beside(p.rename(index={"a": "fedavg"}), paper_table("fedpft", "T-C10"))
    assert both.loc["fedavg", ("paper", "α=0.1")] == 60.39 and both.loc["fedavg", ("ours", "α=0.1")] == "85.00 ± 7.07"
    assert both.loc["local", ("ours", "α=0.1")] == ""


def test_a_diverged_round_stops_with_a_clear_error(tiny):
    from fedrepro.errors import TrainingDivergedError
    from fedrepro.fl.engine import simulate
    from support import setup

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


def test_a_diverged_run_is_stored_as_a_result_and_reused(tiny, monkeypatch):
    from fedrepro.methods.fedavg import FedAvg

    aggregate = FedAvg.aggregate

    def poisoned(self, shared, updates, server_state, rnd):
        shared, server_state = aggregate(self, shared, updates, server_state, rnd)
        if rnd == 1:
            k = next(k for k, v in shared.items() if v.is_floating_point())
            shared = {**shared, k: shared[k] * float("nan")}
        return shared, server_state

    monkeypatch.setattr(FedAvg, "aggregate", poisoned)
    cfg = tiny(**{"method.name": "fedavg", "train.rounds": 3})
    s = fedrepro.run(cfg).summary
    assert s["diverged_round"] == 2 and "NaN/inf" in s["diverged"]
    assert pd.isna(s["final_acc_mean"]) and s["rounds"] == 1  # NaN is stored as null and 0 <= s["best_acc_mean"] <= 1
    monkeypatch.setattr(FedAvg, "aggregate", aggregate)  # a re-run loads the stored result, no retraining
    assert fedrepro.run(cfg).summary["diverged_round"] == 2
    table = fedrepro.run_grid(cfg, seeds=[cfg.seed], progress=False)
    assert table["diverged_round"].item() == 2 and pd.isna(table["final"].item())
