"""Data parallelism: every rank takes its own contiguous part of every global batch.

A run with global batch ``G`` on ``W`` ranks walks the same global batches, in the same order, as
a single process with batch ``G``; rank ``r`` trains on part ``r`` of each (sizes differ by at
most one). So an epoch sees every sample exactly once over all ranks, every rank takes the same
number of steps (no rank waits forever in a collective), and the gradients equal the
single-process ones up to float summation order.

In-memory datasets build only the local part of each batch. Other datasets (streams) are read
whole by every rank and sliced: correct for any :class:`~autorec.data.RecDataset`, at ``W``
times the reading cost (torchrec and torch.utils.data have no partitioner for jagged streams).

Example:
    >>> rank_slice(10, rank=1, world_size=4)
    (3, 6)
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import torch
from torchrec.datasets.utils import Batch
from torchrec.sparse.jagged_tensor import KeyedJaggedTensor

from autorec.data.base import InMemoryDataset, RecDataset
from autorec.data.tabular import TabularBatches, TabularData


def rank_slice(n: int, rank: int, world_size: int) -> tuple[int, int]:
    """[start, stop) of ``rank``'s contiguous part of ``n`` items; part sizes differ by <= 1."""
    base, extra = divmod(n, world_size)
    start = rank * base + min(rank, extra)
    return start, start + base + (1 if rank < extra else 0)


def slice_batch(batch: Batch, start: int, stop: int) -> Batch:
    """Samples ``start:stop`` of ``batch`` (dense [B, n_dense], KJT with B per key, labels [B])."""
    kjt = batch.sparse_features
    lengths = kjt.lengths().view(len(kjt.keys()), -1)  # [F, B]
    offsets = kjt.offsets().view(-1)
    b = lengths.shape[1]
    # values of feature f, samples start:stop, sit at offsets[f * B + start] : offsets[f * B + stop]
    pieces = [kjt.values()[offsets[f * b + start]:offsets[f * b + stop]] for f in range(lengths.shape[0])]
    sparse = KeyedJaggedTensor(keys=kjt.keys(), values=torch.cat(pieces),
                               lengths=lengths[:, start:stop].reshape(-1),
                               weights=None)
    return Batch(dense_features=batch.dense_features[start:stop], sparse_features=sparse,
                 labels=batch.labels[start:stop])


class _Indices:
    """Stands in for TabularData so that TabularBatches yields each global batch's sample indices."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def batch(self, idx: torch.Tensor) -> torch.Tensor:
        return idx


class RankBatches(torch.utils.data.IterableDataset):
    """Rank ``rank``'s parts of the global batches of an in-memory split.

    The global batches are exactly those of ``TabularBatches(data, batch_size, shuffle, seed)``
    (its own code orders and cuts them, DataLoader worker split included); only this rank's
    part of each is gathered from ``data``.
    """

    def __init__(self, data: TabularData, batch_size: int, *, shuffle: bool, seed: int, epoch: int,
                 rank: int, world_size: int) -> None:
        super().__init__()
        self.data, self.rank, self.world_size = data, rank, world_size
        self.indices = TabularBatches(_Indices(len(data)), batch_size, shuffle=shuffle,  # type: ignore[arg-type]
                                      seed=seed)
        self.indices.epoch = epoch

    def __len__(self) -> int:
        return len(self.indices)

    def __iter__(self) -> Iterator[Batch]:
        for idx in self.indices:
            start, stop = rank_slice(idx.numel(), self.rank, self.world_size)
            yield self.data.batch(idx[start:stop])


class _SlicedStream:
    """Every global batch of ``source``, cut to this rank's part."""

    def __init__(self, source: Iterable[Batch], rank: int, world_size: int) -> None:
        self.source, self.rank, self.world_size = source, rank, world_size

    def __iter__(self) -> Iterator[Batch]:
        for batch in self.source:
            yield slice_batch(batch, *rank_slice(batch.labels.numel(), self.rank, self.world_size))


def rank_batches(dataset: RecDataset, split: str, batch_size: int, *, shuffle: bool, seed: int,
                 epoch: int, rank: int, world_size: int, num_workers: int = 0) -> Iterable[Batch]:
    """This rank's part of each global batch of ``split`` (``batch_size`` is the global batch).

    With ``world_size == 1`` it is exactly ``dataset.loader(...)``.
    """
    if world_size == 1:
        return dataset.loader(split, batch_size, shuffle=shuffle, seed=seed, epoch=epoch,
                              num_workers=num_workers)
    if isinstance(dataset, InMemoryDataset):
        if split not in dataset.splits:
            raise KeyError(f"unknown split {split!r}; expected one of {', '.join(dataset.splits)}")
        source = RankBatches(dataset.splits[split], batch_size, shuffle=shuffle, seed=seed,
                             epoch=epoch, rank=rank, world_size=world_size)
        if num_workers == 0:
            return source
        return torch.utils.data.DataLoader(source, batch_size=None, num_workers=num_workers,
                                           prefetch_factor=2, pin_memory=torch.cuda.is_available())
    return _SlicedStream(dataset.loader(split, batch_size, shuffle=shuffle, seed=seed, epoch=epoch,
                                        num_workers=num_workers), rank, world_size)
