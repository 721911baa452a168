"""A block of Criteo TSV lines -> numpy rows (labels, integer counts, raw hex ids), vectorised.

A line is ``label<TAB>I1..I13<TAB>C1..C26``. The fields are located with one search for tabs
and newlines over the block, and their digits read 8 bytes at a time through lookup tables, so
a block costs a few numpy calls whatever its number of lines. A malformed line raises
:class:`LineError` with its row in the block and what was expected of which column.

Example:
    >>> tab = chr(9)
    >>> line = tab.join(["1"] + ["5"] * 13 + ["a1"] * 25 + [""])
    >>> rows = parse_block(line.encode())
    >>> rows.labels.tolist(), int(rows.dense[0, 0]), int(rows.cats[0, 0]), bool(rows.missing[0, 25])
    ([1.0], 5, 161, True)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

N_DENSE, N_SPARSE = 13, 26
N_FIELDS = 1 + N_DENSE + N_SPARSE
# torchrec's names (torchrec.datasets.criteo), so its DLRM recipes find the features they expect.
DENSE_NAMES = tuple(f"int_{i}" for i in range(N_DENSE))
SPARSE_NAMES = tuple(f"cat_{i}" for i in range(N_SPARSE))

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


class LineError(Exception):
    """A malformed line at ``row`` of a block; converted to a DataError naming file:line."""

    def __init__(self, row: int, message: str) -> None:
        super().__init__(message)
        self.row, self.message = row, message


@dataclass(frozen=True)
class Rows:
    """Parsed lines of one block, before splitting and id mapping."""

    offsets: np.ndarray  # [n] int64, byte offset of each line
    labels: np.ndarray  # [n] float32
    dense: np.ndarray  # [n, 13] int64
    cats: np.ndarray  # [n, 26] uint64
    missing: np.ndarray  # [n, 26] bool, empty categorical field

    def take(self, keep: np.ndarray) -> Rows:
        return Rows(self.offsets[keep], self.labels[keep], self.dense[keep], self.cats[keep],
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


def parse_block(data: bytes) -> Rows:
    """Parse complete lines (each ending in a newline but maybe the last); raises LineError."""
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
        raise LineError(row, f"expected {N_FIELDS} tab-separated fields (label, {N_DENSE} integers, "
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
        raise LineError(row, _explain(data[line_starts[row]:newlines[row] + 1], col))

    labels = (buf[starts[:, 0]] - ord("0")).astype(np.float32)
    missing = ends[:, 1 + N_DENSE:] == starts[:, 1 + N_DENSE:]
    return Rows(line_starts, labels, dense, cats, missing)


# --------------------------------------------------------------------------------------------
# Hashing, splits and ids
