"""fedrepro.execute.run: finished runs are reused, provenance is recorded, grids (sequential, in
workers, sub-grids, variants), mean ± std tables, diverged runs, and a smoke run on Fashion-MNIST."""
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from support import poison_fedavg

import fedrepro
from fedrepro.data import list_datasets
from fedrepro.errors import ConfigError
from fedrepro.runs.store import RunResult


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
    assert fedrepro.execute.local.default_workers(tiny()) == 3
    monkeypatch.setenv("FEDREPRO_WORKERS", "zero")
    with pytest.raises(ConfigError, match="FEDREPRO_WORKERS"):
        fedrepro.execute.local.default_workers(tiny())
    monkeypatch.delenv("FEDREPRO_WORKERS")
    assert fedrepro.execute.local.default_workers(tiny()) == 1  # smoke profile
    with pytest.raises(ConfigError, match="workers"):
        fedrepro.run_grid(tiny(), {"method.name": ["fedavg"]}, workers=0)


def test_default_workers_share_gpus(tiny, monkeypatch):
    """On CUDA a laptop run shares its card with others (the cores over the threads, spread over the
    cards); at the paper profile one run takes a card; FEDREPRO_RUNS_PER_GPU overrides both."""
    import fedrepro.fl.device as device
    import fedrepro.execute.local as local

    monkeypatch.delenv("FEDREPRO_WORKERS", raising=False)
    monkeypatch.delenv("FEDREPRO_RUNS_PER_GPU", raising=False)
    monkeypatch.setattr(local, "cpu_cores", lambda: 16)
    monkeypatch.setattr(device, "visible_gpus", lambda name="auto": ["0", "1"])
    laptop, paper = tiny(profile="laptop", threads=2), tiny(profile="paper", threads=2)
    assert local.default_workers(laptop) == 8          # 4 runs on each of 2 cards, 8 cores × 2 threads
    assert local.default_workers(paper) == 2           # one full-size run per card
    monkeypatch.setenv("FEDREPRO_RUNS_PER_GPU", "3")
    assert local.default_workers(paper) == 6
    monkeypatch.setenv("FEDREPRO_RUNS_PER_GPU", "30")
    assert local.default_workers(laptop) == 8          # never more runs than the cores hold
    monkeypatch.setenv("FEDREPRO_RUNS_PER_GPU", "-1")
    with pytest.raises(ConfigError, match="FEDREPRO_RUNS_PER_GPU=.*positive integer"):
        local.default_workers(laptop)


def test_pool_workers_take_gpus_in_turn(monkeypatch):
    import multiprocessing as mp

    import fedrepro.execute.local as local

    monkeypatch.setattr(local, "die_with_parent", lambda parent: None)  # not this test process's parent
    started, seen = mp.get_context("spawn").Value("i", 0), []
    for _ in range(5):
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
        local.start_worker(os.getppid(), started, ["2", "5"])
        seen.append(os.environ["CUDA_VISIBLE_DEVICES"])
    assert seen == ["2", "5", "2", "5", "2"]
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    local.start_worker(os.getppid(), started, ["3"])   # one card: the worker's environment stays as it is
    assert "CUDA_VISIBLE_DEVICES" not in os.environ


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
                     + [{"m": "b", "alpha": 0.1, "seed": 0, "best": 0.5}, {"m": "b", "alpha": 1.0, "seed": 0,
                                                                           "best": 0.6}])
    p = fedrepro.pivot_mean_std(t, "m", "alpha", label=lambda a: f"α={a}")
    assert list(p.columns) == ["α=0.1", "α=1.0"] and list(p.index) == ["a", "b"]
    assert p.loc["a", "α=0.1"] == "85.00 ± 7.07" and p.loc["b", "α=1.0"] == "60.00¹" and p.loc["a", "α=1.0"] == ""
    from fedrepro.papers.reference import beside, paper_table

    both = beside(p.rename(index={"a": "fedavg"}), paper_table("fedpft", "T-C10"))
    assert both.loc["fedavg", ("paper", "α=0.1")] == 60.39 and both.loc["fedavg", ("ours", "α=0.1")] == "85.00 ± 7.07"
    assert both.loc["local", ("ours", "α=0.1")] == ""


