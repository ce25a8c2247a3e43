"""One package per paper: its setups and variants, table definitions, baselines, reference numbers
and claims.

``fedrepro.papers.fedpft``, ``fedrepro.papers.pfedcspc`` and ``fedrepro.papers.pep_fedpt`` hold
everything a paper's notebooks need; ``fedrepro.papers.tour`` holds the tour notebook's claims. Methods live in
:mod:`fedrepro.methods` and analyses any method can use in :mod:`fedrepro.analysis`.

A paper package exposes:

- ``TITLE``: the paper, as a user would cite it;
- ``VARIANTS`` and ``layers(profile, variant)``: the config override layers of its setups, which
  :func:`setup` turns into a :class:`~fedrepro.config.RunConfig`; ``setup.py`` declares them as
  tables, ``BASE`` (per profile) and ``CHANGES`` (per variant and profile), read by
  :mod:`fedrepro.papers.setup_data`;
- ``TABLES``: its :class:`~fedrepro.papers.tables.TableDef` entries (rows, columns, the runs that fill
  them, the paper's numbers to show beside ours);
- ``reference.TABLES``: the paper's reported numbers;
- ``claims``: its claims, registered on import;
- ``LEFT_OPEN`` (optional): what its profiles do not match of the paper, and why, for the results
  pages (:mod:`fedrepro.papers.differences`).
"""
from __future__ import annotations

import importlib
from types import ModuleType

from pathlib import Path

from ..config import RunConfig, default_seeds, make_config, rehearsing
from ..env.jsonfiles import read_json_file
from ..env.settings import output_path
from ..errors import ConfigError, CorruptCacheError

PAPERS = ("tour", "fedpft", "pfedcspc", "pep_fedpt", "fedotp")


def paper(name: str) -> ModuleType:
    """The package of paper ``name``: ``paper("fedpft").TABLES`` ..."""
    if name not in PAPERS:
        raise ConfigError(f"unknown paper {name!r}; valid papers: {', '.join(PAPERS)}")
    return importlib.import_module(f"{__name__}.{name}")


def _with_setup(name: str) -> ModuleType:
    mod = paper(name)
    if not hasattr(mod, "layers"):
        valid = [p for p in PAPERS if hasattr(paper(p), "layers")]
        raise ConfigError(f"paper {name!r} has no setups; papers with setups: {', '.join(valid)}")
    return mod


def setup(name: str, profile: str, variant: str = "default", **overrides) -> RunConfig:
    """The base config of paper ``name``'s experiments at ``profile``, with keyword overrides
    (``a__b=v``).

    ``variant`` picks one of the paper's other experimental setups (e.g. FedPFT's ``"pathological"``
    or ``"feature_shift"``); :func:`variants` lists them.
    """
    base, *layers = _with_setup(name).layers(profile, variant)
    cfg = make_config(profile, overrides=base, progress=False)
    # Each layer goes through the config's own merge, which also resets the arguments of a
    # dataset/partition/model whose name the layer changes.
    for layer in [*layers, {k.replace("__", "."): v for k, v in overrides.items()}]:
        cfg = cfg.replace(**layer) if layer else cfg
    return cfg


def variants(name: str) -> tuple[str, ...]:
    return tuple(_with_setup(name).VARIANTS)


def table_seeds(profile: str) -> list[int]:
    """Seeds for the rows of a table that no claim rests on: 1 at smoke and laptop (to fit the time
    budget) and at the paper profile's rehearsal, the paper's 3 at the paper profile. Claims use
    :func:`fedrepro.default_seeds`."""
    return [0, 1, 2] if profile == "paper" and not rehearsing() else [0]


def seed_stages_file(profile: str, root=None) -> Path:
    """Where ``fedrepro reproduce`` records how many claim seeds each table's claim rows run at
    ``profile`` once a sequential claim asked for more (``output/<profile>/claims/stages/seeds.json``,
    beside the notebooks' claim records)."""
    return output_path("claims", profile, root) / "stages" / "seeds.json"


def seed_stages(profile: str, root=None) -> dict[str, int]:
    """The recorded seed counts by table (``"<paper>/<table>"``); empty before any stage. A damaged
    file (binary, torn, not an object of positive counts) is a one-line error naming it."""
    path = seed_stages_file(profile, root)
    if not path.is_file():
        return {}
    fix = "delete it; the next `fedrepro reproduce` records the stages again"
    stages = read_json_file(path, "seed stages file", fix)
    if not isinstance(stages, dict) or not all(type(v) is int and v > 0 for v in stages.values()):
        raise CorruptCacheError(f"seed stages file {path} is damaged: not an object of positive seed counts; {fix}")
    return {str(k): v for k, v in stages.items()}


def record_seed_stage(profile: str, table: str, n_seeds: int, root=None) -> None:
    """Record that ``table``'s claim rows run over ``n_seeds`` claim seeds at ``profile`` (never fewer
    than recorded: a stage once trained stays, so every claim on the table keeps its looks)."""
    from ..runs.store import atomic_write_json

    stages = seed_stages(profile, root)
    if n_seeds > stages.get(table, 0):
        stages[table] = int(n_seeds)
        path = seed_stages_file(profile, root)
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_json(path, dict(sorted(stages.items())))


def archived_stages(profile: str) -> dict[str, int]:
    """The seed stages of the reference archive's pass at ``profile`` (:meth:`fedrepro.runs.archive.
    Archive.stages`) while runs are read from it (``FEDREPRO_ARCHIVE=read``, the default outside
    ``fedrepro reproduce``); empty otherwise."""
    from ..runs import archive  # defers pandas (the store's tables): papers is imported by the CLI

    if archive.policy() != "read":
        return {}
    return archive.Archive(archive.archive_folder(profile)).stages()


def claim_seeds(profile: str, table: str | None = None, root=None) -> list[int]:
    """The seeds of ``table``'s rows that claims read: the profile's claim seeds
    (:func:`fedrepro.default_seeds`), continued to the count a sequential claim's stage recorded
    (:func:`record_seed_stage`), or to the count the reference archive's pass reached when runs are
    read from it (:func:`archived_stages`), so that a notebook opened on the archive gives its page's
    verdicts on the same seeds."""
    seeds = list(default_seeds(profile))
    n = max(seed_stages(profile, root).get(table, 0), archived_stages(profile).get(table, 0)) if table else 0
    return seeds + [max(seeds) + 1 + i for i in range(n - len(seeds))]


def load_all() -> None:
    """Import every paper package (registers their claims)."""
    for name in PAPERS:
        paper(name)


__all__ = ["PAPERS", "archived_stages", "claim_seeds", "load_all", "paper", "record_seed_stage", "seed_stages", "setup",
           "table_seeds", "variants"]
