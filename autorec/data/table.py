"""CSV and Parquet tables described by a declared schema.

The ``schema`` option is a dict, or the path of a YAML/JSON file holding one::

    label: clicked                  # a number in [0, 1] on every row
    dense: [price, age]             # numbers; an empty cell is 0
    sparse:
      - user                        # one categorical value per row
      - {name: tags, multi_hot: true, separator: "|", min_count: 2}

Categorical values (compared as strings) get ids through a vocabulary built from the train split:
0 is "empty cell" (single-valued features), 1 is OOV (a value unseen in train or seen fewer than
``min_count`` times), 2 up are the values, most frequent first. A multi-hot cell is split at its
separator (a Parquet list column is taken as it is); its ids stay jagged, never truncated, and
an empty cell has none.

Errors name the file and, for a bad value, where: CSV line numbers count the header as line 1
(and count physical lines, so a quoted cell holding newlines is located right); Parquet names
the row (1-based). The table is read whole into memory and split at random by ``seed``, or in
file order (``split: sequential``; :mod:`autorec.data.splits`).
"""

from __future__ import annotations

import csv
import io
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv
import pyarrow.parquet as pq
import torch
import yaml

from autorec.data.base import SPLITS, InMemoryDataset
from autorec.data.files import is_gzip, open_binary
from autorec.data.schema import DataError, Schema, SparseFeature
from autorec.data.splits import SplitRule
from autorec.data.tabular import Jagged, TabularData

MISSING_ID, OOV_ID, FIRST_VOCAB_ID = 0, 1, 2



@dataclass(frozen=True)
class _Where:
    """Names a row in messages: ``file:line`` for CSV (``line_of_row``), ``file: row n`` else."""

    file: Path
    line_of_row: Callable[[int], int] | None = None

    def __call__(self, row: int) -> str:
        if self.line_of_row is None:
            return f"{self.file}: row {row + 1}"
        return f"{self.file}:{self.line_of_row(row)}"


# --------------------------------------------------------------------------------------------
# The declared schema


@dataclass(frozen=True)
class SparseColumn:
    """A categorical column: one value per row, or several (``multi_hot``) split at ``separator``."""

    name: str
    multi_hot: bool = False
    separator: str = "|"
    min_count: int = 1


@dataclass(frozen=True)
class TableSchema:
    """Which columns of a table are the label, the dense features and the sparse features."""

    label: str
    dense: tuple[str, ...]
    sparse: tuple[SparseColumn, ...]

    @property
    def columns(self) -> list[str]:
        return [self.label, *self.dense, *(c.name for c in self.sparse)]

    @classmethod
    def load(cls, spec: Mapping[str, Any] | str | Path | None) -> TableSchema:
        """From a dict or a YAML/JSON file; raises DataError saying what is wrong."""
        if spec is None:
            raise DataError("csv/parquet need schema=: a dict or a YAML/JSON file with label, dense, sparse")
        where = "schema"
        if isinstance(spec, str | Path):
            where = str(spec)
            try:
                spec = yaml.safe_load(Path(spec).read_text())
            except (OSError, yaml.YAMLError) as err:
                raise DataError(f"{where}: cannot read the schema: {err}") from None
        if not isinstance(spec, Mapping):
            raise DataError(f"{where}: expected a mapping with label, dense, sparse; "
                            f"got {type(spec).__name__}")
        unknown = set(spec) - {"label", "dense", "sparse"}
        if unknown or "label" not in spec:
            raise DataError(f"{where}: expected keys label (required), dense, sparse; "
                            f"got {', '.join(map(str, spec))}")
        try:
            schema = cls(str(spec["label"]), tuple(str(d) for d in spec.get("dense") or ()),
                         tuple(_sparse_column(s) for s in spec.get("sparse") or ()))
        except (TypeError, ValueError) as err:
            raise DataError(f"{where}: {err}") from None
        if not schema.sparse:
            raise DataError(f"{where}: declare at least one sparse feature")
        duplicates = {c for c in schema.columns if schema.columns.count(c) > 1}
        if duplicates:
            raise DataError(f"{where}: columns named more than once: {', '.join(sorted(duplicates))}")
        return schema


