"""Deterministic, inspectable client partitions of a dataset's train and test splits.

Why this module exists: public FL code bases have Dirichlet loops that never terminate
(PFLlib #130, FL-bench #29, FedLab #232), unseeded ``random`` calls that make splits
irreproducible (NIID-Bench #7), and test sets merged into training (PFLlib #16, #35). Here

* every random draw comes from one explicit :class:`numpy.random.Generator`;
* retries are bounded and failures raise :class:`~fedrepro.errors.PartitionError` saying which
  constraint failed and what to change;
* train indices only ever index the dataset's TRAIN split and test indices its TEST split;
* a :class:`Partition` has a content hash and can be saved to / loaded from an ``.npz`` file.

Schemes (``PARTITIONERS`` registry, call through :func:`make_partition`):

``iid``, ``dirichlet``, ``pathological``, ``fixed_dirichlet``, ``domain``, ``domain_dirichlet``,
``by_user``.
"""
from __future__ import annotations

import hashlib
import inspect
import json
import math
import os
import tempfile
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from ..errors import ConfigError, CorruptCacheError, PartitionError
from ..params import check_value
from ..registry import Registry

__all__ = [
    "Partition",
    "PARTITIONERS",
    "make_partition",
    "list_partitions",
]

_HASH_VERSION = b"fedrepro-partition-v1"
# Arguments make_partition supplies itself; everything else in a partitioner's signature is a
# user-facing scheme parameter.
_STANDARD_ARGS = ("train_labels", "test_labels", "num_clients", "rng",
                  "train_domains", "test_domains", "num_classes", "train_users")


# --------------------------------------------------------------------------------------------
# Partition container
# --------------------------------------------------------------------------------------------
def _as_index_array(a: Any) -> np.ndarray:
    arr = np.array(a, dtype=np.int64).reshape(-1)
    arr.flags.writeable = False  # partitions are shared across clients/runs; never mutate
    return arr


@dataclass(frozen=True, eq=False)
class Partition:
    """Per-client index arrays into a dataset's train and test splits.

    ``held_out`` clients never train (PEP-FedPT (arXiv) §5.1.3, Tables 3 and 13): they
    keep train data (for priors, prototypes or fine-tuning) and test data for evaluation.
    """

    train: tuple[np.ndarray, ...]
    test: tuple[np.ndarray, ...]
    num_classes: int
    held_out: tuple[int, ...] = ()
    meta: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        train = tuple(np.sort(_as_index_array(t)) for t in self.train)
        test = tuple(np.sort(_as_index_array(t)) for t in self.test)
        for arrs in (train, test):
            for a in arrs:
                a.flags.writeable = False
        if len(train) != len(test):
            raise PartitionError(
                f"train has {len(train)} clients but test has {len(test)}; they must match"
            )
        if len(train) < 1:
            raise PartitionError("num_clients must be >= 1")
        held = tuple(sorted(int(h) for h in self.held_out))
        if len(set(held)) != len(held) or any(not 0 <= h < len(train) for h in held):
            raise PartitionError(
                f"held_out={held} must be distinct client ids in [0, {len(train)})"
            )
        object.__setattr__(self, "train", train)
        object.__setattr__(self, "test", test)
        object.__setattr__(self, "held_out", held)
        object.__setattr__(self, "num_classes", int(self.num_classes))

    @property
    def num_clients(self) -> int:
        return len(self.train)

    @property
    def participating(self) -> tuple[int, ...]:
        """Client ids that take part in training (all but the held-out ones)."""
        held = set(self.held_out)
        return tuple(k for k in range(self.num_clients) if k not in held)

    def hash(self) -> str:
        """First 16 hex chars of a sha256 over the index arrays, ``num_classes`` and ``held_out``.

        Arrays are hashed as little-endian int64 with length prefixes, so the value is the same
        on every platform and does not depend on ``meta``.
        """
        h = hashlib.sha256(_HASH_VERSION)
        header = np.array([self.num_classes, self.num_clients, len(self.held_out),
                           *self.held_out], dtype="<i8")
        h.update(header.tobytes())
        for arrs in (self.train, self.test):
            for a in arrs:
                h.update(np.array([a.size], dtype="<i8").tobytes())
                h.update(a.astype("<i8", copy=False).tobytes())
        return h.hexdigest()[:16]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Partition):
            return NotImplemented
        return (
            self.num_classes == other.num_classes
            and self.held_out == other.held_out
            and self.num_clients == other.num_clients
            and all(np.array_equal(a, b) for a, b in zip(self.train, other.train))
            and all(np.array_equal(a, b) for a, b in zip(self.test, other.test))
        )

    def __hash__(self) -> int:
        return hash(self.hash())

    def __repr__(self) -> str:
        sizes = [a.size for a in self.train]
        return (
            f"Partition(scheme={self.meta.get('scheme')!r}, num_clients={self.num_clients}, "
            f"num_classes={self.num_classes}, n_train={sum(sizes)}, "
            f"n_test={sum(a.size for a in self.test)}, held_out={self.held_out}, "
            f"hash={self.hash()})"
        )

    def counts(
        self, train_labels: Any, test_labels: Any | None = None
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """Per-client class histograms, shape ``[num_clients, num_classes]``."""
        train_c = _client_class_counts(self.train, np.asarray(train_labels), self.num_classes)
        test_c = None
        if test_labels is not None:
            test_c = _client_class_counts(self.test, np.asarray(test_labels), self.num_classes)
        return train_c, test_c

    def to_npz(self, path: str | os.PathLike) -> Path:
        """Save the index files atomically (temp file + ``os.replace``) and return the path.

        The content hash is stored alongside and re-checked by :meth:`from_npz`.
        """
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        arrays: dict[str, np.ndarray] = {}
        for k, (tr, te) in enumerate(zip(self.train, self.test)):
            arrays[f"train_{k}"] = tr
            arrays[f"test_{k}"] = te
        arrays["num_classes"] = np.array(self.num_classes, dtype=np.int64)
        arrays["num_clients"] = np.array(self.num_clients, dtype=np.int64)
        arrays["held_out"] = np.array(self.held_out, dtype=np.int64)
        arrays["meta_json"] = np.array(json.dumps(_jsonable(self.meta), sort_keys=True))
        arrays["hash"] = np.array(self.hash())
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                np.savez(f, **arrays)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return path

    @classmethod
    def from_npz(cls, path: str | os.PathLike) -> "Partition":
        """Load a partition saved by :meth:`to_npz`; a damaged file raises CorruptCacheError."""
        path = Path(path)
        try:
            with np.load(path, allow_pickle=False) as z:
                n = int(z["num_clients"])
                part = cls(
                    train=tuple(z[f"train_{k}"] for k in range(n)),
                    test=tuple(z[f"test_{k}"] for k in range(n)),
                    num_classes=int(z["num_classes"]),
                    held_out=tuple(int(h) for h in z["held_out"]),
                    meta=json.loads(str(z["meta_json"])),
                )
                stored = str(z["hash"])
        except FileNotFoundError:
            raise
        except Exception as e:  # zip/KeyError/ValueError: all mean "not a valid partition file"
            raise CorruptCacheError(f"partition file {path} is unreadable: {e}") from e
        if part.hash() != stored:
            raise CorruptCacheError(
                f"partition file {path}: content hash {part.hash()} != stored hash {stored}"
            )
        return part


def _jsonable(obj: Any) -> Any:
    """Convert numpy scalars/arrays inside ``meta`` so it survives a JSON round trip."""
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, float) and not math.isfinite(obj):
        return str(obj)  # JSON has no inf/nan
    return obj


