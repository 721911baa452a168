"""libFM / libSVM files (Frappe, MovieLens-tag as released with NFM and AFN): ``label idx:val ...``.

The label is 1/0 or 1/-1 (-1 becomes 0). Every ``idx`` is a global feature index; what field an
index belongs to is told in one of three ways:

* ``field_ranges={"user": [0, 1000], "item": [1000, 5000], ...}`` (half-open ranges): an index
  belongs to the range holding it and becomes ``idx - lo`` in a table of ``hi - lo`` rows. A line
  may hold several indices of one field: that field is multi-hot (kept jagged, never truncated).
* ``fields=["user", "item", ...]``: one name per position in the line; every line must hold as
  many entries.
* neither (inferred): each position is a field ``f0, f1, ...``, as in Frappe, whose lines all hold
  the same number of entries, one per field, in a fixed order. Lines of another length are an
  error that says to pass ``field_ranges``.

With positions (the last two), the ids of a field are the ranks of its distinct indices in the
whole file, so a table has exactly as many rows as the field has values.

Values: an entry ``idx:1`` is a categorical id and ``idx:0`` an absent one (dropped). Indices
listed in ``dense`` become dense columns ``x<idx>`` holding their value (0 where a line lacks
them); any other value is an error, since an embedding lookup has no place for it.

The file (plain or gzip) is read into memory and split at random by ``seed``, or in file order
(``split: sequential``), or the splits are files of their own (``train``, ``valid``, ``test``):
:mod:`autorec.data.splits`. Blank lines are skipped; any other malformed line raises a
DataError naming file:line.
"""

from __future__ import annotations

import bisect
import re
import zlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from autorec.data.base import SPLITS, InMemoryDataset
from autorec.data.files import open_binary
from autorec.data.schema import DataError, Schema, SparseFeature
from autorec.data.splits import SplitFiles, file_rows, split_source
from autorec.data.tabular import Jagged, TabularData

_LABELS = {1.0: 1.0, 0.0: 0.0, -1.0: 0.0}
_ENTRIES = re.compile(rb"[^: ]+:[^: ]+(?: [^: ]+:[^: ]+)*")  # idx:val tokens joined by spaces


class _Fields:
    """Which field each categorical entry of a line belongs to."""

    def __init__(self, names: Sequence[str] | None, ranges: Mapping[str, Sequence[int]] | None) -> None:
        if names is not None and ranges is not None:
            raise ValueError("give either fields (one name per position) or field_ranges, not both")
        self.names = list(names) if names is not None else None
        self.source = "one per name in fields"
        self.ranges = sorted(((int(lo), int(hi), name) for name, (lo, hi) in ranges.items()),
                             key=lambda r: r[0]) if ranges is not None else None
        if self.ranges is not None:
            self.names = [name for _, _, name in self.ranges]
            for (lo, hi, name), nxt in zip(self.ranges, [*self.ranges[1:], None], strict=True):
                if not 0 <= lo < hi:
                    raise ValueError(f"field_ranges[{name!r}] = [{lo}, {hi}) is empty or negative")
                if nxt is not None and nxt[0] < hi:
                    raise ValueError(f"field_ranges {name!r} and {nxt[2]!r} overlap")
            self.starts = [lo for lo, _, _ in self.ranges]

    @property
    def positional(self) -> bool:
        return self.ranges is None

    def of_entries(self, indices: list[int]) -> list[int]:
        """Field number of each entry; raises ValueError for a line that fits no field."""
        if self.ranges is None:
            if self.names is None:  # inferred: the first line fixes the count
                self.names = [f"f{p}" for p in range(len(indices))]
                self.source = "as many as the first line"
            if len(indices) != len(self.names):
                raise ValueError(f"expected {len(self.names)} categorical entries ({self.source}), got "
                                 f"{len(indices)}; pass field_ranges= for lines whose length varies")
            return list(range(len(indices)))
        out = []
        for idx in indices:
            k = bisect.bisect_right(self.starts, idx) - 1
            if k < 0 or idx >= self.ranges[k][1]:
                raise ValueError(f"index {idx} lies in no range of field_ranges")
            out.append(k)
        return out

    def ids(self, field: int, indices: np.ndarray) -> tuple[np.ndarray, int]:
        """(ids, num_embeddings) of one field's raw indices."""
        if self.ranges is not None:
            lo, hi, _ = self.ranges[field]
            return indices - lo, hi - lo
        values, ids = np.unique(indices, return_inverse=True)
        return ids, max(values.size, 1)


