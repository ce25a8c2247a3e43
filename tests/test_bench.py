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


def test_the_kernel_benchs_bfloat16_steps_train():
    """bench/kernels.py's bfloat16 options (measured there, adopted nowhere) take a step on the
    laptop's ResNet-8 and ViT: the forward runs in bfloat16, the float32 weights move."""
    import importlib

    kernels = importlib.import_module("bench.kernels")
    for name in kernels.BF16_OPTIONS:
        make, images, threads = kernels.BF16_OPTIONS[name]
        step = make()
        cell = step.__closure__  # the step's model: the first module among its free variables
        net = next(c.cell_contents for c in cell if isinstance(c.cell_contents, torch.nn.Module))
        before = [p.detach().clone() for p in net.parameters()]
        step()
        assert all(p.dtype == torch.float32 for p in net.parameters()), name
        assert any(not torch.equal(a, p) for a, p in zip(before, net.parameters())), name
    with torch.autocast("cpu", dtype=torch.bfloat16):  # the autocast path does compute in bfloat16
        assert kernels._model()(kernels._data()[0][0]).dtype == torch.bfloat16
