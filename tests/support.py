"""Helpers shared by the method tests (importable because pytest puts tests/ on sys.path)."""
from __future__ import annotations

import torch

from fedrepro.experiment import build_clients, make_method, prepare_data
from fedrepro.fl.engine import init_state
from fedrepro.fl.seeding import torch_gen

# A tiny CNN with BatchNorm, so FedBN and the BN-aware methods have something to keep local.
BN_CNN = {"model.name": "cnn", "model.args": {"width": 4, "feature_dim": 16, "norm": "bn"}}


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