def _lines(path: Path) -> Iterator[tuple[int, bytes]]:
    """(line number, line) of the non-blank lines of a plain or gzip file."""
    line_no = 0
    try:
        with open_binary(path) as f:
            for line_no, line in enumerate(f, start=1):
                if line.strip():
                    yield line_no, line
    except (EOFError, OSError, zlib.error) as err:
        raise DataError(f"{path}: truncated or corrupt gzip stream after line {line_no} "
                        f"({type(err).__name__}: {err})") from None


def _parse_label(token: bytes) -> float:
    try:
        return _LABELS[float(token)]
    except (ValueError, KeyError):
        raise ValueError(f"expected a label 1/0 or 1/-1, got {token.decode(errors='replace')!r}") from None


def _parse_entry(token: bytes) -> tuple[int, float]:
    idx, sep, value = token.partition(b":")
    try:
        if not sep:
            raise ValueError
        index, number = int(idx), float(value)
    except ValueError:
        raise ValueError(f"expected idx:value (a non-negative integer and a number), "
                         f"got {token.decode(errors='replace')!r}") from None
    if index < 0:
        raise ValueError(f"expected a non-negative feature index, got {index}")
    return index, number


def _parse_entries(tokens: list[bytes]) -> tuple[list[int], list[float]]:
    """(indices, values) of ``idx:val`` tokens; one C-level pass when they are well formed."""
    if not tokens:
        return [], []
    joined = b" ".join(tokens)
    if _ENTRIES.fullmatch(joined):
        parts = joined.replace(b":", b" ").split()
        try:
            indices, values = list(map(int, parts[0::2])), list(map(float, parts[1::2]))
            if min(indices) >= 0:
                return indices, values
        except ValueError:
            pass
    pairs = [_parse_entry(t) for t in tokens]  # the slow path finds and explains the bad token
    return [i for i, _ in pairs], [v for _, v in pairs]


def load_libfm(path: str | None = None, seed: int = 0, *, fields: Sequence[str] | None = None,
               field_ranges: Mapping[str, Sequence[int]] | None = None, dense: Sequence[int] = (),
               split: str | None = None, fractions: Sequence[float] | None = None,
               train: str | None = None, valid: str | None = None,
               test: str | None = None) -> InMemoryDataset:
    """Read a libFM file (or one per split) into memory; see the module doc for the fields.

    Args:
        path: the file, plain or gzip, split by ``split``.
        seed: fixes a random split.
        fields: one field name per position of a line.
        field_ranges: field name -> [lo, hi) of its global feature indices.
        dense: feature indices kept as dense values (columns ``x<idx>``).
        split: ``random`` (default) or ``sequential`` (file order): :mod:`autorec.data.splits`.
        fractions: train/val/test shares, all positive (default 0.8/0.1/0.1).
        train, valid, test: one file per split instead of ``path`` (a published split).

    Example:
        >>> ds = load_libfm(path="frappe.libfm", seed=0)  # doctest: +SKIP
        >>> [f.name for f in ds.schema.sparse][:3]  # doctest: +SKIP
        ['f0', 'f1', 'f2']
    """
    source, rule = split_source("libfm", path, split, fractions, train, valid, test)
    layout = _Fields(fields, field_ranges)
    parsed = _Parsed([int(i) for i in dense])
    if isinstance(source, SplitFiles):
        counts = [parsed.read(file, layout) for file in source.files]
        parts = file_rows(counts)
    else:
        parsed.read(source, layout)
        parts = rule.rows(len(parsed.labels), seed)
    data = parsed.table(layout)
    return InMemoryDataset("libfm", {s: data.subset(rows) for s, rows in zip(SPLITS, parts, strict=True)})