def _sparse_column(spec: str | Mapping[str, Any]) -> SparseColumn:
    if isinstance(spec, str):
        return SparseColumn(spec)
    if not isinstance(spec, Mapping) or "name" not in spec:
        raise ValueError(f"a sparse feature is a column name or a mapping with a name, got {spec!r}")
    unknown = set(spec) - {"name", "multi_hot", "separator", "min_count"}
    if unknown:
        raise ValueError(f"sparse feature {spec['name']!r}: unknown keys {', '.join(sorted(unknown))} "
                         "(known: name, multi_hot, separator, min_count)")
    column = SparseColumn(str(spec["name"]), bool(spec.get("multi_hot", False)),
                          str(spec.get("separator", "|")), int(spec.get("min_count", 1)))
    if not column.separator or column.min_count < 1:
        raise ValueError(f"sparse feature {column.name!r}: separator must be non-empty, min_count >= 1")
    return column


# --------------------------------------------------------------------------------------------
# Reading


def _missing_columns(path: Path, have: Sequence[str], schema: TableSchema) -> None:
    missing = [c for c in schema.columns if c not in have]
    if missing:
        raise DataError(f"{path}: column {missing[0]!r} named by the schema is missing "
                        f"(missing: {', '.join(missing)}; the file has: {', '.join(have)})")


def _csv_records(path: Path, sep: str) -> Any:
    """(first line, fields) of the non-blank records of a CSV file, with Python's csv module."""
    with io.TextIOWrapper(open_binary(path), encoding="utf-8-sig", errors="replace", newline="") as text:
        reader = csv.reader(text, delimiter=sep)
        before = 0
        for fields in reader:
            if fields:
                yield before + 1, fields
            before = reader.line_num


def csv_line(path: Path, sep: str, record: int) -> int:
    """Physical line where the ``record``-th non-blank record starts (the header is record 1)."""
    for k, (line, _) in enumerate(_csv_records(path, sep), start=1):
        if k == record:
            return line
    return record


def _read_csv(path: Path, schema: TableSchema, sep: str, max_rows: int | None,
              use_threads: bool = True) -> pa.Table:
    try:
        header = next((fields for _, fields in _csv_records(path, sep)), None)
    except (EOFError, OSError, zlib.error) as err:
        raise DataError(f"{path}: cannot read as CSV (truncated or corrupt?): {err}") from None
    if header is None:
        raise DataError(f"{path}: file is empty; expected a header line naming the columns")
    _missing_columns(path, header, schema)
    bad_rows: list[Any] = []

    def on_bad_row(row: Any) -> str:
        bad_rows.append(row)
        return "error"

    stream = pa.input_stream(str(path), compression="gzip" if is_gzip(path) else None)
    options = dict(
        read_options=pcsv.ReadOptions(use_threads=use_threads),
        parse_options=pcsv.ParseOptions(delimiter=sep, invalid_row_handler=on_bad_row),
        convert_options=pcsv.ConvertOptions(column_types=dict.fromkeys(schema.columns, pa.string()),
                                            include_columns=schema.columns, strings_can_be_null=False),
    )
    try:
        if max_rows is None:
            return pcsv.read_csv(stream, **options)
        batches, rows = [], 0
        with pcsv.open_csv(stream, **options) as reader:
            for batch in reader:
                batches.append(batch)
                rows += batch.num_rows
                if rows >= max_rows:
                    break
        return pa.Table.from_batches(batches, reader.schema).slice(0, max_rows)
    except (pa.ArrowInvalid, OSError) as err:
        if not bad_rows:
            raise DataError(f"{path}: cannot read as CSV (truncated or corrupt?): {err}") from None
        row = bad_rows[0]
        if row.number is None and use_threads:  # only a single-threaded read knows the row
            return _read_csv(path, schema, sep, max_rows, use_threads=False)
        line = csv_line(path, sep, row.number) if row.number is not None else "?"
        raise DataError(f"{path}:{line}: expected {row.expected_columns} fields (as the header has), "
                        f"got {row.actual_columns}: {row.text[:80]!r}") from None


