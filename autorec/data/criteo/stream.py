"""Criteo rows -> torchrec Batches of one split, streamed per DataLoader worker.

A :class:`Reader` holds what a worker needs (the files, which split each line is in, the id
mapping); worker k of W parses the blocks with ``(file index + block index) % W == k``, so no
line is read twice. :class:`CriteoStream` pools the encoded rows into batches, shuffled within
a buffer when asked.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator
from dataclasses import dataclass

import numpy as np
import torch
from torchrec.datasets.utils import Batch
from torchrec.sparse.jagged_tensor import KeyedJaggedTensor

from autorec.data.criteo.assign import LineSplit
from autorec.data.criteo.blocks import DataFile, line_number, plain_blocks, stream_blocks
from autorec.data.criteo.encode import dense_transform, hashed_ids, vocab_ids
from autorec.data.criteo.parse import SPARSE_NAMES, LineError, Rows, parse_block
from autorec.data.schema import DataError

Encoded = tuple[np.ndarray, np.ndarray, np.ndarray]  # labels [n], dense [n, 13] f32, ids [n, 26]


@dataclass(frozen=True, eq=False)
class Reader:
    """Everything a worker needs to turn the files into encoded rows of one split."""

    files: tuple[DataFile, ...]
    assign: LineSplit  # the split of each line (autorec.data.criteo.assign)
    block_bytes: int
    hash_size: int
    vocabs: tuple[np.ndarray, ...] | None

    def blocks(self, worker: int, num_workers: int, rng: np.random.Generator | None,
               split: int | None = None) -> Iterator[tuple[int, int, bytes]]:
        """(file index, offset, lines) of the blocks of ``worker``, in a seeded order with ``rng``;
        with ``split``, only of the files that may hold lines of it."""
        file_order = np.arange(len(self.files))
        if rng is not None:
            rng.shuffle(file_order)
        for i in (int(i) for i in file_order):
            if split is not None and not self.assign.may_hold(i, split):
                continue
            file = self.files[i]
            if file.gzip:
                for j, offset, data in stream_blocks(file, self.block_bytes):
                    if (i + j) % num_workers == worker:
                        yield i, offset, data
                continue
            order = np.arange(-(-file.size() // self.block_bytes))
            if rng is not None:
                rng.shuffle(order)
            mine = [int(j) for j in order if (i + j) % num_workers == worker]
            for offset, data in plain_blocks(file, self.block_bytes, mine):
                yield i, offset, data

    def parse(self, file_index: int, offset: int, data: bytes) -> Rows:
        try:
            rows = parse_block(data)
        except LineError as err:
            file = self.files[file_index]
            line = line_number(file, offset) + err.row
            raise DataError(f"{file.path}:{line}: {err.message}") from None
        return Rows(rows.offsets + offset, rows.labels, rows.dense, rows.cats, rows.missing)

    def rows(self, split: int, worker: int = 0, num_workers: int = 1,
             rng: np.random.Generator | None = None) -> Iterator[Rows]:
        """Parsed rows of ``split`` (0 train, 1 val, 2 test) from the blocks of ``worker``."""
        for i, offset, data in self.blocks(worker, num_workers, rng, split):
            rows = self.parse(i, offset, data)
            yield rows.take(self.assign.of_lines(rows.offsets, i) == split)

    def encode(self, rows: Rows) -> Encoded:
        """(labels [n], dense [n, 13] float32, ids [n, 26] int64)."""
        if self.vocabs is None:
            ids = hashed_ids(rows.cats, rows.missing, self.hash_size)
        else:
            ids = vocab_ids(rows.cats, rows.missing, self.vocabs)
        return rows.labels, dense_transform(rows.dense), ids


def to_batch(labels: np.ndarray, dense: np.ndarray, ids: np.ndarray) -> Batch:
    kjt = KeyedJaggedTensor(
        keys=list(SPARSE_NAMES),
        values=torch.from_numpy(np.ascontiguousarray(ids.T).reshape(-1)),  # feature-major
        # numpy, not torch.ones: torch's thread pool costs milliseconds per call on a busy CPU.
        lengths=torch.from_numpy(np.ones(ids.size, dtype=np.int32)),
    )
    return Batch(dense_features=torch.from_numpy(np.ascontiguousarray(dense)), sparse_features=kjt,
                 labels=torch.from_numpy(np.ascontiguousarray(labels)))


class CriteoStream(torch.utils.data.IterableDataset):
    """Batches of one split, read from the files as they are iterated (memory stays flat).

    Under a DataLoader with W workers each worker reads its own blocks (see the module doc), so
    the epoch holds every line of the split exactly once. With ``shuffle`` the blocks of plain
    files are visited in a seeded order and rows are shuffled within a buffer of
    ``shuffle_rows``; the order is fixed by ``seed + epoch``. Without it, rows come in file order
    (per worker). Every batch holds ``batch_size`` rows but each worker's last.

    Example:
        >>> from autorec.data.criteo import load_criteo  # doctest: +SKIP
        >>> ds = load_criteo(path="day_0.gz", seed=0)  # doctest: +SKIP
        >>> batch = next(iter(ds.batches("train", 4096, shuffle=False)))  # doctest: +SKIP
        >>> batch.dense_features.shape, batch.sparse_features.keys()[0]  # doctest: +SKIP
        (torch.Size([4096, 13]), 'cat_0')
    """

    def __init__(self, reader: Reader, split: int, batch_size: int, *, shuffle: bool, seed: int,
                 shuffle_rows: int) -> None:
        super().__init__()
        self.reader, self.split, self.batch_size = reader, split, batch_size
        self.shuffle, self.seed, self.shuffle_rows = shuffle, seed, shuffle_rows
        self.epoch = 0

    def __iter__(self) -> Iterator[Batch]:
        info = torch.utils.data.get_worker_info()
        worker, num_workers = (0, 1) if info is None else (info.id, info.num_workers)
        block_rng = row_rng = None
        if self.shuffle:
            block_rng = np.random.default_rng(self.seed + self.epoch)  # same order in every worker
            row_rng = np.random.default_rng([self.seed + self.epoch, worker])
        flush_at = max(self.shuffle_rows, self.batch_size) if self.shuffle else self.batch_size

        pool: list[Encoded] = []
        pooled = 0
        for rows in self.reader.rows(self.split, worker, num_workers, block_rng):
            if len(rows.labels) == 0:
                continue
            pool.append(self.reader.encode(rows))
            pooled += len(rows.labels)
            if pooled >= flush_at:
                pool, pooled = yield from self._flush(pool, row_rng, final=False)
        yield from self._flush(pool, row_rng, final=True)

    def _flush(self, pool: list[Encoded], rng: np.random.Generator | None,
               final: bool) -> Generator[Batch, None, tuple[list[Encoded], int]]:
        """Yield the pooled rows as full batches (and the rest too when ``final``); return the rest."""
        if not pool:
            return [], 0
        labels, dense, ids = (np.concatenate(parts) for parts in zip(*pool, strict=True))
        n = len(labels)
        if rng is not None:
            order = rng.permutation(n)
            labels, dense, ids = labels[order], dense[order], ids[order]
        full = n if final else n - n % self.batch_size
        for start in range(0, full, self.batch_size):
            stop = min(start + self.batch_size, full)
            yield to_batch(labels[start:stop], dense[start:stop], ids[start:stop])
        rest = (labels[full:], dense[full:], ids[full:])
        return ([rest], n - full) if n > full else ([], 0)


# --------------------------------------------------------------------------------------------
# The dataset
