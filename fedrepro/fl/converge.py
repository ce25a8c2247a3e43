"""Rounds by convergence: train until the curve is flat (:mod:`fedrepro.fl.flatness`), up to a maximum.

:func:`simulate_until_flat` drives :func:`fedrepro.fl.engine.simulate` one evaluated round at a time
and checks the flatness rule on the evaluated rounds after each. The engine's loop itself is not
changed: a run trains its rounds as ``simulate`` would, and stopping only ends it sooner. Because a
resumed ``simulate`` reproduces the uninterrupted run bit for bit (every random draw is derived from
the seed, the round and the client), a run that stops at round ``s`` holds exactly the first ``s``
rounds of the same config trained without the rule.

What the stopped run reports: its **final** round is its last evaluated round (the round the rule
was met at), its **best** round the best evaluated round up to it; ``rounds`` in its summary is that
round, not ``train.rounds`` (the maximum).
"""
from __future__ import annotations

from typing import Any, Sequence

from .client_data import ClientData
from .engine import SimState, simulate
from .flatness import evaluated_acc, stops_at
from .method import Method


def next_stop(done: int, rounds: int, eval_every: int) -> int:
    """The round after ``done`` at which the curve is next evaluated: the next multiple of
    ``eval_every``, or the last round."""
    return min(rounds, (done // eval_every + 1) * eval_every)


def simulate_until_flat(method: Method, clients: Sequence[ClientData], *, seed: int, rounds: int,
                        window: int, eval_every: int = 1, state: SimState | None = None, first: int = 0,
                        **kwargs: Any) -> SimState:
    """:func:`~fedrepro.fl.engine.simulate` up to ``rounds``, stopping after the first evaluated round,
    from round ``first`` on, at which the evaluated accuracies meet the flatness rule over ``window``
    rounds (the window counts evaluated rounds, as the analyses do). A resumed ``state`` that already
    meets it there is returned as it is. ``kwargs`` go to ``simulate`` (a checkpoint is also written at
    every evaluated round, where the engine ends each call)."""
    while state is None or (state.next_round < rounds
                            and not stops_at(state.next_round, evaluated_acc(state.round_rows), window, first)):
        done = 0 if state is None else state.next_round
        state = simulate(method, clients, seed=seed, rounds=next_stop(done, rounds, eval_every),
                         eval_every=eval_every, state=state, **kwargs)
    return state