def _read_parquet(path: Path, schema: TableSchema, max_rows: int | None) -> pa.Table:
    try:
        file = pq.ParquetFile(path)
        _missing_columns(path, file.schema_arrow.names, schema)
        if max_rows is None:
            return file.read(columns=schema.columns)
        batches, rows = [], 0
        for batch in file.iter_batches(columns=schema.columns):
            batches.append(batch)
            rows += batch.num_rows
            if rows >= max_rows:
                break
        table = pa.Table.from_batches(batches) if batches else file.schema_arrow.empty_table()
        return table.slice(0, max_rows)
    except (pa.ArrowException, OSError) as err:
        raise DataError(f"{path}: cannot read as Parquet (truncated or corrupt?): {err}") from None


# --------------------------------------------------------------------------------------------
# Columns to tensors


def _numbers(column: pa.ChunkedArray, name: str, locate: _Where) -> tuple[np.ndarray, np.ndarray]:
    """(values float64, missing) of a numeric or text column; DataError at a non-number."""
    kind = column.type
    if pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_boolean(kind) \
            or pa.types.is_decimal(kind):
        values = column.cast(pa.float64()).to_numpy()
        missing, text = np.isnan(values), None
    elif pa.types.is_string(kind) or pa.types.is_large_string(kind):
        text = column.to_pandas().fillna("").str.strip()
        missing = (text == "").to_numpy()
        values = pd.to_numeric(text.mask(missing), errors="coerce").to_numpy(dtype=np.float64)
    else:
        raise DataError(f"{locate.file}: column {name!r} has type {kind}; expected numbers")
    bad = ~missing & ~np.isfinite(values)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        got = text.iloc[i] if text is not None else float(values[i])
        raise DataError(f"{locate(i)}: column {name!r}: expected a finite number, got {got!r}")
    return values, missing


def _labels(column: pa.ChunkedArray, name: str, locate: _Where) -> torch.Tensor:
    values, missing = _numbers(column, name, locate)
    bad = missing | (values < 0) | (values > 1)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        got = "an empty cell" if missing[i] else repr(float(values[i]))
        raise DataError(f"{locate(i)}: label column {name!r}: expected a number in [0, 1], got {got}")
    return torch.from_numpy(values.astype(np.float32))


def _tokens(column: pa.ChunkedArray, spec: SparseColumn, locate: _Where) -> tuple[pd.Series, np.ndarray]:
    """(values as strings, row of each value); an empty single value is kept as ""."""
    array = column.combine_chunks()
    is_list = pa.types.is_list(array.type) or pa.types.is_large_list(array.type)
    if not spec.multi_hot:
        if is_list:
            raise DataError(f"{locate.file}: column {spec.name!r} holds lists; "
                            "declare it multi_hot: true")
        text = pc.utf8_trim_whitespace(pc.fill_null(array.cast(pa.string()), ""))
        return text.to_pandas(), np.arange(len(array), dtype=np.int64)
    if not is_list:
        array = pc.split_pattern(array.cast(pa.string()), pattern=spec.separator)
    rows = pc.list_parent_indices(array).to_numpy().astype(np.int64)
    values = pc.list_flatten(array)
    text = pc.utf8_trim_whitespace(pc.fill_null(values.cast(pa.string()), "")).to_pandas()
    kept = (text != "").to_numpy()
    return text[kept].reset_index(drop=True), rows[kept]


def _vocabulary(tokens: pd.Series, min_count: int) -> pd.Index:
    """Values seen at least ``min_count`` times, most frequent first (ties by value)."""
    counts = tokens[tokens != ""].value_counts()
    counts = counts[counts >= min_count]
    table = pd.DataFrame({"value": counts.index.astype(str), "count": counts.to_numpy()})
    return pd.Index(table.sort_values(["count", "value"], ascending=[False, True])["value"])


