"""What a run is made of: its data, its partition, its clients' splits and its method, all fixed by
the config. With the engine (:mod:`fedrepro.fl.engine`) and the method's, model's and dataset's own
modules, this is the code that determines a run's numbers, and what its code fingerprint covers
(:mod:`fedrepro.runs.fingerprint`); :mod:`fedrepro.execute.run` launches, stores and tabulates runs.
"""
from __future__ import annotations

import json
import warnings
from collections import OrderedDict
from typing import Sequence

import torch

from ..config import RunConfig
from ..data import ImageDataset, load_dataset
from ..data.partition import Partition, make_partition
from ..data.root import data_root
from ..errors import ConfigError, PartitionError
from ..fl.client_data import ClientData
from ..fl.method import FLContext
from ..fl.seeding import numpy_rng
from ..methods import METHODS
from ..data.train_augment import train_augment


# Decoded datasets kept by this process, least recently used first, up to DATA_CACHE_MIB in all:
# notebooks and pool workers run dozens of configs on one dataset and decode it once, while a worker
# that moves on to other datasets does not keep every one it has seen (a domain set is 158 MiB).
DATA_CACHE_MIB = 256
_datasets: OrderedDict[tuple[str, str], ImageDataset] = OrderedDict()


def _nbytes(ds: ImageDataset) -> int:
    return sum(v.element_size() * v.nelement() for v in vars(ds).values() if isinstance(v, torch.Tensor))


def load_cached(name: str, args_json: str) -> ImageDataset:
    # Keyed by the data root too: a process may read real files and rehearsal data (the root
    # "rehearsal:") under the same name and options.
    key = (str(data_root()), name, args_json)
    if key in _datasets:
        _datasets.move_to_end(key)
        return _datasets[key]
    ds = _datasets[key] = load_dataset(name, **json.loads(args_json))
    while len(_datasets) > 1 and sum(map(_nbytes, _datasets.values())) > DATA_CACHE_MIB << 20:
        _datasets.popitem(last=False)
    return ds


def prepare_data(cfg: RunConfig) -> tuple[ImageDataset, Partition]:
    """The (possibly subsampled) dataset and its partition, both determined by the config."""
    d = cfg.data
    ds = load_cached(d.dataset, json.dumps(d.dataset_args, sort_keys=True))
    pseed = cfg.seed if d.partition_seed is None else d.partition_seed
    if d.max_train is not None or d.max_test is not None:
        ds = ds.subset(d.max_train, d.max_test, numpy_rng(pseed, "subset"))
    part = make_partition(
        d.partition, ds.train_y.numpy(), ds.test_y.numpy(), d.num_clients, numpy_rng(pseed, "partition"),
        train_domains=None if ds.train_domain is None else ds.train_domain.numpy(),
        test_domains=None if ds.test_domain is None else ds.test_domain.numpy(),
        train_users=None if ds.train_user is None else ds.train_user.numpy(),
        holdout_clients=d.holdout_clients, **d.partition_args)
    if d.validation > 0:
        ds, part = validation_split(ds, part, d.validation, numpy_rng(pseed, "validation"))
    _check_test_splits(cfg, part)
    return ds, part


def validation_split(ds: ImageDataset, part: Partition, fraction: float, rng) -> tuple[ImageDataset, Partition]:
    """Each client's training split cut in two: ``fraction`` of it (rounded, at least one image of
    a client with two or more) becomes its test split, the rest its training split. The dataset's
    test images become the pooled validation images, so the global test split is their union and
    no test image is read."""
    import dataclasses

    import numpy as np

    keep, val = [], []
    for idx in part.train:
        idx = np.asarray(idx)
        n_val = min(max(int(round(fraction * len(idx))), 1), len(idx) - 1) if len(idx) > 1 else 0
        order = rng.permutation(len(idx))
        val.append(np.sort(idx[order[:n_val]]))
        keep.append(np.sort(idx[order[n_val:]]))
    pooled = np.concatenate(val) if val else np.zeros(0, dtype=np.int64)
    starts = np.cumsum([0] + [len(v) for v in val])
    at = torch.as_tensor(pooled, dtype=torch.long)
    ds = dataclasses.replace(ds, test_x=ds.train_x[at], test_y=ds.train_y[at],
                             test_domain=None if ds.train_domain is None else ds.train_domain[at])
    part = dataclasses.replace(part, train=tuple(keep),
                               test=tuple(np.arange(a, b) for a, b in zip(starts[:-1], starts[1:])),
                               meta={**part.meta, "validation": float(fraction)})
    return ds, part