def test_pivot_mean_std_says_diverged_instead_of_a_number():
    nan = float("nan")
    t = pd.DataFrame([{"m": m, "seed": s, "final": v, "diverged_round": d} for m, s, v, d in [
        ("ok", 0, 0.8, nan), ("ok", 1, 0.9, nan),
        ("gone", 0, nan, 12), ("gone", 1, nan, 30),
        ("half", 0, 0.7, nan), ("half", 1, nan, 9), ("half", 2, 0.8, nan)]])
    p = fedrepro.pivot_mean_std(t, "m", metric="final")["final"]
    assert p["ok"] == "85.00 ± 7.07" and p["gone"] == "diverged"
    assert p["half"] == "75.00 ± 7.07 (1 of 3 diverged)"  # the mean of the seeds that did not
    assert fedrepro.pivot_mean_std(t.drop(columns="diverged_round"), "m", metric="final")["final"]["gone"] == "n/a"
    ms = fedrepro.mean_std(t, ["m"], ["final"]).set_index("m")
    assert ms.loc["gone", "final_std"] == 0 and ms.loc["gone", "final_mean"] != ms.loc["gone", "final_mean"]


def test_a_diverged_run_is_stored_as_a_result_and_reused(tiny, monkeypatch):
    restore = poison_fedavg(monkeypatch)
    cfg = tiny(**{"method.name": "fedavg", "train.rounds": 3})
    s = fedrepro.run(cfg).summary
    assert s["diverged_round"] == 2 and "NaN/inf" in s["diverged"]
    assert pd.isna(s["final_acc_mean"]) and s["rounds"] == 1  # NaN is stored as null and 0 <= s["best_acc_mean"] <= 1
    restore()  # a re-run loads the stored result, no retraining
    assert fedrepro.run(cfg).summary["diverged_round"] == 2
    table = fedrepro.run_grid(cfg, seeds=[cfg.seed], progress=False)
    assert table["diverged_round"].item() == 2 and pd.isna(table["final"].item())


@pytest.mark.skipif("fashion_mnist" not in list_datasets(), reason="no fashion_mnist loader")
def test_fedavg_and_local_learn_fashion_mnist_smoke(tmp_path):
    from fedrepro.errors import DataNotFoundError

    try:
        results = {m: fedrepro.run(profile="smoke", runs_dir=str(tmp_path), progress=False, method__name=m,
                                   train__rounds=3)
                   for m in ("fedavg", "local")}
    except DataNotFoundError as e:
        pytest.skip(f"Fashion-MNIST not installed: {e}")
    for m, res in results.items():
        assert res.summary["final_acc_mean"] > 0.4, (m, res.summary)  # chance is 0.10


def test_a_method_knows_the_class_names_in_label_order(tiny):
    from support import setup

    from fedrepro.runs.pipeline import make_method_for, prepare_data

    cfg = tiny(**{"data.dataset": "fashion_mnist_federated", "data.dataset_args": {}, "data.max_train": 200,
                  "data.max_test": 100})
    ds, _ = prepare_data(cfg)
    method, _, _ = setup(cfg)
    assert method.ctx.class_names == tuple(ds.classes) and len(ds.classes) == ds.num_classes
    assert method.ctx.class_names[0] == ds.classes[0] != ds.classes[1]
    # Counting parameters without data needs no names; a wrong count is refused.
    assert make_method_for(cfg, 10, 1, 28).ctx.class_names == ()
    with pytest.raises(ConfigError, match="class_names"):
        make_method_for(cfg, 10, 1, 28, class_names=["a", "b"])


def test_the_dataset_cache_keeps_the_latest_within_its_budget(monkeypatch):
    from fedrepro.runs import pipeline

    monkeypatch.setattr(pipeline, "_datasets", pipeline.OrderedDict())
    monkeypatch.setattr(pipeline, "DATA_CACHE_MIB", 0)  # nothing fits: only the dataset in use is kept
    a = pipeline.load_cached("synthetic", "{}")
    assert pipeline.load_cached("synthetic", "{}") is a
    pipeline.load_cached("synthetic", '{"num_classes": 4}')
    assert [key[1:] for key in pipeline._datasets] == [("synthetic", '{"num_classes": 4}')]
    monkeypatch.setattr(pipeline, "DATA_CACHE_MIB", 256)
    pipeline.load_cached("synthetic", "{}")
    assert len(pipeline._datasets) == 2
    # The same name and options under another data root (the rehearsal's) are another dataset.
    monkeypatch.setenv("FEDREPRO_DATA", "rehearsal:")
    pipeline.load_cached("synthetic", "{}")
    assert len(pipeline._datasets) == 3