@dataclass
class _Parsed:
    """A file's lines as flat lists: labels, dense (row, column, value), categorical entries."""

    dense: list[int]
    labels: list[float] = field(default_factory=list)
    dense_entries: list[tuple[int, int, float]] = field(default_factory=list)
    entry_rows: list[int] = field(default_factory=list)
    entry_fields: list[int] = field(default_factory=list)
    entry_indices: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.dense_column = {idx: k for k, idx in enumerate(self.dense)}

    def read(self, file: Path, layout: _Fields) -> int:
        """Append the lines of ``file``; returns how many rows it held."""
        before = len(self.labels)
        for line_no, line in _lines(file):
            try:
                self.add(line, layout)
            except ValueError as err:
                raise DataError(f"{file}:{line_no}: {err}") from None
        if len(self.labels) == before:
            raise DataError(f"{file}: file is empty; expected libFM lines `label idx:val ...`")
        return len(self.labels) - before

    def add(self, line: bytes, layout: _Fields) -> None:
        """Append one line; raises ValueError (and appends nothing) when it is malformed."""
        row, dense_column = len(self.labels), self.dense_column
        tokens = line.split()
        label = _parse_label(tokens[0])
        indices, values = _parse_entries(tokens[1:])
        if dense_column:
            dense = [(dense_column[i], v) for i, v in zip(indices, values, strict=True) if i in dense_column]
            kept = [k for k, i in enumerate(indices) if i not in dense_column]
            indices, values = [indices[k] for k in kept], [values[k] for k in kept]
        else:
            dense = []
        fields = layout.of_entries(indices)
        if any(v != 1.0 for v in values):
            for idx, value in zip(indices, values, strict=True):
                if value not in (0.0, 1.0):
                    raise ValueError(f"index {idx} has value {value}; a categorical entry is 1 (or 0 "
                                     "for absent): list the index in dense=[...] to keep its value")
            kept = [k for k, v in enumerate(values) if v == 1.0]
            indices, fields = [indices[k] for k in kept], [fields[k] for k in kept]
        self.labels.append(label)
        self.dense_entries.extend((row, column, v) for column, v in dense)
        self.entry_rows.extend([row] * len(indices))
        self.entry_fields.extend(fields)
        self.entry_indices.extend(indices)

    def table(self, layout: _Fields) -> TabularData:
        """One jagged column per field, rows in file order."""
        n = len(self.labels)
        dense_values = np.zeros((n, len(self.dense)), dtype=np.float32)
        if self.dense_entries:
            at_row, at_column, value = zip(*self.dense_entries, strict=True)
            dense_values[list(at_row), list(at_column)] = value
        rows, field_of, indices = (np.asarray(a, dtype=np.int64)
                                   for a in (self.entry_rows, self.entry_fields, self.entry_indices))
        features, columns = [], []
        for f, name in enumerate(layout.names or []):
            mine = field_of == f
            ids, size = layout.ids(f, indices[mine])
            lengths = np.bincount(rows[mine], minlength=n)
            features.append(SparseFeature(name, size, multi_hot=bool((lengths != 1).any())))
            columns.append(Jagged.from_lengths(torch.from_numpy(ids), torch.from_numpy(lengths)))
        schema = Schema(tuple(f"x{idx}" for idx in self.dense), tuple(features))
        return TabularData(schema, torch.from_numpy(dense_values), tuple(columns),
                           torch.tensor(self.labels, dtype=torch.float32))