def _client_class_counts(
    index_arrays: Sequence[np.ndarray], labels: np.ndarray, num_classes: int
) -> np.ndarray:
    n = len(index_arrays)
    sizes = np.array([a.size for a in index_arrays], dtype=np.int64)
    if sizes.sum() == 0:
        return np.zeros((n, num_classes), dtype=np.int64)
    owner = np.repeat(np.arange(n), sizes)
    lab = labels[np.concatenate(index_arrays)].astype(np.int64)
    flat = np.bincount(owner * num_classes + lab, minlength=n * num_classes)
    return flat.reshape(n, num_classes)


# --------------------------------------------------------------------------------------------
# Validation helpers
# --------------------------------------------------------------------------------------------
def _as_labels(labels: Any, name: str) -> np.ndarray:
    arr = np.asarray(labels)
    if arr.ndim != 1:
        raise PartitionError(f"{name} must be a 1-D array of class ids, got shape {arr.shape}")
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        if not np.issubdtype(arr.dtype, np.number) or not np.all(arr == np.round(arr)):
            raise PartitionError(f"{name} must hold integer class ids, got dtype {arr.dtype}")
    return arr.astype(np.int64)


def _prepare_labels(
    train_labels: Any, test_labels: Any, num_clients: int, num_classes: int | None
) -> tuple[np.ndarray, np.ndarray, int]:
    """Validate the inputs every scheme shares and infer ``num_classes``."""
    num_clients = check_value("num_clients", num_clients, int, ge=1, error=PartitionError)
    y_tr = _as_labels(train_labels, "train_labels")
    y_te = _as_labels(test_labels, "test_labels")
    if y_tr.size == 0:
        raise PartitionError("train_labels is empty; a partition needs training samples")
    if num_clients > y_tr.size:
        raise PartitionError(
            f"num_clients={num_clients} exceeds the number of train samples "
            f"({y_tr.size}); use num_clients <= {y_tr.size}"
        )
    observed = int(max(y_tr.max(), y_te.max() if y_te.size else -1)) + 1
    if num_classes is None:
        num_classes = observed
    else:
        num_classes = check_value("num_classes", num_classes, int, ge=1, error=PartitionError)
    for name, y in (("train_labels", y_tr), ("test_labels", y_te)):
        if y.size and (y.min() < 0 or y.max() >= num_classes):
            raise PartitionError(
                f"{name} holds labels outside [0, num_classes={num_classes}): "
                f"min {y.min()}, max {y.max()}"
            )
    return y_tr, y_te, int(num_classes)


def _check_rng(rng: Any) -> np.random.Generator:
    if not isinstance(rng, np.random.Generator):
        raise ConfigError(
            f"rng must be a numpy.random.Generator (e.g. np.random.default_rng(seed)), "
            f"got {type(rng).__name__}"
        )
    return rng


def _positive(alpha: Any) -> bool:
    try:
        return float(alpha) > 0  # NaN fails; inf passes (exactly uniform proportions)
    except (TypeError, ValueError):
        return False


def _check_alpha(alpha: Any) -> float:
    """The Dirichlet concentration as a float; anything ``float()`` reads counts (a YAML ``inf`` is a string)."""
    check_value("alpha", alpha, float, check=_positive, valid="a number > 0 (inf: no label skew)",
                error=PartitionError)
    return float(alpha)


# --------------------------------------------------------------------------------------------
# Sampling primitives (all vectorized; all randomness from `rng`)
# --------------------------------------------------------------------------------------------
def _dirichlet(rng: np.random.Generator, alpha: float, size: tuple[int, int]) -> np.ndarray:
    """Rows ~ Dir(alpha·1), computed in log space so tiny alpha never gives NaN.

    ``Gamma(a) = Gamma(a+1)·U^(1/a)``: for a << 1 the plain gamma draws underflow to 0 and
    the normalisation divides 0/0 (as in Flower issue #4377); log space avoids that.
    ``alpha = inf`` means exactly uniform proportions.
    """
    if math.isinf(alpha):
        return np.full(size, 1.0 / size[1])
    log_g = np.log(rng.standard_gamma(alpha + 1.0, size=size))
    log_g += np.log(rng.random(size=size)) / alpha
    log_g -= log_g.max(axis=1, keepdims=True)
    p = np.exp(log_g)
    return p / p.sum(axis=1, keepdims=True)


