"""Local CoOp at two budgets (fedrepro.methods.coop, issue 55 finding 2): ours trains the private prompt
every round the client is sampled; the official code's trains it once, for ``session_epochs`` epochs
in one session, and never again."""
from __future__ import annotations

import math

import torch
from support import setup, update

import fedrepro
from .test_clip_prompt_methods import cfg

from fedrepro.methods.coop import TRAINED


def test_the_official_budget_trains_one_session_of_its_epochs_then_keeps_the_prompt(tiny):
    m, clients, st = setup(cfg(tiny, "coop", {"session_epochs": 3}))
    c = clients[0]
    first = update(m, st, c)
    assert TRAINED in first.state and first.upload == {} and "train_loss" in first.metrics
    # One session of 3 epochs: one pass of the client's few shots per epoch, in one optimiser.
    n = c.num_train
    ctx, stats, _ = m.train_ctx(m.assemble(st.shared, st.client_states[c.cid]), m.features(c, "train"),
                                m.batch_generator(torch.Generator().manual_seed(0)), st.shared, epochs=3)
    assert stats.samples == 3 * n
    # Sampled again: nothing trains, the prompt and the flag stay.
    again = update(m, st, c, rnd=1, state=first.state)
    assert torch.equal(again.state["ctx"], first.state["ctx"]) and again.metrics == {}
    # Ours trains every round.
    ours, clients, st = setup(cfg(tiny, "coop"))
    one = update(ours, st, clients[0])
    two = update(ours, st, clients[0], rnd=1, state=one.state)
    assert TRAINED not in one.state and not torch.equal(one.state["ctx"], two.state["ctx"])


def test_a_one_session_run_trains_its_epochs_once_whatever_the_rounds(tiny):
    short = fedrepro.run(cfg(tiny, "coop", {"session_epochs": 2}, **{"train.rounds": 1}))
    long = fedrepro.run(cfg(tiny, "coop", {"session_epochs": 2}, **{"train.rounds": 3}))
    # The same prompt after 1 round or 3: the later rounds train nothing.
    assert short.summary["final_acc_mean"] == long.summary["final_acc_mean"]
    rounds = long.rounds
    assert rounds["train_loss"].iloc[1:].isna().all() and not math.isnan(rounds["train_loss"].iloc[0])
    assert cfg(tiny, "coop").hash() != cfg(tiny, "coop", {"session_epochs": 10}).hash()
