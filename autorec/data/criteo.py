"""Criteo click logs (Kaggle Display Advertising, Terabyte): a streaming reader of the TSV layout.

Each line is ``label<TAB>I1..I13<TAB>C1..C26``: a 0/1 label, 13 decimal integer counts and 26
categorical ids written as hex; every field but the label may be empty. Files are plain or gzip
(told apart by their magic bytes, not their suffix); ``path`` is one file or a directory of part
files (Terabyte's ``day_0 .. day_23``), read in natural order.

What a sample becomes:

* dense ``int_0..int_12``: ``log1p(max(x, 0))`` as DLRM does; an empty field is 0, and the
  negative counts of the Kaggle data (-1, -2, -3 in I2) are clipped to 0 as well.
* sparse ``cat_0..cat_25``, one id each, id 0 meaning "empty field". Ids are either hashed
  (default): ``1 + mix64(value) % (hash_size - 1)``, or, with ``vocab_min_count``, looked up in a
  vocabulary built from the train split (one pass over the file when the dataset is opened):
  values seen at least ``vocab_min_count`` times get ids from 2 up, the rest share the OOV id 1.

Splits are drawn per line by a seeded hash of the line's position (file index, byte offset), so
every split streams the file once, in file order, and the same seed gives the same split whatever
the number of DataLoader workers. Workers share the file by blocks of ``block_bytes``: worker k of
W parses the blocks with ``(file index + block index) % W == k`` and no line is read twice. Plain
files are read only at the blocks a worker owns; a gzip stream cannot seek, so each worker
decompresses all of it and parses its own blocks.

Parsing is vectorised with numpy over a block at a time; when a block holds a malformed line the
error names the file and the line number (counted only then) and says what was expected.
"""

from __future__ import annotations

import gzip
import re
import zlib
from collections.abc import Generator, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import torch
from torchrec.datasets.utils import Batch
from torchrec.sparse.jagged_tensor import KeyedJaggedTensor

from autorec.data.base import SPLITS, RecDataset
from autorec.data.hashing import mix64
from autorec.data.schema import DataError, Schema, SparseFeature

N_DENSE, N_SPARSE = 13, 26
N_FIELDS = 1 + N_DENSE + N_SPARSE
# torchrec's names (torchrec.datasets.criteo), so its DLRM recipes find the features they expect.
DENSE_NAMES = tuple(f"int_{i}" for i in range(N_DENSE))
SPARSE_NAMES = tuple(f"cat_{i}" for i in range(N_SPARSE))
MISSING_ID, OOV_ID, FIRST_VOCAB_ID = 0, 1, 2
DEFAULT_HASH_SIZE = 1 << 20
DEFAULT_BLOCK_BYTES = 1 << 20
DEFAULT_SHUFFLE_ROWS = 1 << 17
GZIP_MAGIC = b"\x1f\x8b"

_MAX_DECIMAL_DIGITS = 18  # fits int64
_MAX_HEX_DIGITS = 16  # fits uint64
# Byte -> digit value, 255 for a byte that is no digit.
_HEX_LUT = np.full(256, 255, dtype=np.uint8)
_HEX_LUT[list(b"0123456789abcdef")] = np.arange(16)
_HEX_LUT[list(b"ABCDEF")] = np.arange(10, 16)
_DEC_LUT = np.full(256, 255, dtype=np.uint8)
_DEC_LUT[list(b"0123456789")] = np.arange(10)
# _KEEP[k]: the last k bytes of a little-endian 8-byte word; _HIGH: the high nibble of each byte.
_KEEP = np.array([0] + [(2**64 - 1) << (8 * (8 - k)) & (2**64 - 1) for k in range(1, 9)], dtype=np.uint64)
_HIGH = np.uint64(0xF0F0F0F0F0F0F0F0)
_PAD = 24  # zero bytes before a block, so every 8-byte word read back from a field end exists


# --------------------------------------------------------------------------------------------
# Files


def is_gzip(path: str | Path) -> bool:
    """Whether ``path`` starts with the gzip magic bytes (whatever its suffix)."""
    with open(path, "rb") as f:
        return f.read(2) == GZIP_MAGIC


def open_binary(path: str | Path) -> BinaryIO:
    """``path`` opened for reading bytes, decompressed when it is gzip."""
    return gzip.open(path, "rb") if is_gzip(path) else open(path, "rb")


