"""Helpers shared by the tests in every folder of tests/ (importable as ``support``: pyproject's
``[tool.pytest.ini_options] pythonpath`` puts tests/ on sys.path)."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pandas as pd
import torch

import fedrepro
from fedrepro.runs.pipeline import build_clients, make_method, prepare_data
from fedrepro.fl.engine import init_state
from fedrepro.fl.seeding import torch_gen


def bench_module(name: str):
    """``bench/<name>.py`` imported as a module (bench/ is scripts, not a package)."""
    spec = importlib.util.spec_from_file_location(name, Path(__file__).resolve().parent.parent / "bench" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def tiny_config(tmp_path, **overrides):
    """A config that trains in about a second on the synthetic dataset."""
    base = {
        "runs_dir": str(tmp_path / "runs"),
        "progress": False,
        "data": {"dataset": "synthetic", "dataset_args": {"num_classes": 4, "train_per_class": 60,
                                                          "test_per_class": 20, "image_size": 8},
                 "partition": "dirichlet", "partition_args": {"alpha": 0.5, "min_size": 5}, "num_clients": 4},
        "model": {"name": "mlp", "args": {}},
        "train": {"rounds": 3, "local_epochs": 1, "batch_size": 20, "lr": 0.05},
    }
    cfg = fedrepro.make_config("smoke", overrides=base)
    # dotted overrides last, so a test can change one field
    return cfg.replace(**overrides) if overrides else cfg


# A tiny CNN with BatchNorm, so FedBN and the BN-aware methods have something to keep local.
BN_CNN = {"model.name": "cnn", "model.args": {"width": 4, "feature_dim": 16, "norm": "bn"}}


# A narrow ResNet-8: BatchNorm everywhere, feature dimension m = 16.
RESNET = {"model.name": "resnet8", "model.args": {"width": 4}}

# One plain gradient step per round (no momentum, one full batch): updates a test can write down.
PLAIN_STEP = {"train.momentum": 0.0, "train.batch_size": 10_000, "train.local_epochs": 1}


def update(method, st, client, rnd=0, state=None, shared=None):
    """One ``client_update`` of ``client`` from the initial SimState ``st`` (or the given shared/state),
    with the engine's generator for (seed 0, round ``rnd``, client)."""
    return method.client_update(st.shared if shared is None else shared,
                                st.client_states[client.cid] if state is None else state,
                                client, torch_gen(0, "client", rnd, client.cid), rnd)


def first_batch(client):
    """The client's whole training split as one unshuffled batch."""
    return next(client.eval_train_batches(10_000))


# full_batch, model_part and fedavg_step: FedASAM's, FedDC's and FedProc's one-step references.
def full_batch(client):
    return next(client.eval_train_batches(10_000))


def model_part(method, shared):
    return {k: shared[k] for k in method.shared_keys}


def fedavg_step(tiny, shared, client, lr):
    """FedAvg's one-step update from ``shared`` (the reference every mechanism is compared to)."""
    avg, _, _ = setup(tiny(**PLAIN_STEP, **{"train.lr": lr}))
    return avg.client_update(shared, {}, client, torch_gen(0, "client", 0, client.cid), 0).upload


# changed and keys_with: the FedPFT family's state-dict checks.
def changed(a, b):
    return not torch.equal(a, b)


def keys_with(d, prefix):
    return [k for k in d if k.startswith(prefix)]


def setup(cfg):
    """``(method, clients, initial SimState)`` for a config, on the CPU, without running anything."""
    ds, part = prepare_data(cfg)
    clients = build_clients(ds, part, torch.device("cpu"))
    method = make_method(cfg, ds, torch.device("cpu"))
    return method, clients, init_state(method, len(clients), cfg.seed)


class Interrupt(Exception):
    """Raised from a round callback to simulate a run killed mid-way."""


def interrupt_at(cfg, rnd: int) -> None:
    """Start ``cfg`` and stop it once ``rnd`` rounds are done, leaving a resumable run folder."""
    import pytest

    import fedrepro

    def stop(state):
        if state.next_round == rnd:
            raise Interrupt

    with pytest.raises(Interrupt):
        fedrepro.run(cfg, on_round_end=stop)


def perturbed(sd, scale, seed):
    """``sd`` with seeded Gaussian noise of std ``scale`` on its float entries (a model moved away
    from another: a teacher, a personal model, a peer)."""
    g = torch.Generator().manual_seed(seed)
    return {k: (v + scale * torch.randn(v.shape, generator=g)) if v.is_floating_point() else v.clone()
            for k, v in sd.items()}