def _grouped_permutation(labels: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Indices grouped by ascending class, in random order within each class."""
    perm = rng.permutation(labels.size)
    return perm[np.argsort(labels[perm], kind="stable")]


def _group_by_owner(idx: np.ndarray, owner: np.ndarray, n_owners: int) -> tuple[np.ndarray, ...]:
    """Split ``idx`` into ``n_owners`` sorted arrays; owners outside [0, n_owners) are dropped."""
    keep = (owner >= 0) & (owner < n_owners)
    idx, owner = idx[keep], owner[keep]
    order = np.lexsort((idx, owner))
    idx = idx[order]
    bounds = np.cumsum(np.bincount(owner, minlength=n_owners))[:-1]
    return tuple(np.split(idx, bounds))


def _assign_by_counts(
    labels: np.ndarray, counts: np.ndarray, rng: np.random.Generator
) -> tuple[np.ndarray, ...]:
    """Give client k a random ``counts[c, k]`` indices of each class c (disjoint across clients).

    Indices of a class not covered by ``counts`` stay unassigned.
    """
    n_classes, n_clients = counts.shape
    per_class = np.bincount(labels, minlength=n_classes)[:n_classes]
    leftover = per_class - counts.sum(axis=1)
    if np.any(leftover < 0):  # internal invariant; a bug here would silently duplicate indices
        raise AssertionError("more indices requested than a class holds")
    table = np.concatenate([counts, leftover[:, None]], axis=1)
    owner = np.repeat(np.tile(np.arange(n_clients + 1), n_classes), table.ravel())
    return _group_by_owner(_grouped_permutation(labels, rng), owner, n_clients)


def _proportional_test_counts(train_counts: np.ndarray, test_per_class: np.ndarray) -> np.ndarray:
    """Split each class's test indices in the proportions of that class's train split.

    Integer cumulative boundaries ``floor(cumsum(a_c)·m_c / n_c)`` use every test index of a
    class present in train exactly once, and a client with no train samples of a class gets no
    test samples of it (pFedCSPC (TNNLS) §V-A1: a client's local test set has its training
    distribution; the proportional split is our choice, as the paper does not say how).
    """
    cum = np.cumsum(train_counts, axis=1)
    n_c = cum[:, -1]
    bounds = cum * test_per_class[:, None] // np.maximum(n_c, 1)[:, None]
    return np.diff(bounds, axis=1, prepend=0)


def _split_test_like_train(
    train_counts: np.ndarray, test_labels: np.ndarray, rng: np.random.Generator
) -> tuple[np.ndarray, ...]:
    n_classes = train_counts.shape[0]
    test_per_class = np.bincount(test_labels, minlength=n_classes)[:n_classes]
    counts = _proportional_test_counts(train_counts, test_per_class)
    return _assign_by_counts(test_labels, counts, rng)


def _even_split(
    n_items: int, n_parts: int, rng: np.random.Generator
) -> tuple[np.ndarray, ...]:
    return tuple(np.array_split(rng.permutation(n_items), n_parts))


def _largest_remainder(x: np.ndarray, total: int, rng: np.random.Generator) -> np.ndarray:
    """Round non-negative ``x`` (summing to ``total``) to integers with exactly that sum.

    Ties among equal remainders are broken at random, so e.g. 12.5 samples/class (FedPFT
    Tiny-ImageNet pathological, FedPFT (ICLR) §4.1 and App. D.1: 500 samples over 40 classes)
    does not always favour the lowest class ids.
    """
    base = np.floor(x).astype(np.int64)
    short = int(total - base.sum())
    if short > 0:
        frac = x - base
        order = np.lexsort((rng.random(x.size), -frac))
        base[order[:short]] += 1
    return base


# --------------------------------------------------------------------------------------------
# Dirichlet core (shared by `dirichlet` and `domain_dirichlet`)
# --------------------------------------------------------------------------------------------
def _dirichlet_counts(
    labels: np.ndarray,
    n_classes: int,
    n_clients: int,
    alpha: float,
    min_size: int,
    max_retries: int,
    balance: bool,
    rng: np.random.Generator,
    where: str = "",
) -> tuple[np.ndarray, int]:
    """Draw a class × client count matrix by per-class Dir(alpha) proportions.

    The MOON scheme that pFedCSPC (TNNLS) §V-A1 follows: redraw until every client has
    >= ``min_size`` samples, but at most ``max_retries`` times (the bound is our choice: the
    official FedCSPC/MOON ``partition_data`` loops until it succeeds). Retries work on the
    count matrix only, so each costs O(classes × clients), not O(samples).
    """
    per_class = np.bincount(labels, minlength=n_classes)[:n_classes].astype(np.int64)
    n = int(per_class.sum())
    if min_size * n_clients > n:
        raise PartitionError(
            f"dirichlet{where}: min_size={min_size} x num_clients={n_clients} = "
            f"{min_size * n_clients} exceeds the {n} train samples; lower min_size "
            f"(<= {n // n_clients}) or use fewer clients"
        )
    best = -1
    for attempt in range(1, max_retries + 1):
        if balance:
            counts = _balanced_counts(per_class, n_clients, alpha, rng)
        else:
            p = _dirichlet(rng, alpha, (n_classes, n_clients))
            # rint, not floor: with floor, float round-off in a cumsum that should reach 1
            # leaks a stray sample to the last client even when its share is ~0.
            bounds = np.rint(np.cumsum(p, axis=1) * per_class[:, None]).astype(np.int64)
            bounds = np.minimum(bounds, per_class[:, None])
            bounds[:, -1] = per_class
            counts = np.diff(bounds, axis=1, prepend=0)
        smallest = int(counts.sum(axis=0).min())
        if smallest >= min_size:
            return counts, attempt
        best = max(best, smallest)
    raise PartitionError(
        f"dirichlet{where}: after max_retries={max_retries} draws no partition gave every one "
        f"of the {n_clients} clients >= min_size={min_size} train samples (best draw: smallest "
        f"client had {best}) with alpha={alpha} and {n} samples; lower min_size, raise alpha, "
        f"use fewer clients, or raise max_retries"
    )


def _balanced_counts(
    per_class: np.ndarray, n_clients: int, alpha: float, rng: np.random.Generator
) -> np.ndarray:
    """MOON/NIID-Bench variant: a client already holding >= n/N samples gets no more classes.

    As the official FedCSPC and MOON code (``partition_data``) do; sequential over classes by
    construction.
    """
    n_classes = per_class.size
    cap = per_class.sum() / n_clients
    totals = np.zeros(n_clients, dtype=np.int64)
    counts = np.zeros((n_classes, n_clients), dtype=np.int64)
    p_all = _dirichlet(rng, alpha, (n_classes, n_clients))
    for c in range(n_classes):
        p = p_all[c] * (totals < cap)
        s = p.sum()
        p = p / s if s > 0 else np.full(n_clients, 1.0 / n_clients)
        bounds = np.minimum(np.rint(np.cumsum(p) * per_class[c]).astype(np.int64), per_class[c])
        bounds[-1] = per_class[c]
        counts[c] = np.diff(bounds, prepend=0)
        totals += counts[c]
    return counts


def _dirichlet_split(
    y_tr: np.ndarray,
    y_te: np.ndarray,
    n_classes: int,
    n_clients: int,
    alpha: float,
    min_size: int,
    max_retries: int,
    balance: bool,
    rng: np.random.Generator,
    where: str = "",
) -> tuple[tuple[np.ndarray, ...], tuple[np.ndarray, ...], int]:
    counts, attempts = _dirichlet_counts(
        y_tr, n_classes, n_clients, alpha, min_size, max_retries, balance, rng, where
    )
    train = _assign_by_counts(y_tr, counts, rng)
    test = _split_test_like_train(counts, y_te, rng)
    return train, test, attempts


# --------------------------------------------------------------------------------------------
# Schemes
# --------------------------------------------------------------------------------------------
PARTITIONERS: Registry[Callable[..., Partition]] = Registry("partition")


@PARTITIONERS.register("iid")
def iid(
    train_labels: Any,
    test_labels: Any,
    num_clients: int,
    rng: np.random.Generator,
    *,
    train_domains: Any = None,
    test_domains: Any = None,
    num_classes: int | None = None,
) -> Partition:
    """Shuffle each split and cut it into ``num_clients`` parts whose sizes differ by <= 1."""
    y_tr, y_te, n_classes = _prepare_labels(train_labels, test_labels, num_clients, num_classes)
    rng = _check_rng(rng)
    return Partition(
        train=_even_split(y_tr.size, num_clients, rng),
        test=_even_split(y_te.size, num_clients, rng),
        num_classes=n_classes,
        meta={"scheme": "iid", "params": {}},
    )


@PARTITIONERS.register("dirichlet")
def dirichlet(
    train_labels: Any,
    test_labels: Any,
    num_clients: int,
    rng: np.random.Generator,
    *,
    alpha: float,
    min_size: int = 10,
    max_retries: int = 1000,
    balance: bool = False,
    train_domains: Any = None,
    test_domains: Any = None,
    num_classes: int | None = None,
) -> Partition:
    """Per-class Dirichlet label skew over the whole train split (pFedCSPC (TNNLS) §V-A1, MOON).

    For each class, proportions ~ Dir(alpha·1_N) over clients split that class's indices by
    cumulative proportions; the whole draw is repeated while some client has < ``min_size``
    samples, at most ``max_retries`` times. ``balance=True`` adds the MOON/NIID-Bench rule
    (clients already at n/N samples get no more). Each client's test split has its train label
    distribution (pFedCSPC (TNNLS) §V-A1).
    """
    y_tr, y_te, n_classes = _prepare_labels(train_labels, test_labels, num_clients, num_classes)
    rng = _check_rng(rng)
    alpha = _check_alpha(alpha)
    min_size = check_value("min_size", min_size, int, ge=0, error=PartitionError)
    max_retries = check_value("max_retries", max_retries, int, ge=1, error=PartitionError)
    train, test, attempts = _dirichlet_split(
        y_tr, y_te, n_classes, num_clients, alpha, min_size, max_retries, bool(balance), rng
    )
    return Partition(
        train=train, test=test, num_classes=n_classes,
        meta={"scheme": "dirichlet",
              "params": {"alpha": alpha, "min_size": min_size, "max_retries": max_retries,
                         "balance": bool(balance)},
              "attempts": attempts},
    )


def _balanced_class_sets(
    present: np.ndarray, n_clients: int, k: int, rng: np.random.Generator
) -> list[np.ndarray]:
    """k distinct classes per client, each class used floor/ceil(N·k/C) times.

    A randomised round-robin: each client takes the k least-used classes, ties broken at
    random, so usage never differs by more than one (as in the official SGPT code's
    ``noniid-labeluni`` split; PEP-FedPT (arXiv) §5 cites SGPT for its pathological split) while
    class combinations stay random.
    """
    usage = np.zeros(present.size, dtype=np.int64)
    sets = []
    for _ in range(n_clients):
        pick = np.argsort(usage + rng.random(present.size), kind="stable")[:k]
        usage[pick] += 1
        sets.append(np.sort(present[pick]))
    return sets


@PARTITIONERS.register("pathological")
def pathological(
    train_labels: Any,
    test_labels: Any,
    num_clients: int,
    rng: np.random.Generator,
    *,
    classes_per_client: int,
    shots: int | None = None,
    train_domains: Any = None,
    test_domains: Any = None,
    num_classes: int | None = None,
) -> Partition:
    """Each client holds exactly ``classes_per_client`` classes (PEP-FedPT (arXiv) §5 "Setup").

    Classes are spread so each is used by about the same number of clients; a class's train
    and test indices are split evenly among its holders. ``shots`` (FedOTP (CVPR 2024) §5.1,
    few-shot CLIP datasets) keeps only that many train samples per class per client, while the
    test split keeps the client's full share. With ``num_clients·k == num_classes`` the
    classes are disjoint across clients, as in FedOTP.
    """
    y_tr, y_te, n_classes = _prepare_labels(train_labels, test_labels, num_clients, num_classes)
    rng = _check_rng(rng)
    k = check_value("classes_per_client", classes_per_client, int, ge=1, le=n_classes, error=PartitionError)
    per_class = np.bincount(y_tr, minlength=n_classes)
    present = np.flatnonzero(per_class)
    if k > present.size:
        raise PartitionError(
            f"classes_per_client={k} exceeds the {present.size} classes present in the train "
            f"split (num_classes={n_classes}); use classes_per_client <= {present.size}"
        )
    if shots is not None:
        shots = check_value("shots", shots, int, ge=1, error=PartitionError)

    sets = _balanced_class_sets(present, num_clients, k, rng)
    member = np.zeros((n_classes, num_clients), dtype=bool)
    member[np.concatenate(sets), np.repeat(np.arange(num_clients), k)] = True
    counts = np.zeros((n_classes, num_clients), dtype=np.int64)
    for c in present:
        holders = np.flatnonzero(member[c])
        if holders.size == 0:
            continue
        if per_class[c] < holders.size:
            raise PartitionError(
                f"pathological: class {c} has {per_class[c]} train samples but "
                f"{holders.size} clients hold it, so some would not get all "
                f"classes_per_client={k} classes; use fewer clients or a smaller "
                f"classes_per_client"
            )
        share = np.full(holders.size, per_class[c] // holders.size, dtype=np.int64)
        share[rng.permutation(holders.size)[: per_class[c] % holders.size]] += 1
        counts[c, holders] = share

    train_counts = counts
    if shots is not None:
        too_few = counts[(counts > 0)].min() if counts.any() else 0
        if too_few < shots:
            raise PartitionError(
                f"pathological: shots={shots} but some client's share of a class has only "
                f"{too_few} train samples; lower shots or use fewer clients"
            )
        train_counts = np.minimum(counts, shots)
    train = _assign_by_counts(y_tr, train_counts, rng)
    # Test shares follow the full (pre-`shots`) split so few-shot clients keep all test data.
    test = _split_test_like_train(counts, y_te, rng)
    return Partition(
        train=train, test=test, num_classes=n_classes,
        meta={"scheme": "pathological",
              "params": {"classes_per_client": k, "shots": shots},
              "client_classes": [s.tolist() for s in sets]},
    )


def _allocate(
    q: np.ndarray, total: int, avail: np.ndarray, rng: np.random.Generator, *, fallback: bool
) -> np.ndarray:
    """Integer counts ~ ``q``·total, capped by ``avail``; deficits are re-spread over classes
    that still have indices (renormalised ``q``).

    Each pass either meets ``total`` or exhausts at least one class, so it terminates in at
    most ``len(q) + 1`` passes. With ``fallback`` a fully exhausted support of ``q`` is
    replaced by a uniform choice over the classes that remain; without it the caller gets
    fewer than ``total``.
    """
    counts = np.zeros_like(avail)
    left = avail.copy()
    need = int(total)
    for _ in range(q.size + 1):
        if need == 0:
            break
        w = q * (left > 0)
        if w.sum() <= 0:
            if not fallback:
                break
            w = (left > 0).astype(float)
            if w.sum() == 0:
                break
        take = np.minimum(_largest_remainder(w / w.sum() * need, need, rng), left)
        counts += take
        left -= take
        need -= int(take.sum())
    return counts


def _take(pools: list[np.ndarray], ptr: np.ndarray, counts: np.ndarray) -> np.ndarray:
    parts = []
    for c in np.flatnonzero(counts):
        parts.append(pools[c][ptr[c]: ptr[c] + counts[c]])
        ptr[c] += counts[c]
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def _class_pools(labels: np.ndarray, n_classes: int, rng: np.random.Generator) -> list[np.ndarray]:
    order = _grouped_permutation(labels, rng)
    bounds = np.cumsum(np.bincount(labels, minlength=n_classes))[:-1]
    return np.split(order, bounds)


@PARTITIONERS.register("fixed_dirichlet")
def fixed_dirichlet(
    train_labels: Any,
    test_labels: Any,
    num_clients: int,
    rng: np.random.Generator,
    *,
    alpha: float | None = None,
    train_per_client: int = 500,
    test_per_client: int = 100,
    classes_per_client: int | None = None,
    train_domains: Any = None,
    test_domains: Any = None,
    num_classes: int | None = None,
) -> Partition:
    """FedPFT protocol (ICLR §4.1, App. D.1): every client gets exactly ``train_per_client``
    train and (when the pool allows) ``test_per_client`` test samples, disjoint across clients.

    Per client, q_i ~ Dir(alpha·1_C) (or, with ``classes_per_client`` k, uniform over k random
    classes: the pathological variant with 250 / 25 / 12.5 per class, rounded so totals stay
    exact). Train counts follow q_i, renormalised over classes that still have indices when a
    class runs out. Test counts are the train counts scaled to ``test_per_client``, restricted
    to the client's train classes; if those classes' test pools run dry the client gets fewer
    test samples (recorded in ``meta["test_shortfall"]`` with a warning), never foreign classes.
    """
    y_tr, y_te, n_classes = _prepare_labels(train_labels, test_labels, num_clients, num_classes)
    rng = _check_rng(rng)
    train_per_client = check_value("train_per_client", train_per_client, int, ge=1, error=PartitionError)
    test_per_client = check_value("test_per_client", test_per_client, int, ge=0, error=PartitionError)
    if classes_per_client is None:
        if alpha is None:
            raise PartitionError(
                "fixed_dirichlet needs alpha (Dirichlet) or classes_per_client (pathological)"
            )
        alpha = _check_alpha(alpha)
    else:
        classes_per_client = check_value("classes_per_client", classes_per_client, int, ge=1, le=n_classes,
                                         error=PartitionError)
    if num_clients * train_per_client > y_tr.size:
        raise PartitionError(
            f"fixed_dirichlet: num_clients={num_clients} x train_per_client={train_per_client} "
            f"= {num_clients * train_per_client} exceeds the {y_tr.size} train samples; lower "
            f"train_per_client or use fewer clients"
        )
    if num_clients * test_per_client > y_te.size:
        raise PartitionError(
            f"fixed_dirichlet: num_clients={num_clients} x test_per_client={test_per_client} "
            f"= {num_clients * test_per_client} exceeds the {y_te.size} test samples; lower "
            f"test_per_client or use fewer clients"
        )

    tr_pools, te_pools = _class_pools(y_tr, n_classes, rng), _class_pools(y_te, n_classes, rng)
    tr_left = np.array([p.size for p in tr_pools], dtype=np.int64)
    te_left = np.array([p.size for p in te_pools], dtype=np.int64)
    tr_ptr, te_ptr = np.zeros(n_classes, np.int64), np.zeros(n_classes, np.int64)
    train, test, shortfall, client_classes = [], [], [], []
    for i in range(num_clients):
        if classes_per_client is None:
            q = _dirichlet(rng, alpha, (1, n_classes))[0]
            tr_counts = _allocate(q, train_per_client, tr_left, rng, fallback=True)
        else:
            q, tr_counts = _pathological_draw(
                classes_per_client, train_per_client, test_per_client, tr_left, te_left, rng, i
            )
        te_target = _largest_remainder(tr_counts / train_per_client * test_per_client,
                                       test_per_client, rng)
        if np.all(te_target <= te_left):
            te_counts = te_target
        else:  # a test pool ran short: re-spread over the client's other train classes only
            te_counts = _allocate(te_target.astype(float), test_per_client, te_left, rng,
                                  fallback=False)
        tr_left -= tr_counts
        te_left -= te_counts
        train.append(_take(tr_pools, tr_ptr, tr_counts))
        test.append(_take(te_pools, te_ptr, te_counts))
        shortfall.append(test_per_client - int(te_counts.sum()))
        client_classes.append(np.flatnonzero(tr_counts).tolist())
    if any(shortfall):
        warnings.warn(
            f"fixed_dirichlet: {sum(s > 0 for s in shortfall)} clients got fewer than "
            f"test_per_client={test_per_client} test samples because their classes' test pools "
            f"ran out (total shortfall {sum(shortfall)}); lower test_per_client or raise alpha",
            stacklevel=2,
        )
    return Partition(
        train=tuple(train), test=tuple(test), num_classes=n_classes,
        meta={"scheme": "fixed_dirichlet",
              "params": {"alpha": alpha, "train_per_client": train_per_client,
                         "test_per_client": test_per_client,
                         "classes_per_client": classes_per_client},
              "test_shortfall": shortfall},
    )


def _pathological_draw(
    k: int, n_train: int, n_test: int, tr_left: np.ndarray, te_left: np.ndarray,
    rng: np.random.Generator, client: int,
) -> tuple[np.ndarray, np.ndarray]:
    """k random classes that can still supply an equal share of train and test samples."""
    need_tr, need_te = math.ceil(n_train / k), math.ceil(n_test / k)
    eligible = np.flatnonzero((tr_left >= need_tr) & (te_left >= need_te))
    if eligible.size < k:
        raise PartitionError(
            f"fixed_dirichlet: client {client} needs classes_per_client={k} classes with >= "
            f"{need_tr} train and {need_te} test samples left, only {eligible.size} remain; "
            f"lower train_per_client/test_per_client or use fewer clients"
        )
    chosen = rng.choice(eligible, size=k, replace=False)
    q = np.zeros(tr_left.size)
    q[chosen] = 1.0 / k
    return q, _largest_remainder(q * n_train, n_train, rng)


def _as_domains(domains: Any, labels: np.ndarray, name: str, scheme: str) -> np.ndarray:
    if domains is None:
        raise PartitionError(
            f"{scheme} needs {name} (an int domain id per sample); the dataset has no domains"
        )
    d = _as_labels(domains, name)
    if d.size != labels.size:
        raise PartitionError(f"{name} has {d.size} entries but there are {labels.size} labels")
    if d.size and d.min() < 0:
        raise PartitionError(f"{name} must hold domain ids >= 0, got min {d.min()}")
    return d


def _domains(
    train_domains: Any, test_domains: Any, y_tr: np.ndarray, y_te: np.ndarray, scheme: str
) -> tuple[np.ndarray, np.ndarray, int]:
    d_tr = _as_domains(train_domains, y_tr, "train_domains", scheme)
    d_te = _as_domains(test_domains, y_te, "test_domains", scheme)
    n_dom = int(max(d_tr.max(), d_te.max() if d_te.size else -1)) + 1
    empty = np.flatnonzero(np.bincount(d_tr, minlength=n_dom) == 0)
    if empty.size:
        raise PartitionError(
            f"{scheme}: train_domains has no samples for domain(s) {empty.tolist()}; every "
            f"domain id in [0, {n_dom}) needs train data"
        )
    return d_tr, d_te, n_dom


def _subsample(idx: np.ndarray, n: int | None, name: str, domain: int,
               rng: np.random.Generator) -> np.ndarray:
    if n is None:
        return idx
    if n > idx.size:
        raise PartitionError(
            f"domain: {name}={n} but domain {domain} has only {idx.size} samples; lower {name}"
        )
    return rng.choice(idx, size=n, replace=False)


@PARTITIONERS.register("domain")
def domain(
    train_labels: Any,
    test_labels: Any,
    num_clients: int,
    rng: np.random.Generator,
    *,
    train_per_client: int | None = None,
    test_per_client: int | None = None,
    train_domains: Any = None,
    test_domains: Any = None,
    num_classes: int | None = None,
) -> Partition:
    """Feature shift, one domain per client: client d holds domain d (FedPFT (ICLR) App. I,
    1000/500 per client; FedOTP (CVPR 2024) App. C.1, Table A2)."""
    y_tr, y_te, n_classes = _prepare_labels(train_labels, test_labels, num_clients, num_classes)
    rng = _check_rng(rng)
    d_tr, d_te, n_dom = _domains(train_domains, test_domains, y_tr, y_te, "domain")
    if num_clients != n_dom:
        raise PartitionError(
            f"domain: num_clients={num_clients} must equal the number of domains ({n_dom}); "
            f"use domain_dirichlet with clients_per_domain to split domains further"
        )
    if train_per_client is not None:
        train_per_client = check_value("train_per_client", train_per_client, int, ge=1, error=PartitionError)
    if test_per_client is not None:
        test_per_client = check_value("test_per_client", test_per_client, int, ge=0, error=PartitionError)
    train, test = [], []
    for d in range(n_dom):
        train.append(_subsample(np.flatnonzero(d_tr == d), train_per_client,
                                "train_per_client", d, rng))
        test.append(_subsample(np.flatnonzero(d_te == d), test_per_client,
                               "test_per_client", d, rng))
    return Partition(
        train=tuple(train), test=tuple(test), num_classes=n_classes,
        meta={"scheme": "domain",
              "params": {"train_per_client": train_per_client,
                         "test_per_client": test_per_client},
              "client_domain": list(range(n_dom))},
    )


@PARTITIONERS.register("domain_dirichlet")
def domain_dirichlet(
    train_labels: Any,
    test_labels: Any,
    num_clients: int,
    rng: np.random.Generator,
    *,
    clients_per_domain: int,
    alpha: float | None,
    label_skew: bool = True,
    min_size: int = 2,
    max_retries: int = 1000,
    train_domains: Any = None,
    test_domains: Any = None,
    num_classes: int | None = None,
) -> Partition:
    """Feature + label shift: each domain is split into ``clients_per_domain`` clients.

    FedOTP (CVPR 2024) §5.2 Table 2 and App. C.2 Table A3 (DomainNet 6×5, Office 4×3, Dirichlet
    inside the domain; min size 2 as in the official code) and PEP-FedPT (arXiv) §5 (DomainNet
    6×10; the paper does not say how a domain is divided, we default to IID: ``alpha=None``/``inf``
    or ``label_skew=False``). Client ids are domain-major; the domain of each client is
    ``meta["client_domain"]``.
    """
    y_tr, y_te, n_classes = _prepare_labels(train_labels, test_labels, num_clients, num_classes)
    rng = _check_rng(rng)
    skew = bool(label_skew) and alpha is not None and not (
        isinstance(alpha, (int, float)) and math.isinf(alpha))
    if skew:
        alpha = _check_alpha(alpha)
    min_size = check_value("min_size", min_size, int, ge=0, error=PartitionError)
    max_retries = check_value("max_retries", max_retries, int, ge=1, error=PartitionError)
    m = check_value("clients_per_domain", clients_per_domain, int, ge=1, error=PartitionError)
    d_tr, d_te, n_dom = _domains(train_domains, test_domains, y_tr, y_te, "domain_dirichlet")
    if num_clients != m * n_dom:
        raise PartitionError(
            f"domain_dirichlet: num_clients={num_clients} must equal clients_per_domain={m} x "
            f"number of domains ({n_dom}) = {m * n_dom}"
        )

    train: list[np.ndarray] = []
    test: list[np.ndarray] = []
    for d in range(n_dom):
        tr_idx, te_idx = np.flatnonzero(d_tr == d), np.flatnonzero(d_te == d)
        if tr_idx.size < m:
            raise PartitionError(
                f"domain_dirichlet: domain {d} has {tr_idx.size} train samples, fewer than "
                f"clients_per_domain={m}"
            )
        if skew:
            tr_loc, te_loc, _ = _dirichlet_split(
                y_tr[tr_idx], y_te[te_idx], n_classes, m, alpha, min_size, max_retries,
                False, rng, where=f" (domain {d})",
            )
        else:
            tr_loc, te_loc = _even_split(tr_idx.size, m, rng), _even_split(te_idx.size, m, rng)
        train.extend(tr_idx[t] for t in tr_loc)
        test.extend(te_idx[t] for t in te_loc)
    return Partition(
        train=tuple(train), test=tuple(test), num_classes=n_classes,
        meta={"scheme": "domain_dirichlet",
              "params": {"clients_per_domain": m, "alpha": alpha if skew else None,
                         "label_skew": skew, "min_size": min_size,
                         "max_retries": max_retries},
              "client_domain": [d for d in range(n_dom) for _ in range(m)]},
    )


@PARTITIONERS.register("by_user")
def by_user(
    train_labels: Any,
    test_labels: Any,
    num_clients: int,
    rng: np.random.Generator,
    *,
    min_train: int = 16,
    train_users: Any = None,
    train_domains: Any = None,
    test_domains: Any = None,
    num_classes: int | None = None,
) -> Partition:
    """One client per user of a dataset whose training images name their user (the federated
    iNaturalist of Hsu et al. 2020), keeping the users with >= ``min_train`` training images.

    PEP-FedPT (arXiv) §5: "each client gets at least 16 training samples", giving 1018 clients; the
    smaller users' images train no one. Clients follow the users' ids in increasing order, so
    ``num_clients`` must equal the number of users kept. The release's test split names no user: each
    class's test images are divided among the clients in the proportions of that class's training
    images, as the Dirichlet split does (our reading; ``data.validation`` instead scores each client
    on a share of its own images).
    """
    y_tr, y_te, n_classes = _prepare_labels(train_labels, test_labels, num_clients, num_classes)
    rng = _check_rng(rng)
    min_train = check_value("min_train", min_train, int, ge=1, error=PartitionError)
    if train_users is None:
        raise PartitionError("by_user needs train_users (a user id per training sample); the dataset names "
                             "no users (valid: a dataset with train_user, e.g. inaturalist)")
    users = _as_labels(train_users, "train_users")
    if users.size != y_tr.size:
        raise PartitionError(f"train_users has {users.size} entries but there are {y_tr.size} train labels")
    if users.size and users.min() < 0:
        raise PartitionError(f"train_users must hold user ids >= 0, got min {users.min()}")
    sizes = np.bincount(users)
    kept = np.flatnonzero(sizes >= min_train)
    if num_clients != kept.size:
        raise PartitionError(
            f"by_user: num_clients={num_clients} must equal the number of users with >= min_train={min_train} "
            f"training images ({kept.size} of {np.count_nonzero(sizes)} users); set num_clients={kept.size} or "
            f"change min_train")
    owner = np.full(sizes.size, -1, dtype=np.int64)
    owner[kept] = np.arange(kept.size)
    train = _group_by_owner(np.arange(users.size), owner[users], kept.size)
    counts = _client_class_counts(train, y_tr, n_classes).T
    test = _split_test_like_train(counts, y_te, rng)
    return Partition(
        train=train, test=test, num_classes=n_classes,
        meta={"scheme": "by_user", "params": {"min_train": min_train},
              "client_user": kept.tolist(),
              "dropped_users": int(np.count_nonzero(sizes) - kept.size),
              "dropped_train": int(users.size - sum(t.size for t in train))},
    )


# --------------------------------------------------------------------------------------------
# Front door
# --------------------------------------------------------------------------------------------
def scheme_params(fn: Callable[..., Partition]) -> tuple[list[str], list[str]]:
    """(all user-facing parameter names, the required ones) of a partitioner."""
    names, required = [], []
    for p in inspect.signature(fn).parameters.values():
        if p.name in _STANDARD_ARGS or p.kind is not inspect.Parameter.KEYWORD_ONLY:
            continue
        names.append(p.name)
        if p.default is inspect.Parameter.empty:
            required.append(p.name)
    return names, required


def _pick_held_out(
    part: Partition, h: int, by_domain: bool, rng: np.random.Generator
) -> tuple[int, ...]:
    """Held-out client ids drawn with ``rng`` *after* partitioning, so adding held-out clients
    never changes the index arrays themselves. ``by_domain`` takes h / num_domains per domain
    (PEP-FedPT (arXiv) App. A.4.7: on DomainNet, 1 of 10 clients per domain)."""
    if not by_domain:
        return tuple(sorted(rng.choice(part.num_clients, size=h, replace=False).tolist()))
    client_domain = part.meta.get("client_domain")
    if client_domain is None:
        raise ConfigError("holdout_by_domain=True needs a domain scheme (meta['client_domain'])")
    client_domain = np.asarray(client_domain)
    doms = np.unique(client_domain)
    if h % doms.size:
        raise PartitionError(
            f"holdout_clients={h} must be a multiple of the {doms.size} domains when "
            f"holdout_by_domain=True"
        )
    per = h // doms.size
    held: list[int] = []
    for d in doms:
        members = np.flatnonzero(client_domain == d)
        if per >= members.size:
            raise PartitionError(
                f"holdout_clients={h} leaves no training client in domain {d} "
                f"({members.size} clients)"
            )
        held.extend(rng.choice(members, size=per, replace=False).tolist())
    return tuple(sorted(held))


def make_partition(
    scheme: str,
    train_labels: Any,
    test_labels: Any,
    num_clients: int,
    rng: np.random.Generator,
    *,
    train_domains: Any = None,
    test_domains: Any = None,
    train_users: Any = None,
    holdout_clients: int = 0,
    holdout_by_domain: bool = False,
    num_classes: int | None = None,
    **params: Any,
) -> Partition:
    """Build a partition with a registered scheme, then choose held-out clients.

    ``train_users`` (a user id per training sample, where the dataset has them) reaches only the
    schemes that declare it (``by_user``).

    Unknown or missing scheme parameters raise :class:`ConfigError` naming them and listing
    the valid ones. ``holdout_clients=h`` (0 <= h < num_clients) marks h clients, drawn with
    ``rng``, that never train but keep their train and test data (PEP-FedPT (arXiv) §5
    "Evaluation Methodology": 10% of clients held out).
    """
    fn = PARTITIONERS.get(scheme)
    valid, required = scheme_params(fn)
    unknown = sorted(set(params) - set(valid))
    if unknown:
        raise ConfigError(
            f"unknown parameter(s) {', '.join(unknown)} for partition scheme {scheme!r}; "
            f"valid parameters: {', '.join(valid) or '(none)'}"
        )
    missing = [p for p in required if p not in params]
    if missing:
        raise ConfigError(
            f"partition scheme {scheme!r} needs parameter(s) {', '.join(missing)}; "
            f"valid parameters: {', '.join(valid)}"
        )
    rng = _check_rng(rng)
    holdout_clients = check_value("holdout_clients", holdout_clients, int, ge=0, error=PartitionError)
    if isinstance(num_clients, (int, np.integer)) and not isinstance(num_clients, bool) \
            and num_clients >= 1 and holdout_clients >= num_clients:
        raise PartitionError(
            f"invalid holdout_clients={holdout_clients}; valid: an integer in [0, num_clients={num_clients})"
        )
    # Only a scheme that reads users is handed them: the others keep their signatures.
    users = {"train_users": train_users} if "train_users" in inspect.signature(fn).parameters else {}
    part = fn(train_labels, test_labels, num_clients, rng, train_domains=train_domains,
              test_domains=test_domains, num_classes=num_classes, **users, **params)
    if holdout_clients == 0:
        return part
    held = _pick_held_out(part, int(holdout_clients), bool(holdout_by_domain), rng)
    meta = {**part.meta, "holdout_clients": int(holdout_clients),
            "holdout_by_domain": bool(holdout_by_domain)}
    return Partition(train=part.train, test=part.test, num_classes=part.num_classes,
                     held_out=held, meta=meta)


def list_partitions() -> list[str]:
    """Names of the registered partition schemes."""
    return PARTITIONERS.names()
