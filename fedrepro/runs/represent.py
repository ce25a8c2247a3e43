"""A rehearsal's representative runs (issue 57): rehearsal configs that run the same code on
state of the same shapes train once, and the others are stored as copies of that run.

A rehearsal checks that every notebook runs at the papers' shapes; its numbers mean nothing
(:mod:`fedrepro.app.rehearsal`). Two of its configs that differ only in a seed, a learning rate or
a Dirichlet α train the same code on tensors of the same shapes, so one of them is enough: it is
trained (the **representative**), and each of the others (its **stand-ins**) is written as a run
folder of its own, copied from it.

**The path key** (:func:`path_key`): a config's hashed fields without what cannot change which code
runs or the shapes of what its run stores:

- ``seed`` and ``data.partition_seed``: they draw numbers, not code paths or shapes;
- the ``rehearsal`` record: the paper's schedule the run stands for, read only by the cost table;
- the value of every float-valued field (learning rates, momentum, α, γ, τ...), kept only as zero
  or not zero (a zero weight often switches a term off: ``data.validation``, ``momentum``), EXCEPT
  ``train.participation``: it decides how many clients a round samples, so which client states a
  round's server holds (pFedCSPC's ``08_gradcam`` reads client 0 from it).

Integers, booleans, strings and ``None`` are kept (every field and method argument, defaults
filled in): they can change a parameter's shape (``n_prompts``, ``n_repeat``, a width) or the path
taken (``align``, ``ot``, the partition, ``holdout_clients``, ``num_clients``, a rate left ``None``).
Real (non-rehearsal) configs are never represented.

**A copy** (:func:`copy_run`) is a finished run folder of the stand-in's own config: its
``config.json`` and hash are its own, and so are its seed and its data in ``meta.json`` and
``summary.json`` (the partition hash, client count, held-out clients: the stand-in's partition is
drawn, so that analyses that rebuild it, :func:`fedrepro.runs.train.restore`, find their own); its
rounds, clients and final state are the representative's, and ``meta.json`` records
``rehearsal_represented_by``. It is built with the store's own ``finish`` in a scratch folder and
published through :class:`~fedrepro.runs.store.RunReceiver` (checked in full, then one rename), so it
verifies deep and a crash leaves no folder. A stand-in whose drawn data differs from the
representative's in what its state is indexed by (client count, held-out clients, classes) is
trained instead (:func:`fedrepro.runs.train.train_or_load`).

**The index**: when a rehearsal run finishes training, ``<runs_dir>/.rehearsal/<key digest>``
names it (written atomically, if no usable run is named there yet), so that any later rehearsal
run of the same key, from ``fedrepro reproduce``'s pool or from a notebook's ``fedrepro.run``, is a
copy. ``fedrepro reproduce`` schedules for it (:func:`representatives`): in each key's group of
runs to train, the run the index names, else the first by hash, trains, and the others start after
it.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import shutil
import tempfile
from pathlib import Path
from typing import Callable, Mapping

from ..config import RunConfig, normalised_dict
from ..env.atomic import atomic_write_bytes
from ..env.jsonfiles import RefusedFile, loads, read_plain_file
from ..errors import CorruptCacheError, FedreproError
from .store import FINISHED_FILES, RunReceiver, RunResult, RunStore, atomic_write_json, read_files, real_folder

log = logging.getLogger("fedrepro")

# meta.json of a copied run: the hash of the run it was copied from.
REPRESENTED_BY = "rehearsal_represented_by"
# The folder of the index under the runs folder (a dot name: never listed as a run).
INDEX = ".rehearsal"
# The float fields kept whole in the path key (module doc).
KEPT_FLOATS = frozenset({("train", "participation")})
# What a run's state is indexed by, which a copy's own data must share with its representative's
# (meta.json's names): else the copy would hold states for clients or classes it does not have.
INDEXED_BY = ("num_clients", "held_out", "num_classes", "dataset")


def _coarse(value, where: tuple = ()):
    if isinstance(value, dict):
        return {k: _coarse(v, (*where, k)) for k, v in value.items()}
    if isinstance(value, list):
        return [_coarse(v, where) for v in value]
    if type(value) is float and where not in KEPT_FLOATS:
        return "float" if value else 0.0
    return value


def path_key(cfg: RunConfig) -> str:
    """The path key of ``cfg`` (module doc), as canonical JSON: every field in its declared type, the
    method's arguments with their defaults (a rate set to its default or left out is one path)."""
    from ..methods import METHODS  # defers torch: importing the package registers every method

    d = cfg.to_dict()
    defaults = {f.name: f.default for f in dataclasses.fields(METHODS.get(cfg.method.name).Params)
                if f.default is not dataclasses.MISSING}
    d["method"]["args"] = {**defaults, **d["method"]["args"]}
    d = normalised_dict(d)
    for key in ("device", "runs_dir", "progress", "seed", "rehearsal"):  # the first three: never hashed either
        d.pop(key)
    d["data"].pop("partition_seed")
    return json.dumps(_coarse(d), sort_keys=True, separators=(",", ":"), default=str)