def _check_test_splits(cfg: RunConfig, part: Partition) -> None:
    """Say so when the partition leaves participating clients without test data: they are left out
    of the means (``n_clients_no_test``), so the score covers fewer clients than configured."""
    held = set(part.held_out)
    participating = [cid for cid in range(part.num_clients) if cid not in held]
    empty = [cid for cid in participating if len(part.test[cid]) == 0]
    if not empty:
        return
    d = cfg.data
    where = (f"data.partition={d.partition!r} with data.partition_args={d.partition_args}"
             + (f" and data.max_test={d.max_test}" if d.max_test is not None else ""))
    fix = ("raise data.max_test or data.partition_args.test_per_client, raise data.partition_args.alpha, "
           "or lower data.num_clients")
    if len(empty) == len(participating):
        raise PartitionError(f"{where} gives none of the {len(participating)} participating clients test data, "
                             f"so there is nothing to score; {fix}")
    warnings.warn(f"{where} leaves {len(empty)} of {len(participating)} participating clients without test data "
                  f"(clients {empty[:10]}{' ...' if len(empty) > 10 else ''}); they are left out of the accuracy "
                  f"means and counted in n_clients_no_test. To score every client: {fix}", stacklevel=3)


def build_clients(ds: ImageDataset, part: Partition, device: torch.device, augment: str = "none",
                  max_batches: int | None = None, max_test: int | None = None) -> list[ClientData]:
    """Each client's splits on ``device``; ``augment`` names the training augmentation
    (``train.augment``), ``max_batches`` caps the batches of a pass over a training split
    (``train.max_local_batches``) and ``max_test`` each client's test images, its first ones
    (``data.max_test_per_client``)."""
    aug = train_augment(augment)
    mean, std = ds.norm_stats
    c = ds.in_channels
    mean_t = torch.tensor(mean, dtype=torch.float32, device=device).view(1, c, 1, 1)
    std_t = torch.tensor(std, dtype=torch.float32, device=device).view(1, c, 1, 1)
    held = set(part.held_out)
    domains = part.meta.get("client_domain")
    clients = []
    for cid, (tr, te) in enumerate(zip(part.train, part.test)):
        tr_t, te_t = torch.tensor(tr, dtype=torch.long), torch.tensor(te, dtype=torch.long)[:max_test]
        clients.append(ClientData(
            cid=cid, train_x=ds.train_x[tr_t].to(device), train_y=ds.train_y[tr_t].to(device),
            test_x=ds.test_x[te_t].to(device), test_y=ds.test_y[te_t].to(device), mean=mean_t, std=std_t,
            held_out=cid in held, domain=None if domains is None else int(domains[cid]), augment=aug,
            max_batches=max_batches))
    return clients


def clients_of(cfg: RunConfig, ds: ImageDataset, part: Partition, device: torch.device) -> list[ClientData]:
    """:func:`build_clients` as ``cfg`` asks for them."""
    return build_clients(ds, part, device, cfg.train.augment, cfg.train.max_local_batches,
                         cfg.data.max_test_per_client)


def global_test_of(cfg: RunConfig, ds: ImageDataset, device: torch.device) -> ClientData:
    """:func:`global_test_split` as ``cfg`` asks for it: with ``data.max_test_per_client`` set, as many
    images as the clients are scored on together."""
    cap = cfg.data.max_test_per_client
    return global_test_split(ds, device, None if cap is None else cap * cfg.data.num_clients)


def global_test_split(ds: ImageDataset, device: torch.device, max_test: int | None = None) -> ClientData:
    """The dataset's whole (possibly subsampled) test split as one pseudo-client, for the global
    model's accuracy (``train.global_eval``), or its first ``max_test`` images. It has no training data."""
    if max_test is not None:
        import dataclasses

        ds = dataclasses.replace(ds, test_x=ds.test_x[:max_test], test_y=ds.test_y[:max_test])
    mean, std = ds.norm_stats
    c = ds.in_channels
    return ClientData(
        cid=-1, train_x=ds.train_x[:0].to(device), train_y=ds.train_y[:0].to(device),
        test_x=ds.test_x.to(device), test_y=ds.test_y.to(device),
        mean=torch.tensor(mean, dtype=torch.float32, device=device).view(1, c, 1, 1),
        std=torch.tensor(std, dtype=torch.float32, device=device).view(1, c, 1, 1))


def make_method(cfg: RunConfig, ds: ImageDataset, device: torch.device):
    return make_method_for(cfg, ds.num_classes, ds.in_channels, ds.image_size, device, class_names=ds.classes)


def make_method_for(cfg: RunConfig, num_classes: int, in_channels: int, image_size: int,
                    device: torch.device | str = "cpu", class_names: Sequence[str] = ()):
    """The configured method for data of a given shape, without loading any data (e.g. to count
    parameters at the paper's scale where the dataset is not installed). ``class_names`` in label
    order, when the method needs them."""
    names = tuple(str(n) for n in class_names)
    if names and len(names) != num_classes:
        raise ConfigError(f"class_names has {len(names)} names for num_classes={num_classes}; valid: one name per "
                          "class, in label order")
    cls = METHODS.get(cfg.method.name)
    ctx = FLContext(cfg=cfg, num_classes=num_classes, in_channels=in_channels, image_size=image_size,
                    device=torch.device(device), num_clients=cfg.data.num_clients, class_names=names)
    return cls(ctx, cls.parse_params(cfg.method.args))
