"""The batches of :func:`lazylab.train.fit`: full batch ("gd"), minibatches of a fixed set
reshuffled every epoch or drawn with replacement ("sgd"), fresh samples every step
("one_pass"). Every random draw comes from the run's generator."""

from __future__ import annotations

from collections.abc import Callable

import torch

Batch = tuple[torch.Tensor, torch.Tensor]
Sampler = Callable[[int, torch.Generator], Batch]


def steps_per_epoch(n: int, batch_size: int) -> int:
    """Updates in one epoch of minibatch SGD over n samples: ceil(n / batch_size)."""
    return -(-int(n) // int(batch_size))


class Batches:
    """Batch t of each optimizer; every random draw comes from ``generator``."""

    def __init__(self, optimizer: str, data: Batch | None, sampler: Sampler | None,
                 batch_size: int | None, sampling: str, generator: torch.Generator | None):
        self.optimizer, self.data, self.sampler = optimizer, data, sampler
        self.b, self.sampling, self.gen = batch_size, sampling, generator
        self._perm: torch.Tensor | None = None
        if optimizer == "sgd":
            assert data is not None and batch_size is not None
            self.n = data[0].shape[0]
            self.per_epoch = steps_per_epoch(self.n, batch_size)

    def __call__(self, t: int) -> Batch:
        if self.optimizer == "gd":
            assert self.data is not None
            return self.data
        if self.optimizer == "one_pass":
            assert self.sampler is not None and self.b is not None and self.gen is not None
            return self.sampler(self.b, self.gen)
        assert self.data is not None and self.b is not None and self.gen is not None
        X, y = self.data
        if self.sampling == "replacement":
            idx = torch.randint(0, self.n, (self.b,), generator=self.gen, device=self.gen.device)
        else:
            j = t % self.per_epoch
            if j == 0 or self._perm is None:
                self._perm = torch.randperm(self.n, generator=self.gen,
                                            device=self.gen.device).to(X.device)
            idx = self._perm[j * self.b:(j + 1) * self.b]
        idx = idx.to(X.device, non_blocking=True)
        return X[idx], y[idx]


