"""In-memory datasets: columns as tensors, jagged features as (values, offsets), and batching.

Every dataset that fits in memory (movielens100k, synthetic, libfm, csv/parquet) is a
:class:`TabularData`; streaming datasets (criteo) yield Batches directly.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property

import torch
from torchrec.datasets.utils import Batch
from torchrec.sparse.jagged_tensor import KeyedJaggedTensor

from autorec.data.schema import DataError, Schema


@dataclass(frozen=True)
class Jagged:
    """One sparse feature for N samples: sample i holds ``values[offsets[i]:offsets[i+1]]``."""

    values: torch.Tensor  # [nnz] int64
    offsets: torch.Tensor  # [N + 1] int64

    @cached_property
    def one_per_row(self) -> bool:
        """Every sample holds exactly one id (then batching is a plain gather)."""
        n = self.offsets.numel() - 1
        return self.values.numel() == n and bool(torch.equal(self.offsets, torch.arange(n + 1)))

    @staticmethod
    def single(ids: torch.Tensor) -> Jagged:
        """One id per sample."""
        ids = ids.to(torch.int64)
        return Jagged(ids, torch.arange(ids.numel() + 1, dtype=torch.int64))

    @staticmethod
    def from_lengths(values: torch.Tensor, lengths: torch.Tensor) -> Jagged:
        offsets = torch.zeros(lengths.numel() + 1, dtype=torch.int64)
        torch.cumsum(lengths.to(torch.int64), 0, out=offsets[1:])
        return Jagged(values.to(torch.int64), offsets)

    def take(self, idx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Values and lengths of samples ``idx`` (in that order)."""
        if self.one_per_row:
            return self.values[idx], torch.ones(idx.numel(), dtype=torch.int64)
        starts = self.offsets[idx]
        lengths = self.offsets[idx + 1] - starts
        total = int(lengths.sum())
        # Position of each output value inside its sample, then shift by the sample's start.
        within = torch.arange(total, dtype=torch.int64) - torch.repeat_interleave(
            torch.cumsum(lengths, 0) - lengths, lengths, output_size=total)
        values = self.values[torch.repeat_interleave(starts, lengths, output_size=total) + within]
        return values, lengths


