"""The files a run reads, checked before its data pipeline reads any of them (issue 53).

The readers of dataset files (:mod:`fedrepro.data.idx`, the loaders' decoded-image caches through
:mod:`fedrepro.data.cache`) and of weights files (:mod:`fedrepro.models.backbones`) read a file whole:
a 20 GB sparse IDX file, a gzip bomb (4 MB inflating to 4 GiB) or a torch file whose zip entries are
deflated (256 KB inflating to 256 MB) planted in a shared data root would end as a misleading
"out of memory for model ..." error, or the process killed. Those readers are part of every run's code
fingerprint (:mod:`fedrepro.runs.fingerprint`), so that a change to them would mark every stored run
stale; the bounds live here instead, in code that runs before them and changes no number:
:func:`check_run_inputs`, which :mod:`fedrepro.runs.train` calls before a run's data is prepared.

Each file a run would read (its dataset loader's ``input_files``, the Fashion-MNIST files the loaders
built on it find, the loader's decoded-image caches, the weights files its model's ``weight_files``
names, and the caches its model's methods read, such as a frozen CLIP's token caches) must be a
regular file (a link is followed: a user may link a data root, but what it points to must be a file,
not a FIFO that would block the read or a device that never ends), at most its kind's bound, a
``.gz`` file must decompress within :data:`MAX_INFLATED_BYTES`, and a torch file must hold no
compressed entry (:func:`fedrepro.env.torchfile.file_inflation_problem`). A file that is not there is
passed over: the loader says what is missing, as it did before. A verdict is kept for the process per
file and what ``stat`` says of it (as :mod:`fedrepro.data.digest` keeps digests), so a pool worker
running hundreds of runs of one dataset decompresses its files once.
"""
from __future__ import annotations

import gzip
import inspect
import os
import stat
import time
import zlib
from pathlib import Path
from typing import Any, Callable, Mapping

from ..config import RunConfig
from ..data import DATASETS, data_root, is_rehearsal
from ..data.digest import RACY_NS
from ..data.fashion_mnist import find_fashion_mnist
from ..data.rehearsal import NO_FILES
from ..env.torchfile import file_inflation_problem
from ..errors import CorruptCacheError, FedreproError
from ..models.clip_cache import default_cache_dir
from ..models.registry import MODELS, model_kwargs

# A dataset file (an IDX file, a CIFAR batch, a split file, an image) or a weights file: the largest
# real one is a CIFAR-100 training batch (155 MB) or a CLIP ViT-B/16 checkpoint (about 600 MB), and
# each is read whole into memory; 2 GiB leaves room for a larger backbone and stops a planted 20 GB
# (sparse) file before it is read.
MAX_FILE_BYTES = 2 << 30
# What a .gz dataset file may decompress to: the largest real one, Fashion-MNIST's training images,
# decompresses to 47 MB (in 0.3 s on a laptop core); the IDX reader holds all of it in memory.
MAX_INFLATED_BYTES = 2 << 30
_CHUNK = 1 << 20
# Files that a weights reader does not hand to torch.load: numpy's own (a .npz may legitimately be
# compressed) and safetensors (no zip).
NOT_TORCH = (".npz", ".safetensors")