# Checks that several methods share; each method's test file calls them for its own method.

def check_fedavg_server(cfg):
    """Only the model is uploaded, the server takes the sample-weighted average, and that average is
    the global model."""
    method, clients, st = setup(cfg)
    ups = [update(method, st, c) for c in clients[:2]]
    assert all(set(u.upload) == set(st.shared) for u in ups)
    new, _ = method.aggregate(st.shared, ups, st.server_state, 0)
    w = [u.num_samples for u in ups]
    for k in new:
        manual = (w[0] * ups[0].upload[k] + w[1] * ups[1].upload[k]) / sum(w)
        assert torch.allclose(new[k], manual, atol=1e-6), k
    g = method.global_model(new, st.server_state)
    assert g is not None and all(torch.equal(g.state_dict()[k], new[k]) for k in new)


def check_personal_layers_stay(cfg, keys_of):
    """The layers ``keys_of(model)`` names stay in the client's state: never uploaded or shared."""
    method, clients, st = setup(cfg)
    personal = keys_of(method.model)
    assert personal, "the model must have layers of this kind"
    upd = method.client_update(st.shared, st.client_states[0], clients[0], torch_gen(0, "client", 0, 0), 0)
    assert not personal & set(upd.upload) and not personal & set(st.shared)
    assert personal <= set(upd.state)
    new, _ = method.aggregate(st.shared, [upd], st.server_state, 0)
    assert set(new) == set(st.shared)


def check_batchnorm_buffers(cfg):
    """Buffers (BN running statistics, the integer step counter) are averaged like FedAvg's."""
    method, clients, st = setup(cfg)
    ups = [update(method, st, c) for c in clients]
    new, _ = method.aggregate(st.shared, ups, st.server_state, 0)
    buffers = [k for k, _ in method.model.named_buffers()]
    assert buffers and all(k in new and new[k].dtype == st.shared[k].dtype for k in buffers)
    assert method.evaluate(new, ups[0].state, clients[0], None).total == clients[0].num_test


def check_resume_matches(cfg, tmp_path):
    """A run stopped after round 2 and resumed gives the uninterrupted run's metrics, bit for bit."""
    full = fedrepro.run(cfg.replace(runs_dir=str(tmp_path / "full")))
    cut = cfg.replace(runs_dir=str(tmp_path / "cut"))
    interrupt_at(cut, 2)
    resumed = fedrepro.run(cut)
    assert full.clients["acc"].tolist() == resumed.clients["acc"].tolist()
    assert full.rounds["train_loss"].tolist() == resumed.rounds["train_loss"].tolist()


def claim_table(local, fedavg, alpha):
    """A run_grid-like table of Local and FedAvg at one α, one row per (method, seed); the i-th
    entries of ``local`` and ``fedavg`` are seed i's best and final accuracy."""
    rows = []
    for seed, (loc, f) in enumerate(zip(local, fedavg)):
        rows += [{"method.name": "local", "data.partition_args.alpha": alpha, "seed": seed, "best": loc, "final": loc},
                 {"method.name": "fedavg", "data.partition_args.alpha": alpha, "seed": seed, "best": f, "final": f}]
    return pd.DataFrame(rows)


def domain_data(n_dom: int = 3, per: int = 400, c: int = 5):
    """Labels and domain ids (train, test) of ``n_dom`` shuffled domains with ``c`` classes."""
    g = np.random.default_rng(7)
    d_tr, d_te = np.repeat(np.arange(n_dom), per), np.repeat(np.arange(n_dom), per // 4)
    g.shuffle(d_tr)
    g.shuffle(d_te)
    return g.integers(0, c, d_tr.size), g.integers(0, c, d_te.size), d_tr, d_te


def poison_fedavg(monkeypatch, rnd: int = 1):
    """Make FedAvg's aggregation after round ``rnd`` (0-based) put NaN in one shared tensor, so the
    run diverges in round ``rnd + 1``; the method, not torch, is patched. Returns a function that
    puts the real aggregation back."""
    from fedrepro.methods.fedavg import FedAvg

    aggregate = FedAvg.aggregate

    def poisoned(self, shared, updates, server_state, r):
        shared, server_state = aggregate(self, shared, updates, server_state, r)
        if r == rnd:
            k = next(k for k, v in shared.items() if v.is_floating_point())
            shared = {**shared, k: shared[k] * float("nan")}
        return shared, server_state

    monkeypatch.setattr(FedAvg, "aggregate", poisoned)
    return lambda: monkeypatch.setattr(FedAvg, "aggregate", aggregate)