def key_digest(cfg: RunConfig) -> str:
    return hashlib.sha256(path_key(cfg).encode()).hexdigest()[:16]


def index_file(store: RunStore, cfg: RunConfig) -> Path:
    return store.root / INDEX / key_digest(cfg)


def represented_by(path: Path) -> str | None:
    """The representative a stored run folder was copied from (its ``meta.json``), None for a run
    trained itself, or one whose meta cannot be read."""
    try:
        meta = loads(read_plain_file(Path(path) / "meta.json", 64 << 20))
    except (OSError, RefusedFile, ValueError):
        return None
    return meta.get(REPRESENTED_BY) if isinstance(meta, dict) else None


def representative(store: RunStore, cfg: RunConfig, stale: Callable[[RunConfig], bool]) -> RunResult | None:
    """The finished run the index names for ``cfg``'s path key, when it is usable: ``cfg`` is a
    rehearsal, the run is finished, trained itself (not a copy), not ``cfg``'s own, of the same path
    key, and not ``stale``; else None."""
    if not cfg.rehearsal:
        return None
    f = index_file(store, cfg)
    try:
        real_folder(f.parent, "folder of rehearsal representatives")
        name = loads(read_plain_file(f, 4096)).get("run")
    except (OSError, RefusedFile, ValueError, AttributeError, CorruptCacheError):
        return None
    if not isinstance(name, str) or not name.isalnum() or name == cfg.hash():
        return None
    res = RunResult(store.root / name)
    try:
        rep = res.config
        usable = store.status(rep) == "done" and res.cheap_check() is None and path_key(rep) == path_key(cfg) \
            and REPRESENTED_BY not in res.meta and not stale(rep)
    except FedreproError:  # damaged or missing: no representative, the run trains
        return None
    return res if usable else None


def record(store: RunStore, cfg: RunConfig, stale: Callable[[RunConfig], bool]) -> None:
    """Name ``cfg``'s finished run in the index of its path key, unless a usable run is named there
    already (the first to finish stays the representative). Only a rehearsal run trained itself."""
    if not cfg.rehearsal or represented_by(store.path(cfg)) is not None or representative(store, cfg, stale):
        return
    f = index_file(store, cfg)
    real_folder(f.parent, "folder of rehearsal representatives")
    f.parent.mkdir(exist_ok=True)
    atomic_write_bytes(f, json.dumps({"run": cfg.hash()}).encode())


def representatives(pending: Mapping[str, RunConfig], stale: Callable[[RunConfig], bool]) -> dict[str, list[str]]:
    """The copies a rehearsal pass makes of its runs to train (``pending``, by hash):
    ``{representative hash: [hashes of its stand-ins]}``, for every path key shared by two or more of
    them, or by one of them and a stored run the index names (that representative is not pending).
    Otherwise the first of a group by hash is its representative, which the others wait for."""
    groups: dict[str, list[str]] = {}
    for h in sorted(pending):
        if pending[h].rehearsal:
            groups.setdefault(path_key(pending[h]), []).append(h)
    out = {}
    for hashes in groups.values():
        cfg = pending[hashes[0]]
        stored = representative(RunStore(cfg.runs_dir), cfg, stale)
        rep = stored.path.name if stored is not None and stored.path.name not in pending else hashes[0]
        others = [h for h in hashes if h != rep]
        if others:
            out[rep] = others
    return out


def copy_run(store: RunStore, cfg: RunConfig, rep: RunResult, own: Mapping) -> RunResult:
    """Store ``cfg``'s run as a copy of the representative ``rep`` (module doc); ``own``: what
    ``meta.json`` says of ``cfg``'s own data (``seed``, ``partition_hash`` and :data:`INDEXED_BY`).
    The caller holds ``cfg``'s lock (:meth:`RunStore.claim`)."""
    h = cfg.hash()
    # Named as the store's temporary folders are (.<hash>.*.tmp): a crash leaves what the next launch removes.
    scratch = Path(tempfile.mkdtemp(dir=store.root, prefix=f".{h}.copy-", suffix=".tmp"))
    try:
        atomic_write_json(scratch / "config.json", {"hash": h, "config": cfg.to_dict()})
        atomic_write_json(scratch / "meta.json", {**rep.meta, **own, REPRESENTED_BY: rep.path.name})
        summary = {**rep.summary, "config_hash": h, "seed": own["seed"], "partition_hash": own["partition_hash"]}
        store.finish(scratch, rep.checked_rows("rounds.jsonl"), rep.checked_rows("clients.jsonl"), summary,
                     rep.final_state())
        files = read_files(scratch, FINISHED_FILES)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    log.info("fedrepro: rehearsal run %s copied from its representative %s (same path key)", h, rep.path.name)
    return RunReceiver(store).finished(cfg, files)
