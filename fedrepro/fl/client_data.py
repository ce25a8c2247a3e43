"""A client's data as in-memory tensors; batches are index slices (no DataLoader workers)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator

import torch


@dataclass
class ClientData:
    """One client's train and test split, uint8 images kept on the run's device.

    Normalisation happens per batch (``x.float()/255``, then mean/std), which costs far less than a
    DataLoader and keeps memory at one byte per pixel.
    """

    cid: int
    train_x: torch.Tensor
    train_y: torch.Tensor
    test_x: torch.Tensor
    test_y: torch.Tensor
    mean: torch.Tensor  # [1, C, 1, 1] float
    std: torch.Tensor
    held_out: bool = False
    domain: int | None = None
    # Applied to each uint8 training batch with the loop's generator (``train.augment``,
    # :mod:`fedrepro.data.train_augment`); None leaves batches as stored.
    augment: Callable[[torch.Tensor, torch.Generator], torch.Tensor] | None = None
    # At most this many batches per pass over the training split (``train.max_local_batches``); None: all.
    max_batches: int | None = None

    def _starts(self, batch_size: int) -> range:
        n = self.num_train
        if self.max_batches is not None:
            n = min(n, self.max_batches * batch_size)
        return range(0, n, batch_size)

    @property
    def num_train(self) -> int:
        return int(self.train_y.numel())

    @property
    def num_test(self) -> int:
        return int(self.test_y.numel())

    def normalize(self, x: torch.Tensor) -> torch.Tensor:
        return x.float().div_(255.0).sub_(self.mean).div_(self.std)

    def train_batches(self, batch_size: int,
                      gen: torch.Generator | None) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """One epoch of shuffled mini-batches; the permutation, and each batch's augmentation after it,
        come from ``gen`` (CPU generator)."""
        if self.augment is not None and gen is None:
            raise ValueError("an augmented client's train_batches needs a generator (every draw is seeded)")
        n = self.num_train
        order = torch.randperm(n, generator=gen) if gen is not None else torch.arange(n)
        order = order.to(self.train_x.device)
        for start in self._starts(batch_size):
            idx = order[start:start + batch_size]
            x = self.train_x[idx]
            yield self.normalize(x if self.augment is None else self.augment(x, gen)), self.train_y[idx]

    def test_batches(self, batch_size: int) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        for start in range(0, self.num_test, batch_size):
            yield (self.normalize(self.test_x[start:start + batch_size]), self.test_y[start:start + batch_size])

    def eval_train_batches(self, batch_size: int) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """Unshuffled training batches, for feature extraction and probes."""
        for start in self._starts(batch_size):
            yield (self.normalize(self.train_x[start:start + batch_size]), self.train_y[start:start + batch_size])
