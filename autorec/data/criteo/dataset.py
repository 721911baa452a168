"""``load_criteo``: Criteo TSV file(s) opened as a streaming RecDataset (see the package doc).

Opening checks every file's first line, cuts the files at ``max_rows``, for a sequential split
counts the lines (:mod:`autorec.data.criteo.assign`) and, for vocabulary ids, makes the one pass
over the train split that counts the values. With ``cache=`` all of that, and one parse of every
line, happens only when the column cache has no entry for these files and options
(:mod:`autorec.data.criteo.cache`).
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from typing import Any

from autorec.data.base import SPLITS, RecDataset, check_batches
from autorec.data.criteo.assign import FileSplits, LineSplit, RandomLines, SequentialLines
from autorec.data.criteo.blocks import DataFile, cut_at_rows, gzip_error, list_files
from autorec.data.criteo.cache import CachedCriteo, cache_key
from autorec.data.criteo.encode import FIRST_VOCAB_ID, VocabCounter
from autorec.data.criteo.parse import DENSE_NAMES, N_DENSE, N_SPARSE, SPARSE_NAMES, LineError, parse_block
from autorec.data.criteo.stream import CriteoStream, Reader
from autorec.data.files import open_binary
from autorec.data.schema import DataError, Schema, SparseFeature
from autorec.data.splits import DEFAULT_FRACTIONS, SPLIT_KINDS, SPLIT_NAMES, named_split_files

DEFAULT_HASH_SIZE = 1 << 20
DEFAULT_BLOCK_BYTES = 1 << 20
DEFAULT_SHUFFLE_ROWS = 1 << 17


class CriteoDataset(RecDataset):
    """Criteo TSV files behind the RecDataset interface; see the module doc for the layout."""

    def __init__(self, reader: Reader, *, name: str = "criteo", shuffle_rows: int = DEFAULT_SHUFFLE_ROWS,
                 rows: dict[str, int] | None = None, min_count: int | None = None) -> None:
        self.reader, self.name, self.shuffle_rows = reader, name, shuffle_rows
        self._rows, self.min_count = rows, min_count
        if reader.vocabs is None:
            sizes = [reader.hash_size] * N_SPARSE
        else:
            sizes = [FIRST_VOCAB_ID + v.size for v in reader.vocabs]
        self.schema = Schema(DENSE_NAMES, tuple(SparseFeature(n, s) for n, s in zip(SPARSE_NAMES, sizes,
                                                                                      strict=True)))

    def batches(self, split: str, batch_size: int, *, shuffle: bool, seed: int = 0,
                epoch: int = 0) -> CriteoStream:
        check_batches(split, batch_size)
        stream = CriteoStream(self.reader, SPLITS.index(split), batch_size, shuffle=shuffle, seed=seed,
                              shuffle_rows=self.shuffle_rows)
        stream.epoch = epoch
        return stream

    def num_rows(self, split: str) -> int | None:
        """Known after a vocabulary pass or a sequential split's count; else None (never counted)."""
        return None if self._rows is None else self._rows[split]

    def describe(self) -> dict[str, Any]:
        out = super().describe()
        out.update(
            files=[str(f.path) for f in self.reader.files],
            gzip=[f.gzip for f in self.reader.files],
            ids=("hashed" if self.reader.vocabs is None else f"vocabulary (min_count={self.min_count})"),
            split=self.reader.assign.describe(),
        )
        return out



def _check_head(file: DataFile) -> None:
    """Fail early on an empty, unreadable or wrongly laid-out file: parse its first line."""
    try:
        with open_binary(file.path) as f:
            head = f.readline(1 << 20)
    except (EOFError, OSError, zlib.error) as err:
        raise gzip_error(file, 0, err) from None
    if not head:
        raise DataError(f"{file.path}: file is empty; expected Criteo TSV lines "
                        f"(label, {N_DENSE} integers, {N_SPARSE} hex ids)")
    try:
        parse_block(head)
    except LineError as err:
        raise DataError(f"{file.path}:1: {err.message}") from None


def _check_fractions(fractions: Sequence[float]) -> tuple[float, float, float]:
    if len(fractions) != 3 or any(f < 0 for f in fractions) or abs(sum(fractions) - 1) > 1e-6 \
            or fractions[0] <= 0:
        raise DataError(f"fractions: expected 3 non-negative shares (train > 0) summing to 1, "
                        f"got {list(fractions)}")
    return (float(fractions[0]), float(fractions[1]), float(fractions[2]))


def _line_split(path: str | None, seed: int, split: str | None, fractions: Sequence[float] | None,
                named: dict[str, str] | None, max_rows: int | None) -> tuple[tuple[DataFile, ...], LineSplit]:
    """The files (checked, cut at ``max_rows``) and the split of their lines the options name."""
    if named:
        files: list[DataFile] = []
        split_of_file: list[int] = []
        for s, name in enumerate(SPLIT_NAMES):  # max_rows: the first lines of each split's files
            mine = _opened(named[name], max_rows)
            files += mine
            split_of_file += [s] * len(mine)
        return tuple(files), FileSplits(tuple(split_of_file))
    if path is None:
        raise DataError("criteo needs path=: a Criteo TSV file (plain or gzip) or a directory of them, "
                        "or train=, valid= and test= (one per split)")
    kind = "random" if split is None else split
    if kind not in SPLIT_KINDS:
        raise DataError(f"split: expected one of {', '.join(SPLIT_KINDS)}, got {kind!r}")
    shares = _check_fractions(DEFAULT_FRACTIONS if fractions is None else fractions)
    opened = tuple(_opened(path, max_rows))
    if kind == "sequential":
        return opened, SequentialLines.of_files(opened, shares)
    return opened, RandomLines(seed, shares)


