"""make bench: the bare loop does the engine's work, and the ratio's verdict reads its interval."""
from __future__ import annotations

import torch

from fedrepro.app.bench import _ratios, bare_fedavg, bench_config
from fedrepro.runs.pipeline import build_clients, make_method, prepare_data
from fedrepro.fl.device import torch_threads
from fedrepro.fl.engine import simulate


def test_the_bare_loop_ends_on_the_engines_weights_bit_for_bit():
    cfg = bench_config(2)
    device = torch.device("cpu")
    with torch_threads(cfg.threads):
        ds, part = prepare_data(cfg)
        clients = build_clients(ds, part, device)
        state = simulate(make_method(cfg, ds, device), clients, seed=cfg.seed, rounds=2, progress=False)
        bare = bare_fedavg(cfg, clients, ds.num_classes, ds.in_channels, ds.image_size, device)
    assert state.shared.keys() == bare.keys()
    for k, v in state.shared.items():
        assert v.dtype == bare[k].dtype and torch.equal(v, bare[k]), k


def test_the_ratio_is_met_only_when_its_whole_interval_is_at_or_below_the_target():
    bare = [1.0] * 6
    assert _ratios([1.01, 1.02, 1.015, 1.01, 1.02, 1.012], bare, 1.05)["target"] == "met"
    assert _ratios([1.10, 1.12, 1.11, 1.10, 1.13, 1.09], bare, 1.05)["target"] == "missed"
    r = _ratios([0.95, 1.15, 1.0, 1.1, 0.98, 1.12], bare, 1.05)
    assert r["target"] == "inconclusive" and r["interval_90"][0] < 1.05 < r["interval_90"][1]
