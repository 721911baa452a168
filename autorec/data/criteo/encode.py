"""What a parsed Criteo row becomes: hashed or vocabulary ids, log1p dense values, its split.

Ids: 0 means "empty field"; hashed ids are ``1 + mix64(value) % (hash_size - 1)``; vocabulary ids
give values seen often enough in the train split ids from 2 up and the rest the OOV id 1. The
split of a line is a seeded hash of its position (file index, byte offset), so it does not
depend on how the file is read.

Example:
    >>> import numpy as np
    >>> hashed_ids(np.array([[7, 7]], dtype=np.uint64), np.array([[False, True]]), 100)[0, 1]
    np.int64(0)
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from autorec.data.criteo.parse import N_SPARSE
from autorec.data.hashing import mix64

MISSING_ID, OOV_ID, FIRST_VOCAB_ID = 0, 1, 2


def hashed_ids(values: np.ndarray, missing: np.ndarray, hash_size: int) -> np.ndarray:
    """Ids in [0, hash_size) of raw categorical values: 0 for missing, else 1 + mix64 % (size-1)."""
    ids = (mix64(values) % np.uint64(hash_size - 1)).astype(np.int64) + 1
    ids[missing] = MISSING_ID
    return ids


def split_of_lines(offsets: np.ndarray, file_index: int, seed: int,
                   fractions: tuple[float, float, float]) -> np.ndarray:
    """Split index (0 train, 1 val, 2 test) of the lines at byte ``offsets`` of file ``file_index``."""
    salt = mix64(np.array([(seed * 1_000_003 + file_index) % 2**64], dtype=np.uint64))
    u = (mix64(offsets.astype(np.int64).view(np.uint64) ^ salt) >> np.uint64(11)).astype(np.float64)
    u *= 2.0 ** -53
    bounds = np.cumsum(fractions[:-1])
    return np.searchsorted(bounds, u, side="right").astype(np.int8)


class VocabCounter:
    """Counts of the categorical values of each feature, merged a chunk at a time."""

    def __init__(self) -> None:
        empty = (np.empty(0, np.uint64), np.empty(0, np.int64))
        self.tables = [empty] * N_SPARSE
        self.pending: list[list[tuple[np.ndarray, np.ndarray]]] = [[] for _ in range(N_SPARSE)]
        self.pending_size = [0] * N_SPARSE

    def add(self, cats: np.ndarray, missing: np.ndarray) -> None:
        for f in range(N_SPARSE):
            values, counts = np.unique(cats[~missing[:, f], f], return_counts=True)
            self.pending[f].append((values, counts))
            self.pending_size[f] += values.size
            if self.pending_size[f] > max(1 << 20, self.tables[f][0].size):
                self._merge(f)

    def _merge(self, f: int) -> None:
        parts = [self.tables[f], *self.pending[f]]
        values, inverse = np.unique(np.concatenate([p[0] for p in parts]), return_inverse=True)
        counts = np.bincount(inverse, weights=np.concatenate([p[1] for p in parts]))
        self.tables[f] = (values, counts.astype(np.int64))
        self.pending[f], self.pending_size[f] = [], 0

    def vocabularies(self, min_count: int) -> list[np.ndarray]:
        """Sorted values seen at least ``min_count`` times, per feature."""
        for f in range(N_SPARSE):
            self._merge(f)
        return [values[counts >= min_count] for values, counts in self.tables]


def vocab_ids(values: np.ndarray, missing: np.ndarray, vocabs: Sequence[np.ndarray]) -> np.ndarray:
    """Ids of raw values [n, 26] through sorted per-feature vocabularies: 0 missing, 1 OOV, 2+."""
    ids = np.empty(values.shape, dtype=np.int64)
    for f, vocab in enumerate(vocabs):
        column = values[:, f]
        if vocab.size == 0:
            ids[:, f] = OOV_ID
            continue
        pos = np.searchsorted(vocab, column)
        found = vocab[np.minimum(pos, vocab.size - 1)] == column
        ids[:, f] = np.where(found, pos + FIRST_VOCAB_ID, OOV_ID)
    ids[missing] = MISSING_ID
    return ids


def dense_transform(counts: np.ndarray) -> np.ndarray:
    """log1p(max(x, 0)) as float32: negative counts are clipped to 0, as DLRM does."""
    return np.log1p(np.maximum(counts, 0).astype(np.float32))