@dataclass(frozen=True)
class _File:
    path: Path
    gzip: bool
    end: int | None = None  # decompressed bytes to read (a max_rows cut); None: to the end

    def size(self) -> int:
        """Bytes to read; only for plain files."""
        return self.path.stat().st_size if self.end is None else self.end


def _natural_key(path: Path) -> list[Any]:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", path.name)]


def _list_files(path: str | Path | None) -> list[_File]:
    if path is None:
        raise DataError("criteo needs path=: a Criteo TSV file (plain or gzip) or a directory of them")
    root = Path(path)
    if root.is_dir():
        paths = sorted((p for p in root.iterdir() if p.is_file() and not p.name.startswith(".")),
                       key=_natural_key)
        if not paths:
            raise DataError(f"{root}: directory holds no files")
    elif root.is_file():
        paths = [root]
    else:
        raise DataError(f"{root}: no such file or directory")
    return [_File(p, is_gzip(p)) for p in paths]


def _gzip_error(file: _File, offset: int, err: Exception) -> DataError:
    return DataError(f"{file.path}: truncated or corrupt gzip stream after {offset} decompressed bytes "
                     f"({type(err).__name__}: {err})")


def _line_number(file: _File, offset: int) -> int:
    """1-based number of the line starting at byte ``offset`` (counted on demand: errors only)."""
    newlines, done = 0, 0
    with open_binary(file.path) as f:
        while done < offset:
            piece = f.read(min(1 << 20, offset - done))
            if not piece:
                break
            newlines += piece.count(b"\n")
            done += len(piece)
    return newlines + 1


def _next_line_start(f: BinaryIO, start: int) -> int:
    """Offset of the first line starting at or after ``start`` (> 0) in a seekable file."""
    f.seek(start - 1)
    pos = start - 1
    while piece := f.read(1 << 16):
        i = piece.find(b"\n")
        if i >= 0:
            return pos + i + 1
        pos += len(piece)
    return pos


def _rest_of_line(f: BinaryIO) -> bytes:
    """Bytes from the current position through the next newline (or the end of the file)."""
    parts = []
    while piece := f.read(1 << 16):
        i = piece.find(b"\n")
        if i >= 0:
            parts.append(piece[:i + 1])
            break
        parts.append(piece)
    return b"".join(parts)


def _plain_blocks(file: _File, block_bytes: int, order: Sequence[int]) -> Iterator[tuple[int, bytes]]:
    """(offset, lines) of blocks ``order``: block j holds the lines starting in [j*B, (j+1)*B)."""
    end = file.size()
    with open(file.path, "rb") as f:
        for j in order:
            start, stop = j * block_bytes, min((j + 1) * block_bytes, end)
            first = 0 if j == 0 else _next_line_start(f, start)
            if first >= stop:
                continue
            f.seek(first)
            data = f.read(stop - first)
            if not data.endswith(b"\n"):
                data += _rest_of_line(f)
            yield first, data


def _stream_blocks(file: _File, block_bytes: int) -> Iterator[tuple[int, int, bytes]]:
    """(block index, offset, lines) of every block of a stream, in order (same blocks as above)."""
    pending, base = bytearray(), 0  # pending starts at a line start, at offset base
    with open_binary(file.path) as f:
        eof = False
        while not eof:
            try:
                piece = f.read(block_bytes)
            except (EOFError, OSError, zlib.error) as err:
                raise _gzip_error(file, base + len(pending), err) from None
            pending += piece
            eof = not piece
            if file.end is not None and base + len(pending) >= file.end:
                del pending[file.end - base:]
                eof = True
            while pending:
                j = base // block_bytes
                # The block's last line is the one holding byte (j+1)*B - 1.
                cut = pending.find(b"\n", max((j + 1) * block_bytes - 1 - base, 0)) + 1
                if cut == 0:
                    if not eof:
                        break
                    cut = len(pending)
                yield j, base, bytes(pending[:cut])
                del pending[:cut]
                base += cut


# --------------------------------------------------------------------------------------------
# Parsing


class _LineError(Exception):
    """A malformed line at ``row`` of a block; converted to a DataError naming file:line."""

    def __init__(self, row: int, message: str) -> None:
        super().__init__(message)
        self.row, self.message = row, message


