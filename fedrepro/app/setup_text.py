"""Sizes in a notebook's prose, read from the config it runs: a number typed into Markdown is right
at one profile and wrong at the others (a tour that says "twenty clients" while smoke runs four)."""
from __future__ import annotations

from typing import Sequence

from ..config import RunConfig


def _n(count: int, noun: str) -> str:
    return f"{count:,} {noun}" + ("" if count == 1 else "s")


def _rounds(t) -> str:
    """The rounds a run trains: fixed, or until flat (``train.stop_when_flat``) from ``flat_from`` on,
    where ``rounds`` is only the maximum."""
    if not t.stop_when_flat:
        return f"**{_n(t.rounds, 'round')}**"
    start = f"**{_n(t.flat_from, 'round')}**, then on until flat" if t.flat_from else "rounds until flat"
    return f"{start} (at most {t.rounds:,})"


def setup_markdown(cfg: RunConfig, seeds: Sequence[int] | None = None, swept: Sequence[str] = ()) -> str:
    """One Markdown sentence of what ``cfg`` trains: its profile, clients, images per client,
    dataset, partition, rounds, local epochs, participation and, given ``seeds``, the seeds.
    ``swept``: partition arguments the notebook varies (left out: ``cfg`` holds only one value)."""
    d, t = cfg.data, cfg.train
    args = dict(d.partition_args)
    per_client = ""
    if "train_per_client" in args and "test_per_client" in args:
        per_client = (f", each with {args.pop('train_per_client'):,} training and {args.pop('test_per_client'):,} "
                      f"test images")
    other = ", ".join(f"{k}={v}" for k, v in args.items() if k not in swept)
    taking_part = "" if t.participation >= 1 else f" ({100 * t.participation:.0f}% of the clients each round)"
    parts = [f"At the **{cfg.profile}** profile: **{_n(d.num_clients, 'client')}** of `{d.dataset}`{per_client} "
             f"(partition `{d.partition}`{': ' + other if other else ''}), model `{cfg.model.name}`; "
             f"{_rounds(t)} of {_n(t.local_epochs, 'local epoch')}{taking_part}"]
    if seeds is not None:
        parts.append(f"; **{_n(len(seeds), 'seed')}** ({', '.join(str(s) for s in seeds)})")
    return "".join(parts) + "."
