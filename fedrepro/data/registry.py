"""The dataset registry and the one entry point, :func:`load_dataset`.

A loader is ``fn(root: Path, download: bool, **kwargs) -> ImageDataset``
registered with ``@DATASETS.register("name")``. Its keyword arguments are its
documented options; :func:`load_dataset` rejects any other key up front so a
typo in a config never silently falls back to a default.
"""
from __future__ import annotations

import inspect
import json
import os
from typing import Any, Callable

from ..errors import ConfigError, FedreproError
from ..registry import Registry
from .base import ImageDataset
from .digest import dataset_digest, files_digest
from .rehearsal import NO_FILES, Served, load_rehearsal, served
from .root import data_root, download_allowed, is_rehearsal

Loader = Callable[..., ImageDataset]

DATASETS: Registry[Loader] = Registry("dataset")

# Supplied by load_dataset itself, never by the caller's kwargs.
_RESERVED = ("root", "download")


def dataset_options(name: str) -> list[str]:
    """The keyword options the loader registered as ``name`` accepts."""
    loader = DATASETS.get(name)
    params = inspect.signature(loader).parameters
    return [p for p in params if p not in _RESERVED and params[p].kind is not inspect.Parameter.VAR_KEYWORD]


def load_dataset(
    name: str,
    root: str | os.PathLike[str] | None = None,
    download: bool | None = None,
    **kwargs: Any,
) -> ImageDataset:
    """Load dataset ``name`` from the data root (see :func:`fedrepro.data.root.data_root`).

    ``download`` (or ``$FEDREPRO_DOWNLOAD=1``) lets the loader fetch missing
    files; other keyword arguments are the loader's options. At the rehearsal root
    (:data:`~fedrepro.data.root.REHEARSAL_ROOT`) no file is read: a dataset that needs files is
    served by :mod:`fedrepro.data.rehearsal` in its real shape, for the same options.
    """
    loader = DATASETS.get(name)
    _check_options(name, kwargs)
    if is_rehearsal(root) and name not in NO_FILES:
        ds = load_rehearsal(name, _defaults(name), **kwargs)
    else:
        ds = loader(data_root(root), download_allowed(download), **kwargs)
    if not isinstance(ds, ImageDataset):
        raise TypeError(f"dataset loader {name!r} returned {type(ds).__name__}, not ImageDataset")
    return ds


def rehearsal_shape(name: str, **kwargs: Any) -> Served:
    """What ``load_dataset(name, root=REHEARSAL_ROOT, **kwargs)`` serves (image size, classes,
    domains, images per class, the fraction of the real sizes), without making an image."""
    if name in NO_FILES:
        raise ConfigError(f"dataset {name!r} reads no files and is served by its own loader in rehearsal mode too")
    _check_options(name, kwargs)
    return served(name, _defaults(name), **kwargs)


def _check_options(name: str, kwargs: dict[str, Any]) -> None:
    params = inspect.signature(DATASETS.get(name)).parameters
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    valid = dataset_options(name)
    unknown = sorted(k for k in kwargs if k in _RESERVED or (not takes_any and k not in valid))
    if unknown:
        raise ConfigError(
            f"unknown option(s) for dataset {name!r}: {', '.join(unknown)}; "
            f"valid options: {', '.join(valid) or '(none)'}"
        )


def _defaults(name: str) -> dict[str, Any]:
    params = inspect.signature(DATASETS.get(name)).parameters
    return {p: params[p].default for p in dataset_options(name) if params[p].default is not inspect.Parameter.empty}


def input_digest(name: str, args: dict[str, Any] | None = None,
                 root: str | os.PathLike[str] | None = None) -> str | None:
    """sha256 of the files that ``load_dataset(name, root, **args)`` reads, for a dataset whose files
    differ from user to user (its loader's ``input_files(root, **options)`` lists them); a run records
    it, and a stored run is reused only while it is unchanged (:func:`fedrepro.runs.fingerprint.inputs`).

    None where there is nothing to compare: a dataset that reads no files, or only files checked against
    a manifest (Fashion-MNIST and what is rendered from it), the rehearsal root, and files that are not
    here (the run cannot be trained here; what is stored stays readable). Computed once per process,
    dataset, options and data root (:func:`fedrepro.data.digest.dataset_digest`)."""
    files_of = getattr(DATASETS.get(name), "input_files", None)
    if files_of is None or is_rehearsal(root):
        return None
    options = {**_defaults(name), **(args or {})}

    def compute() -> str | None:
        try:
            folder, files = files_of(data_root(root), **options)
            return files_digest(files, folder) if files else None
        except (OSError, FedreproError):  # missing or unreadable: the load itself says what is wrong
            return None

    return dataset_digest((name, json.dumps(options, sort_keys=True, default=str), str(data_root(root))), compute)


def list_datasets() -> list[str]:
    """Names accepted by :func:`load_dataset`, sorted."""
    return DATASETS.names()


__all__ = ["DATASETS", "Loader", "dataset_options", "input_digest", "list_datasets", "load_dataset",
           "rehearsal_shape"]