@dataclass(frozen=True)
class _Rows:
    """Parsed lines of one block, before splitting and id mapping."""

    offsets: np.ndarray  # [n] int64, byte offset of each line
    labels: np.ndarray  # [n] float32
    dense: np.ndarray  # [n, 13] int64
    cats: np.ndarray  # [n, 26] uint64
    missing: np.ndarray  # [n, 26] bool, empty categorical field

    def take(self, keep: np.ndarray) -> _Rows:
        return _Rows(self.offsets[keep], self.labels[keep], self.dense[keep], self.cats[keep],
                     self.missing[keep])


def _field_name(col: int) -> str:
    if col == 0:
        return "label"
    return DENSE_NAMES[col - 1] if col <= N_DENSE else SPARSE_NAMES[col - 1 - N_DENSE]


def _explain(line: bytes, col: int) -> str:
    """What is wrong with field ``col`` of ``line`` (the slow path: errors only)."""
    field = line.rstrip(b"\r\n").split(b"\t")[col]
    if col == 0:
        expected = "a label 0 or 1"
    elif col <= N_DENSE:
        expected = f"an integer (at most {_MAX_DECIMAL_DIGITS} digits) or an empty field"
    else:
        expected = f"a hex id (at most {_MAX_HEX_DIGITS} digits) or an empty field"
    return f"column {col + 1} ({_field_name(col)}): expected {expected}, got {field[:40]!r}"


def _digits(words: np.ndarray, ends: np.ndarray, ndigits: np.ndarray, lut: np.ndarray,
            n_words: int) -> tuple[np.ndarray, np.ndarray]:
    """The last ``ndigits`` bytes before each of ``ends``, as digit values through ``lut``.

    Returns (digits [m, 8 * n_words] uint8, right-aligned, 0 before the field; bad [m]: a byte of
    the field is no digit). ``words[i]`` is the 8 bytes of the padded block from byte i on.
    """
    columns, bad = [], np.zeros(ends.shape, dtype=bool)
    for j in range(n_words):
        back = 8 * (n_words - 1 - j)  # this word holds the field's bytes [end-back-8, end-back)
        word = words[ends - back - 8 + _PAD]
        values = np.take(lut, word.view(np.uint8)).view(np.uint64)
        keep = np.take(_KEEP, np.clip(ndigits - back, 0, 8))
        bad |= (values & keep & _HIGH) != 0  # lut gives 255 for a non-digit
        columns.append(values & keep)
    return np.stack(columns, axis=1).view(np.uint8).reshape(-1, 8 * n_words), bad


