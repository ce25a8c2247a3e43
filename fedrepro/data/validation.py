"""A validation version of any registered dataset: its test split replaced by training images held out.

``validation`` loads dataset ``of`` and moves a seeded random ``size`` of its training images into
the test fields; the test split itself is dropped, so nothing a run scores on it has seen a test
image. Runs on it choose hyperparameters (e.g. pFedCSPC's PMI temperature τ_p) by validation
accuracy. The partitioner then gives each client its validation images as it gives it test images
(at pFedCSPC's profiles: shaped like the client's training split), so each client's validation split
comes from training images it never trains on. Where ``data.max_train`` subsamples the training
split (the laptop profile) the clients keep the training size of the runs the choice is for; on a
whole dataset they train on ``size`` fewer images.
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import torch

from ..errors import ConfigError
from .base import ImageDataset
from .registry import DATASETS


def hold_out(ds: ImageDataset, size: int | None = None, seed: int = 0) -> ImageDataset:
    """``ds`` with ``size`` training images (default: as many as its test split has), drawn by a
    generator seeded with ``seed``, as its test split and the rest as its training split."""
    n = len(ds.train_y)
    size = len(ds.test_y) if size is None else size
    if isinstance(size, bool) or not isinstance(size, int) or not 1 <= size < n:
        raise ConfigError(f"validation size={size!r}; valid: an integer in [1, {n}) (the training images of "
                          f"{ds.name!r}), or None for the size of its test split ({len(ds.test_y)})")
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(int(seed)))
    val, train = perm[:size].sort().values, perm[size:].sort().values
    dom = ds.train_domain
    return replace(ds, name=f"{ds.name}_validation", train_x=ds.train_x[train], train_y=ds.train_y[train],
                   test_x=ds.train_x[val], test_y=ds.train_y[val], classes=list(ds.classes),
                   train_domain=None if dom is None else dom[train], test_domain=None if dom is None else dom[val])


@DATASETS.register("validation")
def load_validation(root: Path, download: bool, of: str = "fashion_mnist", of_args: dict | None = None,
                    size: int | None = None, seed: int = 0) -> ImageDataset:
    """Dataset ``of`` (with loader options ``of_args``) split by :func:`hold_out`."""
    if of == "validation":
        raise ConfigError("dataset_args.of='validation'; valid: any other registered dataset")
    if of_args is not None and not isinstance(of_args, dict):
        raise ConfigError(f"dataset_args.of_args={of_args!r}; valid: a mapping of {of!r}'s loader options")
    from .registry import load_dataset

    return hold_out(load_dataset(of, root, download, **(of_args or {})), size, seed)