def memory_bytes() -> int:
    """This machine's physical memory, or :data:`MAX_FILE_BYTES` where the system does not say."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return MAX_FILE_BYTES


def _gib(n: int) -> str:
    return f"{n / (1 << 30):.3g} GiB"


# What a kind of input file may be: its bound in bytes (a function: a test or a machine may change
# it) and why, whether torch.load reads it, and what the user should do about a bad one.
KINDS: dict[str, dict[str, Any]] = {
    "dataset file": {"bound": lambda: MAX_FILE_BYTES, "why": "fedrepro.runs.inputs.MAX_FILE_BYTES",
                     "torch": False, "fix": "delete it and fetch the dataset again"},
    # A decoded-image cache holds the dataset as it is trained on: at the paper's 224 pixels Tiny-ImageNet's
    # takes 16 GB, which is legitimate where memory allows; one larger than this machine's memory can
    # never be read here.
    "cache file": {"bound": memory_bytes, "why": "this machine's memory", "torch": True,
                   "fix": "delete it and it will be rebuilt from the source images"},
    "weights file": {"bound": lambda: MAX_FILE_BYTES, "why": "fedrepro.runs.inputs.MAX_FILE_BYTES",
                     "torch": True, "fix": "name a sound weights file in model.args.weights"},
}

# (path, kind, bounds, size, mtime, ctime, inode, device) -> the problem (None: sound).
_VERDICTS: dict[tuple, str | None] = {}


def _gzip_problem(path: Path, cap: int) -> str | None:
    """Whether the gzip file ``path`` decompresses to more than ``cap`` bytes, read in chunks and stopped
    at the cap (a damaged stream is left to the reader, whose error names it)."""
    total = 0
    try:
        with gzip.open(path, "rb") as f:
            while chunk := f.read(_CHUNK):
                total += len(chunk)
                if total > cap:
                    return (f"decompresses to more than {cap} bytes ({_gib(cap)}: "
                            "fedrepro.runs.inputs.MAX_INFLATED_BYTES); refused before it was read")
    except (EOFError, OSError, zlib.error):
        return None
    return None


def file_problem(path: str | os.PathLike[str], kind: str) -> str | None:
    """Why the input file ``path`` of ``kind`` (a key of :data:`KINDS`) must not be read, in words that
    follow its path, or None when it may (or is not there: its reader says so)."""
    path = Path(path)
    spec = KINDS[kind]
    try:
        st = os.stat(path)  # follows a link: what it points to is what is read
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return "is not a regular file (a FIFO or device would block or never end the read)"
    bound = spec["bound"]()
    if st.st_size > bound:
        return (f"is {st.st_size} bytes, more than the {bound} ({_gib(bound)}: {spec['why']}) a {kind} may be; "
                "refused before it was read")
    key = (str(path), kind, bound, MAX_INFLATED_BYTES, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino,
           st.st_dev)
    if key in _VERDICTS:
        return _VERDICTS[key]
    problem = None
    try:
        if path.suffix == ".gz":
            problem = _gzip_problem(path, MAX_INFLATED_BYTES)
        elif spec["torch"] and path.suffix not in NOT_TORCH:
            problem = file_inflation_problem(path)
    except OSError:  # unreadable: its reader says so
        return None
    # A file changed within the file clock's tick could change again unseen (fedrepro.data.digest).
    if time.time_ns() - max(st.st_mtime_ns, st.st_ctime_ns) > RACY_NS:
        _VERDICTS[key] = problem
    return problem


def _options(name: str, args: Mapping[str, Any] | None) -> dict[str, Any]:
    params = inspect.signature(DATASETS.get(name)).parameters
    defaults = {p: v.default for p, v in params.items() if v.default is not inspect.Parameter.empty
                and p not in ("root", "download")}
    return {**defaults, **(args or {})}


def _fashion_mnist(root: Path, options: dict[str, Any]) -> list[tuple[str, Path]]:
    """Fashion-MNIST's four IDX files, where its loader finds them (checked against its manifest only
    after they are read whole)."""
    try:
        return [("dataset file", p) for p in find_fashion_mnist(root, download=False).values()]
    except (OSError, FedreproError):  # not here: the loader downloads them or says where it looked
        return []


def _rendered_domains(root: Path, options: dict[str, Any]) -> list[tuple[str, Path]]:
    """Fashion-MNIST's files and the renderings cached beside them (their names hash the source images,
    known only once those are read: every cached rendering is checked). The folder is the one
    fedrepro.data.fashion_mnist_domains writes."""
    folder = root / "cache" / "fashion_mnist_domains"
    return _fashion_mnist(root, options) + [("cache file", p) for p in sorted(folder.glob("*.pt"))]


# Datasets whose files are not (all) in their loader's input_files: those built on Fashion-MNIST.
EXTRA_FILES: dict[str, Callable[[Path, dict[str, Any]], list[tuple[str, Path]]]] = {
    "fashion_mnist": _fashion_mnist,
    "fashion_mnist_federated": _fashion_mnist,
    "fashion_mnist_domains": _rendered_domains,
}


def _decoded_caches(folder: Path, options: Mapping[str, Any]) -> list[Path]:
    """The decoded-image caches in a loader's ``folder`` for its ``image_size``: Tiny-ImageNet's and
    iNaturalist's ``.fedrepro_cache_<size>.pt``, an image folder's ``.fedrepro_cache_<domain>..._<size>.pt``."""
    size = options.get("image_size")
    if size is None:
        return []
    return sorted(p for p in folder.glob(".fedrepro_cache_*.pt")
                  if p.stem == f".fedrepro_cache_{size}" or p.stem.endswith(f"_{size}"))


def dataset_files(name: str, args: Mapping[str, Any] | None = None,
                  root: str | os.PathLike[str] | None = None) -> list[tuple[str, Path]]:
    """``(kind, path)`` of every file that loading dataset ``name`` with options ``args`` from the data
    root (``root``) could read: none at the rehearsal root or for a dataset that reads no files."""
    if is_rehearsal(root) or name in NO_FILES:
        return []
    folder_root = data_root(root)
    options = _options(name, args)
    found: list[tuple[str, Path]] = []
    files_of = getattr(DATASETS.get(name), "input_files", None)
    if files_of is not None:
        try:
            folder, files = files_of(folder_root, **options)
        except (OSError, FedreproError):  # missing or unreadable: the load itself says what is wrong
            folder, files = None, []
        found += [("dataset file", Path(f)) for f in files]
        if folder is not None:
            found += [("cache file", p) for p in _decoded_caches(Path(folder), options)]
    extra = EXTRA_FILES.get(name)
    return found + (extra(folder_root, options) if extra is not None else [])


def weights_files(model: str, args: Mapping[str, Any] | None = None) -> list[Path]:
    """The weights files model ``model`` with ``args`` reads (its builder's ``weight_files``), [] when none
    or when they cannot be named here (building the model says what is wrong)."""
    try:
        files_of = getattr(MODELS.get(model), "weight_files", None)
        return [] if files_of is None else [Path(f) for f in files_of(**{**model_kwargs(model), **(args or {})})]
    except (OSError, FedreproError):
        return []


def _clip_token_caches(args: Mapping[str, Any] | None) -> list[tuple[str, Path]]:
    """A frozen CLIP's token caches in the data root (:func:`fedrepro.models.clip_cache.image_tokens`):
    which of them a run reads is known only once its images are hashed, so every one is checked."""
    return [("cache file", p) for p in sorted(default_cache_dir().glob("clip_tokens-*.pt"))]


# Files a model's methods read during training besides its weights: caches keyed by content, in the
# data root, where whoever shares the root can plant one.
MODEL_CACHES: dict[str, Callable[[Mapping[str, Any] | None], list[tuple[str, Path]]]] = {
    "clip": _clip_token_caches,
}


def run_input_files(cfg: RunConfig) -> list[tuple[str, Path]]:
    """``(kind, path)`` of every file ``cfg``'s run reads: its dataset's, its model's weights and the
    caches its model's methods read (:data:`MODEL_CACHES`)."""
    caches = MODEL_CACHES.get(cfg.model.name)
    return [*dataset_files(cfg.data.dataset, cfg.data.dataset_args),
            *(("weights file", p) for p in weights_files(cfg.model.name, cfg.model.args)),
            *(caches(cfg.model.args) if caches is not None else [])]


def check_run_inputs(cfg: RunConfig) -> None:
    """A one-line :class:`CorruptCacheError` naming the first file of ``cfg``'s run that must not be read
    (:func:`file_problem`: not a regular file, over its bound, a gzip bomb, a torch file that could
    inflate), and what to do; nothing when every file may be read."""
    for kind, path in run_input_files(cfg):
        problem = file_problem(path, kind)
        if problem is not None:
            raise CorruptCacheError(f"{kind} {path} {problem}; {KINDS[kind]['fix']}")


def forget() -> None:
    """Drop the process's verdicts (tests)."""
    _VERDICTS.clear()


__all__ = ["EXTRA_FILES", "KINDS", "MAX_FILE_BYTES", "MAX_INFLATED_BYTES", "MODEL_CACHES", "check_run_inputs",
           "dataset_files", "file_problem", "memory_bytes", "run_input_files", "weights_files"]