def _parse_hex(words: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(uint64 values, bad) of hex fields (flat arrays of field bounds); empty fields read 0."""
    ndigits = ends - starts
    n_words = 1 if ndigits.max(initial=0) <= 8 else 2
    digits, bad = _digits(words, ends, ndigits, _HEX_LUT, n_words)
    packed = np.ascontiguousarray((digits[:, 0::2] << 4) | digits[:, 1::2])
    values = packed.view(">u4" if n_words == 1 else ">u8")[:, 0].astype(np.uint64)
    return values, bad | (ndigits > _MAX_HEX_DIGITS)


def _parse_decimal(buf: np.ndarray, words: np.ndarray, starts: np.ndarray,
                   ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(int64 values, bad) of decimal fields, maybe signed '-'; empty fields read 0."""
    neg = (ends > starts) & (buf[starts] == ord("-"))
    ndigits = ends - starts - neg
    n_words = -(-int(min(ndigits.max(initial=0), _MAX_DECIMAL_DIGITS)) // 8)
    if n_words == 0:  # every field empty, or a lone '-' (bad)
        return np.zeros(starts.shape, dtype=np.int64), neg
    digits, bad = _digits(words, ends, ndigits, _DEC_LUT, n_words)
    exponents = np.arange(8 * n_words - 1, -1, -1)
    if n_words == 1:  # float64 sums of 8 digits are exact
        values = (digits @ (10.0 ** exponents)).astype(np.int64)
    else:
        values = digits.astype(np.int64) @ np.where(exponents < _MAX_DECIMAL_DIGITS, 10 ** exponents, 0)
    bad |= (neg & (ndigits == 0)) | (ndigits > _MAX_DECIMAL_DIGITS)
    return np.where(neg, -values, values), bad


def _parse_block(data: bytes) -> _Rows:
    """Parse complete lines (each ending in a newline but maybe the last); raises _LineError."""
    if not data.endswith(b"\n"):
        data += b"\n"
    buf = np.frombuffer(data, dtype=np.uint8)
    newlines = np.flatnonzero(buf == ord("\n"))
    n = newlines.size
    line_starts = np.empty(n, dtype=np.int64)
    line_starts[0], line_starts[1:] = 0, newlines[:-1] + 1

    separators = np.flatnonzero((buf == ord("\t")) | (buf == ord("\n")))
    fields_per_line = np.diff(np.searchsorted(separators, newlines, side="right"), prepend=0)
    wrong = np.flatnonzero(fields_per_line != N_FIELDS)
    if wrong.size:
        row = int(wrong[0])
        got = int(fields_per_line[row])
        what = "an empty line" if newlines[row] == line_starts[row] else f"{got} field" + "s" * (got != 1)
        raise _LineError(row, f"expected {N_FIELDS} tab-separated fields (label, {N_DENSE} integers, "
                              f"{N_SPARSE} hex ids), got {what}")

    ends = separators.reshape(n, N_FIELDS)
    starts = np.empty_like(ends)
    starts[:, 0], starts[:, 1:] = line_starts, ends[:, :-1] + 1
    # Windows line ends: the \r belongs to no field.
    last_end = ends[:, -1]
    ends[:, -1] -= (last_end > starts[:, -1]) & (buf[last_end - 1] == ord("\r"))

    label_ok = (ends[:, 0] - starts[:, 0] == 1) & ((buf[starts[:, 0]] == ord("0"))
                                                   | (buf[starts[:, 0]] == ord("1")))
    padded = np.concatenate([np.zeros(_PAD, dtype=np.uint8), buf, np.zeros(8, dtype=np.uint8)])
    words = np.ndarray((padded.size - 7,), dtype="<u8", buffer=padded, strides=(1,))  # unaligned
    dense, dense_bad = _parse_decimal(buf, words, starts[:, 1:1 + N_DENSE].ravel(),
                                      ends[:, 1:1 + N_DENSE].ravel())
    cats, cats_bad = _parse_hex(words, starts[:, 1 + N_DENSE:].ravel(), ends[:, 1 + N_DENSE:].ravel())
    dense, cats = dense.reshape(n, N_DENSE), cats.reshape(n, N_SPARSE)
    bad = np.concatenate([~label_ok[:, None], dense_bad.reshape(n, N_DENSE), cats_bad.reshape(n, N_SPARSE)],
                         axis=1)
    if bad.any():
        row, col = (int(i) for i in np.argwhere(bad)[0])
        raise _LineError(row, _explain(data[line_starts[row]:newlines[row] + 1], col))

    labels = (buf[starts[:, 0]] - ord("0")).astype(np.float32)
    missing = ends[:, 1 + N_DENSE:] == starts[:, 1 + N_DENSE:]
    return _Rows(line_starts, labels, dense, cats, missing)


# --------------------------------------------------------------------------------------------
# Hashing, splits and ids


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


class _VocabCounter:
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


# --------------------------------------------------------------------------------------------
# The stream


_Encoded = tuple[np.ndarray, np.ndarray, np.ndarray]  # labels [n], dense [n, 13] f32, ids [n, 26]


@dataclass(frozen=True, eq=False)
class _Reader:
    """Everything a worker needs to turn the files into encoded rows of one split."""

    files: tuple[_File, ...]
    seed: int
    fractions: tuple[float, float, float]
    block_bytes: int
    hash_size: int
    vocabs: tuple[np.ndarray, ...] | None

    def blocks(self, worker: int, num_workers: int,
               rng: np.random.Generator | None) -> Iterator[tuple[int, int, bytes]]:
        """(file index, offset, lines) of the blocks of ``worker``; in a seeded order with ``rng``."""
        file_order = np.arange(len(self.files))
        if rng is not None:
            rng.shuffle(file_order)
        for i in (int(i) for i in file_order):
            file = self.files[i]
            if file.gzip:
                for j, offset, data in _stream_blocks(file, self.block_bytes):
                    if (i + j) % num_workers == worker:
                        yield i, offset, data
                continue
            order = np.arange(-(-file.size() // self.block_bytes))
            if rng is not None:
                rng.shuffle(order)
            mine = [int(j) for j in order if (i + j) % num_workers == worker]
            for offset, data in _plain_blocks(file, self.block_bytes, mine):
                yield i, offset, data

    def parse(self, file_index: int, offset: int, data: bytes) -> _Rows:
        try:
            rows = _parse_block(data)
        except _LineError as err:
            file = self.files[file_index]
            line = _line_number(file, offset) + err.row
            raise DataError(f"{file.path}:{line}: {err.message}") from None
        return _Rows(rows.offsets + offset, rows.labels, rows.dense, rows.cats, rows.missing)

    def rows(self, split: int, worker: int = 0, num_workers: int = 1,
             rng: np.random.Generator | None = None) -> Iterator[_Rows]:
        """Parsed rows of ``split`` (0 train, 1 val, 2 test) from the blocks of ``worker``."""
        for i, offset, data in self.blocks(worker, num_workers, rng):
            rows = self.parse(i, offset, data)
            yield rows.take(split_of_lines(rows.offsets, i, self.seed, self.fractions) == split)

    def encode(self, rows: _Rows) -> _Encoded:
        """(labels [n], dense [n, 13] float32, ids [n, 26] int64)."""
        if self.vocabs is None:
            ids = hashed_ids(rows.cats, rows.missing, self.hash_size)
        else:
            ids = vocab_ids(rows.cats, rows.missing, self.vocabs)
        return rows.labels, dense_transform(rows.dense), ids


def _to_batch(labels: np.ndarray, dense: np.ndarray, ids: np.ndarray) -> Batch:
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
        >>> ds = load_criteo(path="day_0.gz", seed=0)  # doctest: +SKIP
        >>> batch = next(iter(ds.batches("train", 4096, shuffle=False)))  # doctest: +SKIP
        >>> batch.dense_features.shape, batch.sparse_features.keys()[0]  # doctest: +SKIP
        (torch.Size([4096, 13]), 'cat_0')
    """

    def __init__(self, reader: _Reader, split: int, batch_size: int, *, shuffle: bool, seed: int,
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

        pool: list[_Encoded] = []
        pooled = 0
        for rows in self.reader.rows(self.split, worker, num_workers, block_rng):
            if len(rows.labels) == 0:
                continue
            pool.append(self.reader.encode(rows))
            pooled += len(rows.labels)
            if pooled >= flush_at:
                pool, pooled = yield from self._flush(pool, row_rng, final=False)
        yield from self._flush(pool, row_rng, final=True)

    def _flush(self, pool: list[_Encoded], rng: np.random.Generator | None,
               final: bool) -> Generator[Batch, None, tuple[list[_Encoded], int]]:
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
            yield _to_batch(labels[start:stop], dense[start:stop], ids[start:stop])
        rest = (labels[full:], dense[full:], ids[full:])
        return ([rest], n - full) if n > full else ([], 0)


# --------------------------------------------------------------------------------------------
# The dataset


class CriteoDataset(RecDataset):
    """Criteo TSV files behind the RecDataset interface; see the module doc for the layout."""

    def __init__(self, reader: _Reader, *, name: str = "criteo", shuffle_rows: int = DEFAULT_SHUFFLE_ROWS,
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
        if split not in SPLITS:
            raise KeyError(f"unknown split {split!r}; expected one of {', '.join(SPLITS)}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be positive, got {batch_size}")
        stream = CriteoStream(self.reader, SPLITS.index(split), batch_size, shuffle=shuffle, seed=seed,
                              shuffle_rows=self.shuffle_rows)
        stream.epoch = epoch
        return stream

    def num_rows(self, split: str) -> int | None:
        """Known after a vocabulary pass; None in hashed mode (the files are never counted)."""
        return None if self._rows is None else self._rows[split]

    def describe(self) -> dict[str, Any]:
        out = super().describe()
        out.update(
            files=[str(f.path) for f in self.reader.files],
            gzip=[f.gzip for f in self.reader.files],
            ids=("hashed" if self.reader.vocabs is None else f"vocabulary (min_count={self.min_count})"),
            fractions=list(self.reader.fractions),
        )
        return out


def _offset_after_lines(file: _File, n: int) -> tuple[int | None, int]:
    """(byte offset just past line ``n``, n) of ``file``, or (None, its line count) if it is shorter."""
    lines, done, last = 0, 0, b"\n"
    with open_binary(file.path) as f:
        while True:
            try:
                piece = f.read(1 << 20)
            except (EOFError, OSError, zlib.error) as err:
                raise _gzip_error(file, done, err) from None
            if not piece:
                return None, lines + (last != b"\n")  # an unterminated last line counts too
            newlines = piece.count(b"\n")
            if lines + newlines >= n:
                cut = -1
                for _ in range(n - lines):
                    cut = piece.index(b"\n", cut + 1)
                return done + cut + 1, n
            lines, done, last = lines + newlines, done + len(piece), piece[-1:]


def _cut_at_rows(files: list[_File], max_rows: int) -> list[_File]:
    """The files cut after their first ``max_rows`` lines in all."""
    out, left = [], max_rows
    for file in files:
        end, lines = _offset_after_lines(file, left)
        out.append(file if end is None else _File(file.path, file.gzip, end))
        left -= lines
        if left <= 0:
            break
    return out


def _check_head(file: _File) -> None:
    """Fail early on an empty, unreadable or wrongly laid-out file: parse its first line."""
    try:
        with open_binary(file.path) as f:
            head = f.readline(1 << 20)
    except (EOFError, OSError, zlib.error) as err:
        raise _gzip_error(file, 0, err) from None
    if not head:
        raise DataError(f"{file.path}: file is empty; expected Criteo TSV lines "
                        f"(label, {N_DENSE} integers, {N_SPARSE} hex ids)")
    try:
        _parse_block(head)
    except _LineError as err:
        raise DataError(f"{file.path}:1: {err.message}") from None


def _check_fractions(fractions: Sequence[float]) -> tuple[float, float, float]:
    if len(fractions) != 3 or any(f < 0 for f in fractions) or abs(sum(fractions) - 1) > 1e-6 \
            or fractions[0] <= 0:
        raise ValueError(f"fractions must be 3 non-negative shares (train > 0) summing to 1, got {fractions}")
    return (float(fractions[0]), float(fractions[1]), float(fractions[2]))


def load_criteo(path: str | None = None, seed: int = 0, *, hash_size: int | None = None,
                vocab_min_count: int | None = None, max_rows: int | None = None,
                fractions: Sequence[float] = (0.8, 0.1, 0.1), block_bytes: int = DEFAULT_BLOCK_BYTES,
                shuffle_rows: int = DEFAULT_SHUFFLE_ROWS) -> CriteoDataset:
    """Open Criteo TSV file(s) at ``path`` as a streaming dataset.

    Args:
        path: a Criteo TSV file, plain or gzip, or a directory of them (read in natural order).
        seed: fixes the train/val/test assignment of every line.
        hash_size: rows of each embedding table in hashed mode (default 2**20); id 0 is "empty".
        vocab_min_count: switch to vocabulary ids: values seen at least this often in the train
            split get their own id, the rest share the OOV id 1. Costs one pass at opening.
        max_rows: read only the first ``max_rows`` lines (across the files, in order).
        fractions: train/val/test shares of the lines; val and test may be 0.
        block_bytes: unit of reading, parsing and sharing among DataLoader workers.
        shuffle_rows: rows shuffled together when ``batches(shuffle=True)``.

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

    files = _list_files(path)
    for file in files:
        _check_head(file)
    if max_rows is not None:
        files = _cut_at_rows(files, max_rows)
    reader = _Reader(tuple(files), seed, _check_fractions(fractions), block_bytes, hash_size, None)
    if vocab_min_count is None:
        return CriteoDataset(reader, shuffle_rows=shuffle_rows)

    counter, rows = _VocabCounter(), dict.fromkeys(SPLITS, 0)
    for i, offset, data in reader.blocks(0, 1, None):
        parsed = reader.parse(i, offset, data)
        split = split_of_lines(parsed.offsets, i, seed, reader.fractions)
        for s, name in enumerate(SPLITS):
            rows[name] += int((split == s).sum())
        train = parsed.take(split == 0)
        counter.add(train.cats, train.missing)
    vocabs = tuple(counter.vocabularies(vocab_min_count))
    reader = _Reader(reader.files, seed, reader.fractions, block_bytes, hash_size, vocabs)
    return CriteoDataset(reader, shuffle_rows=shuffle_rows, rows=rows, min_count=vocab_min_count)