@dataclass(frozen=True)
class TabularData:
    """N samples held in memory.

    Args:
        schema: column layout.
        dense: [N, n_dense] float32.
        sparse: one :class:`Jagged` per schema sparse feature, in schema order.
        labels: [N] float32 in {0, 1}.
    """

    schema: Schema
    dense: torch.Tensor
    sparse: tuple[Jagged, ...]
    labels: torch.Tensor

    def __post_init__(self) -> None:
        n = self.labels.numel()
        if self.dense.shape != (n, self.schema.n_dense):
            raise DataError(f"dense has shape {tuple(self.dense.shape)}, expected {(n, self.schema.n_dense)}")
        if len(self.sparse) != len(self.schema.sparse):
            raise DataError(f"{len(self.sparse)} sparse columns for {len(self.schema.sparse)} features")
        for feature, column in zip(self.schema.sparse, self.sparse, strict=True):
            if column.offsets.numel() != n + 1:
                raise DataError(f"feature {feature.name!r} has {column.offsets.numel() - 1} rows, "
                                f"expected {n}")
            if column.values.numel() and (int(column.values.min()) < 0
                                          or int(column.values.max()) >= feature.num_embeddings):
                raise DataError(f"feature {feature.name!r} has ids outside [0, {feature.num_embeddings})")

    def __len__(self) -> int:
        return self.labels.numel()

    @cached_property
    def _single_ids(self) -> tuple[tuple[int, ...], torch.Tensor]:
        """The positions of the sparse columns with one id a sample, and their ids sample-major
        [N, k] (int32 where every table fits, else int64): a batch reads each sample's ids from
        one place instead of one random read per column (on issue 20's ``scale`` workload, 26
        columns of 4M training rows, a batch of 1024 in 0.89 ms instead of 1.54; BENCHMARKS.md,
        "Batches read sample-major"). Built on first use; the price is a copy of those columns."""
        cols = tuple(i for i, column in enumerate(self.sparse) if column.one_per_row)
        if not cols:
            return cols, torch.empty(len(self), 0, dtype=torch.int64)
        top = max(self.schema.sparse[i].num_embeddings for i in cols)
        dtype = torch.int32 if top <= torch.iinfo(torch.int32).max else torch.int64
        return cols, torch.stack([self.sparse[i].values.to(dtype) for i in cols], dim=1)

    def batch(self, idx: torch.Tensor) -> Batch:
        """The samples ``idx`` as one Batch (dense [B, n_dense], KJT, labels [B]).

        Example:
            >>> from autorec.data.schema import Schema, SparseFeature
            >>> schema = Schema(dense=("d",), sparse=(SparseFeature("a", 10), SparseFeature("b", 10, True)))
            >>> data = TabularData(schema, torch.zeros(3, 1), (Jagged.single(torch.tensor([1, 2, 3])),
            ...     Jagged.from_lengths(torch.tensor([4, 5, 6]), torch.tensor([2, 0, 1]))), torch.zeros(3))
            >>> kjt = data.batch(torch.tensor([2, 0])).sparse_features
            >>> kjt.values().tolist(), kjt.lengths().tolist()
            ([3, 1, 6, 4, 5], [1, 1, 1, 2])
        """
        cols, ids = self._single_ids
        rows = ids[idx].to(torch.int64).T if cols else ids  # [k, B]: column j's ids in row j
        single = dict(zip(cols, rows, strict=True))
        ones = torch.ones(idx.numel(), dtype=torch.int64)
        values, lengths = zip(*((single[i], ones) if i in single else column.take(idx)
                                for i, column in enumerate(self.sparse)), strict=True)
        kjt = KeyedJaggedTensor(
            keys=list(self.schema.sparse_names),
            values=torch.cat(values),
            lengths=torch.cat(lengths).to(torch.int32),
        )
        return Batch(dense_features=self.dense[idx], sparse_features=kjt, labels=self.labels[idx])

    def subset(self, idx: torch.Tensor) -> TabularData:
        """A new TabularData of the samples ``idx``."""
        columns = []
        for column in self.sparse:
            values, lengths = column.take(idx)
            columns.append(Jagged.from_lengths(values, lengths))
        return TabularData(self.schema, self.dense[idx], tuple(columns), self.labels[idx])

    def split(self, fractions: tuple[float, ...], seed: int) -> tuple[TabularData, ...]:
        """Random disjoint parts of the given fractions; the same seed gives the same parts."""
        if abs(sum(fractions) - 1.0) > 1e-6 or any(f <= 0 for f in fractions):
            raise ValueError(f"split fractions must be positive and sum to 1, got {fractions}")
        perm = torch.randperm(len(self), generator=torch.Generator().manual_seed(seed))
        bounds = [0]
        for f in fractions[:-1]:
            bounds.append(bounds[-1] + round(f * len(self)))
        bounds.append(len(self))
        return tuple(self.subset(perm[a:b].sort().values) for a, b in itertools.pairwise(bounds))


class TabularBatches(torch.utils.data.IterableDataset):
    """Iterates a TabularData in batches; shuffles by ``seed + epoch`` when ``shuffle``."""

    def __init__(self, data: TabularData, batch_size: int, *, shuffle: bool, seed: int = 0,
                 drop_last: bool = False) -> None:
        super().__init__()
        self.data, self.batch_size, self.shuffle, self.seed = data, batch_size, shuffle, seed
        self.drop_last = drop_last
        self.epoch = 0

    def __len__(self) -> int:
        n = len(self.data)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def _order(self) -> torch.Tensor:
        n = len(self.data)
        if self.shuffle:
            return torch.randperm(n, generator=torch.Generator().manual_seed(self.seed + self.epoch))
        return torch.arange(n)

    def __iter__(self) -> Iterator[Batch]:
        # Under DataLoader workers, worker k makes batches k, k + W, ...; the DataLoader takes
        # them round-robin, so the order is the same as with no workers.
        info = torch.utils.data.get_worker_info()
        first, step = (info.id, info.num_workers) if info else (0, 1)
        return self._batches(range(first, len(self), step))

    def iter_from(self, start: int) -> Iterator[Batch]:
        """The batches from the ``start``-th on (0-based), in :meth:`__iter__`'s order, the ones
        before it never made (a resumed stream goes on without gathering what it had given)."""
        return self._batches(range(max(0, start), len(self)))

    def _batches(self, numbers: range) -> Iterator[Batch]:
        """Batches ``numbers`` of this epoch's order."""
        order = self._order()
        for b in numbers:
            yield self.data.batch(order[b * self.batch_size:(b + 1) * self.batch_size])
