"""How a profile's setup stands against the paper profile's, for the results pages.

Everything in :func:`setup_rows` is read off the configs that the paper's notebooks train
(:func:`fedrepro.papers.setup`), so the page cannot drift from the code. What a paper package
cannot express as a config difference (a reading of an ambiguous passage, an item not done yet)
it lists in ``LEFT_OPEN``: :class:`Open` entries, each with the reason it stays open.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..config import RunConfig, default_seeds
from . import table_seeds
from . import setup
from . import paper as package
from .paper_lines import mismatches


@dataclass(frozen=True)
class Open:
    """An item of a paper's setup or tables that a profile does not match, and why.

    ``profiles`` names the profiles it concerns (the results page of another profile leaves it
    out)."""
    item: str
    reason: str
    profiles: tuple[str, ...] = ("laptop", "paper")


def _args(args: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(args.items())) if args else ""


def _with_args(name: str, args: dict) -> str:
    return f"{name} ({_args(args)})" if args else name


def _seeds(profile: str) -> str:
    return f"{len(default_seeds(profile))} (claim rows) / {len(table_seeds(profile))} (other rows)"


# Each row of the comparison: its label and how to read it off a config (None: from the profile).
FIELDS: dict[str, Callable[[RunConfig], str]] = {
    "dataset": lambda c: c.data.dataset,
    "clients": lambda c: str(c.data.num_clients),
    "partition": lambda c: _with_args(c.data.partition, c.data.partition_args),
    "images drawn (train / test)": lambda c: f"{c.data.max_train or 'all'} / {c.data.max_test or 'all'}",
    "model": lambda c: _with_args(c.model.name, c.model.args),
    "rounds": lambda c: str(c.train.rounds),
    "clients per round": lambda c: f"{c.train.participation:.0%}",
    "local epochs": lambda c: str(c.train.local_epochs),
    "batch size": lambda c: str(c.train.batch_size),
    "learning rate (setup's)": lambda c: f"{c.train.lr:g}",
    "training augmentation": lambda c: c.train.augment,
}


def setup_rows(paper: str, profile: str) -> list[tuple[str, str, str]]:
    """``(setting, paper profile, profile)`` for the paper's default setup, one row per
    :data:`FIELDS` entry and one for the seeds, in that order."""
    mine, theirs = setup(paper, profile), setup(paper, "paper")
    rows = [(label, read(theirs), read(mine)) for label, read in FIELDS.items()]
    return rows + [("seeds", _seeds("paper"), _seeds(profile))]


def line_opens(paper: str, rows: list[dict] | None = None) -> list[Open]:
    """Each line of the paper's line-by-line table (:mod:`fedrepro.papers.paper_lines`) that the paper
    profile does not match, as an :class:`Open` of every profile: the smaller profiles start from the
    paper profile's setup, so what it misses they miss too. ``rows``: the table, where already built."""
    return [Open(f"{r['setting']}: {r['item']}",
                 f"The paper: {r['paper']} ({r['source']}). The paper profile: {r['ours']}. (From the line-by-line "
                 f"table, fedrepro/papers/{paper}/paper_lines.py.)", ("smoke", "laptop", "paper"))
            for r in mismatches(paper, rows)]


def left_open(paper: str, profile: str, rows: list[dict] | None = None) -> list[Open]:
    """What ``profile`` leaves open of the paper: the paper package's ``LEFT_OPEN`` entries that
    concern it, then the mismatches of its line-by-line table (:func:`line_opens`; ``rows``: that
    table, where already built)."""
    typed = [o for o in getattr(package(paper), "LEFT_OPEN", ()) if profile in o.profiles]
    return typed + [o for o in line_opens(paper, rows) if profile in o.profiles]
