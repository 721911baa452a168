"""The dataset interface every source implements, and the prefetching loader."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable
from typing import Any

import torch
from torchrec.datasets.utils import Batch

from autorec.data.schema import Schema
from autorec.data.tabular import TabularBatches, TabularData

SPLITS = ("train", "val", "test")


def check_batches(split: str, batch_size: int) -> None:
    """The arguments of :meth:`RecDataset.batches`: a known split and a positive batch size."""
    if split not in SPLITS:
        raise KeyError(f"unknown split {split!r}; expected one of {', '.join(SPLITS)}")
    if batch_size < 1:
        raise ValueError(f"batch_size must be positive, got {batch_size}")


class RecDataset(ABC):
    """A labelled CTR dataset with deterministic train/val/test splits.

    Subclasses give ``name``, ``schema`` and :meth:`batches`; the trainer only sees Batches.
    """

    name: str
    schema: Schema

    @abstractmethod
    def batches(self, split: str, batch_size: int, *, shuffle: bool, seed: int = 0,
                epoch: int = 0) -> Iterable[Batch]:
        """An iterable of Batches of ``split`` (one of train, val, test)."""

    def num_rows(self, split: str) -> int | None:
        """Samples in ``split``, or None when the source streams and does not know."""
        return None

    def describe(self) -> dict[str, Any]:
        """Schema and sizes, for ``autorec data describe``."""
        return {
            "name": self.name,
            "dense": list(self.schema.dense),
            "sparse": [{"name": f.name, "num_embeddings": f.num_embeddings, "multi_hot": f.multi_hot}
                       for f in self.schema.sparse],
            "rows": {s: self.num_rows(s) for s in SPLITS},
        }

    def loader(self, split: str, batch_size: int, *, shuffle: bool, seed: int = 0, epoch: int = 0,
               num_workers: int = 1) -> Iterable[Batch]:
        """:meth:`batches` behind a DataLoader whose workers prefetch two batches ahead."""
        source = self.batches(split, batch_size, shuffle=shuffle, seed=seed, epoch=epoch)
        if num_workers == 0 or not isinstance(source, torch.utils.data.IterableDataset):
            return source
        return torch.utils.data.DataLoader(source, batch_size=None, num_workers=num_workers,
                                           prefetch_factor=2, pin_memory=torch.cuda.is_available())


class InMemoryDataset(RecDataset):
    """A dataset whose splits are TabularData held in memory."""

    def __init__(self, name: str, splits: dict[str, TabularData]) -> None:
        if set(splits) != set(SPLITS):
            raise ValueError(f"expected splits {SPLITS}, got {sorted(splits)}")
        self.name = name
        self.splits = splits
        self.schema = splits["train"].schema

    @classmethod
    def from_table(cls, name: str, data: TabularData, seed: int,
                   fractions: tuple[float, float, float] = (0.8, 0.1, 0.1)) -> InMemoryDataset:
        """A random split of ``data`` (80/10/10 by default), fixed by ``seed``."""
        return cls(name, dict(zip(SPLITS, data.split(fractions, seed), strict=True)))

    def batches(self, split: str, batch_size: int, *, shuffle: bool, seed: int = 0,
                epoch: int = 0) -> TabularBatches:
        if split not in self.splits:
            raise KeyError(f"unknown split {split!r}; expected one of {', '.join(SPLITS)}")
        source = TabularBatches(self.splits[split], batch_size, shuffle=shuffle, seed=seed)
        source.epoch = epoch
        return source

    def num_rows(self, split: str) -> int:
        return len(self.splits[split])
