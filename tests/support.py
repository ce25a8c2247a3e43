"""Helpers shared by the tests in every folder of tests/ (importable as ``support``: pyproject's
``[tool.pytest.ini_options] pythonpath`` puts tests/ on sys.path)."""
from __future__ import annotations

import torch

import fedrepro
from fedrepro.experiment import build_clients, make_method, prepare_data
from fedrepro.fl.engine import init_state
from fedrepro.fl.seeding import torch_gen


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