def _opened(path: str, max_rows: int | None) -> list[DataFile]:
    files = list_files(path)
    for file in files:
        _check_head(file)
    return files if max_rows is None else cut_at_rows(files, max_rows)


def load_criteo(path: str | None = None, seed: int = 0, *, hash_size: int | None = None,
                vocab_min_count: int | None = None, max_rows: int | None = None,
                split: str | None = None, fractions: Sequence[float] | None = None,
                train: str | None = None, valid: str | None = None, test: str | None = None,
                block_bytes: int = DEFAULT_BLOCK_BYTES,
                shuffle_rows: int = DEFAULT_SHUFFLE_ROWS,
                cache: str | None = None) -> CriteoDataset | CachedCriteo:
    """Open Criteo TSV file(s) at ``path`` as a streaming dataset.

    Args:
        path: a Criteo TSV file, plain or gzip, or a directory of them (read in natural order).
        seed: fixes the train/val/test assignment of every line (``split: random``).
        hash_size: rows of each embedding table in hashed mode (default 2**20); id 0 is "empty".
        vocab_min_count: switch to vocabulary ids: values seen at least this often in the train
            split get their own id, the rest share the OOV id 1. Costs one pass at opening.
        max_rows: read only the first ``max_rows`` lines (across the files, in order; with split
            files, of each split's files).
        split: ``random`` (default: each line by a seeded hash of its position) or
            ``sequential`` (file order: the last lines are held out; opening counts the lines).
        fractions: train/val/test shares of the lines (default 0.8/0.1/0.1); val and test may be 0.
        train, valid, test: a file or directory per split instead of ``path`` (a published split).
        block_bytes: unit of reading, parsing and sharing among DataLoader workers.
        shuffle_rows: rows shuffled together when ``batches(shuffle=True)``.
        cache: a folder for a binary column cache (:mod:`autorec.data.criteo.cache`): the files
            are parsed once, on the first open, and every later open trains from the mapped
            columns (globally shuffled) instead of parsing again. None: stream the files.

    Example:
        >>> ds = load_criteo(path="train.txt", seed=0, hash_size=1 << 18)  # doctest: +SKIP
        >>> ds.schema.n_dense, len(ds.schema.sparse)  # doctest: +SKIP
        (13, 26)
    """
    if hash_size is not None and vocab_min_count is not None:
        raise ValueError("give either hash_size (hashed ids) or vocab_min_count (vocabulary ids), not both")
    hash_size = DEFAULT_HASH_SIZE if hash_size is None else int(hash_size)
    if hash_size < 2:
        raise ValueError(f"hash_size must be at least 2 (id 0 is kept for empty fields), got {hash_size}")
    if vocab_min_count is not None and vocab_min_count < 1:
        raise ValueError(f"vocab_min_count must be at least 1, got {vocab_min_count}")
    if max_rows is not None and max_rows < 1:
        raise ValueError(f"max_rows must be positive, got {max_rows}")
    if block_bytes < 1:
        raise ValueError(f"block_bytes must be positive, got {block_bytes}")

    named = named_split_files("criteo", path, split, fractions, train, valid, test)

    def make_reader() -> tuple[Reader, dict[str, int] | None]:
        files, assign = _line_split(path, seed, split, fractions, named, max_rows)
        reader = Reader(files, assign, block_bytes, hash_size, None)
        if vocab_min_count is None:
            counted = isinstance(assign, SequentialLines)
            return reader, dict(zip(SPLITS, assign.rows, strict=True)) if counted else None
        counter, rows = VocabCounter(), dict.fromkeys(SPLITS, 0)
        for i, offset, data in reader.blocks(0, 1, None):
            parsed = reader.parse(i, offset, data)
            of_lines = assign.of_lines(parsed.offsets, i)
            for s, name in enumerate(SPLITS):
                rows[name] += int((of_lines == s).sum())
            kept = parsed.take(of_lines == 0)
            counter.add(kept.cats, kept.missing)
        vocabs = tuple(counter.vocabularies(vocab_min_count))
        return Reader(reader.files, assign, block_bytes, hash_size, vocabs), rows

    if cache is not None and (named or path is not None):
        sources = [f for p in (named.values() if named else [path]) for f in list_files(p)]
        options = {"seed": seed, "split": split, "fractions": fractions, "named": bool(named),
                   "max_rows": max_rows, "hash_size": None if vocab_min_count else hash_size,
                   "vocab_min_count": vocab_min_count}
        return CachedCriteo(cache, cache_key(sources, options), lambda: make_reader()[0],
                            min_count=vocab_min_count)
    reader, rows = make_reader()
    return CriteoDataset(reader, shuffle_rows=shuffle_rows, rows=rows, min_count=vocab_min_count)