def _sparse(column: pa.ChunkedArray, spec: SparseColumn, train: np.ndarray,
            locate: _Where) -> tuple[SparseFeature, Jagged]:
    tokens, rows = _tokens(column, spec, locate)
    vocab = _vocabulary(tokens[train[rows]], spec.min_count)
    ids = vocab.get_indexer(tokens)
    ids = np.where(ids < 0, OOV_ID, ids + FIRST_VOCAB_ID)
    ids[(tokens == "").to_numpy()] = MISSING_ID
    lengths = np.bincount(rows, minlength=len(train))
    feature = SparseFeature(spec.name, FIRST_VOCAB_ID + len(vocab), multi_hot=spec.multi_hot)
    return feature, Jagged.from_lengths(torch.from_numpy(ids.astype(np.int64)), torch.from_numpy(lengths))


def _dataset(name: str, table: pa.Table, schema: TableSchema, seed: int, rule: SplitRule,
             locate: _Where) -> InMemoryDataset:
    n = table.num_rows
    if n == 0:
        raise DataError(f"{locate.file}: the table has no rows")
    parts = rule.rows(n, seed)
    train = np.zeros(n, dtype=bool)
    train[parts[0].numpy()] = True

    labels = _labels(table[schema.label], schema.label, locate)
    dense = np.zeros((n, len(schema.dense)), dtype=np.float32)
    for k, column in enumerate(schema.dense):
        values, missing = _numbers(table[column], column, locate)
        dense[:, k] = np.where(missing, 0.0, values)
    features, columns = zip(*(_sparse(table[c.name], c, train, locate) for c in schema.sparse), strict=True)
    data = TabularData(Schema(schema.dense, tuple(features)), torch.from_numpy(dense), tuple(columns), labels)
    return InMemoryDataset(name, {split: data.subset(idx) for split, idx in zip(SPLITS, parts, strict=True)})


def _file(path: str | None, kind: str) -> Path:
    if path is None:
        raise DataError(f"{kind} needs path=: the {kind} file to read")
    file = Path(path)
    if not file.is_file():
        raise DataError(f"{file}: no such file")
    return file


def load_csv(path: str | None = None, seed: int = 0, *,
             schema: Mapping[str, Any] | str | None = None, sep: str = ",", max_rows: int | None = None,
             split: str | None = None, fractions: Sequence[float] | None = None) -> InMemoryDataset:
    """A CSV file (plain or gzip, with a header line) read through ``schema``.

    Args:
        path: the CSV file; its first line names the columns.
        seed: fixes the random train/val/test split (and so the vocabularies).
        schema: a dict or a YAML/JSON file: ``label``, ``dense``, ``sparse`` (see the module doc).
        sep: the field delimiter.
        max_rows: read only the first rows.
        split: ``random`` (default) or ``sequential`` (file order): :mod:`autorec.data.splits`.
        fractions: train/val/test shares, all positive (default 0.8/0.1/0.1).

    Example:
        >>> ds = load_csv(path="clicks.csv", seed=0,  # doctest: +SKIP
        ...               schema={"label": "clicked", "dense": ["price"], "sparse": ["user"]})
        >>> ds.schema.sparse_names  # doctest: +SKIP
        ('user',)
    """
    file, spec, rule = _file(path, "csv"), TableSchema.load(schema), SplitRule.of(split, fractions)
    table = _read_csv(file, spec, sep, max_rows)
    return _dataset("csv", table, spec, seed, rule,
                    _Where(file, lambda row: csv_line(file, sep, row + 2)))


def load_parquet(path: str | None = None, seed: int = 0, *,
                 schema: Mapping[str, Any] | str | None = None, max_rows: int | None = None,
                 split: str | None = None, fractions: Sequence[float] | None = None) -> InMemoryDataset:
    """A Parquet file read through ``schema``; multi-hot columns may be lists or separated text.

    Args:
        path: the Parquet file.
        seed: fixes the random train/val/test split (and so the vocabularies).
        schema: a dict or a YAML/JSON file: ``label``, ``dense``, ``sparse`` (see the module doc).
        max_rows: read only the first rows.
        split: ``random`` (default) or ``sequential`` (file order): :mod:`autorec.data.splits`.
        fractions: train/val/test shares, all positive (default 0.8/0.1/0.1).
    """
    file, spec, rule = _file(path, "parquet"), TableSchema.load(schema), SplitRule.of(split, fractions)
    table = _read_parquet(file, spec, max_rows)
    return _dataset("parquet", table, spec, seed, rule, _Where(file))
