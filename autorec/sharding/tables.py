"""Embedding table sets for sharding: per-table facts (rows, dim, pooling, bytes, access reuse).

A :class:`TableSet` comes from an :class:`~autorec.arch.ArchSpec` (:meth:`TableSet.from_arch`) or
is generated realistically (:meth:`TableSet.generate`): rows log-uniform in 10^3..10^8, dims
4..256 in multiples of 4, heavy-tailed (Pareto) pooling factors and power-law (Zipf-like) row
access summarised by an access-reuse histogram. :meth:`TableSet.features` turns it into the raw
per-table feature matrix [T, F] that the sharding cost model reads; its columns are
:data:`FEATURE_NAMES`.

The access-reuse histogram of a table (``REUSE_BINS`` = 8 bins): draw a window of
``REUSE_WINDOW`` lookups from the table's access distribution; bin ``k`` is the fraction of those
lookups that hit a row looked up ``2^k .. 2^(k+1)-1`` times in the window (the last bin: 128 times
or more). Uniform access over many rows puts nearly everything in bin 0; a steep power law moves
the mass into the high bins (hot rows stay in cache, which is why the cost model wants it).

Example:
    >>> ts = TableSet.generate(20, seed=0)
    >>> len(ts), ts.features().shape
    (20, torch.Size([20, 12]))
    >>> t = ts.tables[0]
    >>> [c.name for c in t.column_shard(2)] == [f"{t.name}@c0", f"{t.name}@c1"]
    True
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np
import torch

if TYPE_CHECKING:
    from autorec.arch import ArchSpec

REUSE_BINS = 8
REUSE_WINDOW = 8192
# fbgemm's fused row-wise Adagrad (the trainer's embedding optimizer) keeps one fp32 per row.
OPTIMIZER_BYTES_PER_ROW = 4
BYTES_PER_ELEMENT = {"fp32": 4.0, "fp16": 2.0, "bf16": 2.0, "int8": 1.0}
FEATURE_NAMES = ("rows", "dim", "pooling", "bytes", *(f"reuse{k}" for k in range(REUSE_BINS)))


class TableSetError(ValueError):
    """A table or table set is malformed; the message names the table and field."""


def access_indices(rows: int, exponent: float, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` row ids in ``[0, rows)`` drawn from a power law of ``exponent`` over row rank.

    Rank r (1-based) is drawn with probability proportional to r^-exponent (continuous inverse
    CDF, so it costs O(n) at any ``rows``); ranks are scattered over the table by a fixed odd
    multiplier so that hot rows are not adjacent in memory. exponent 0 is uniform access.

    Example:
        >>> ids = access_indices(1000, 1.2, 5000, np.random.default_rng(0))
        >>> bool(ids.min() >= 0 and ids.max() < 1000), ids.dtype
        (True, dtype('int64'))
    """
    u = rng.random(n)
    if abs(exponent - 1.0) < 1e-6:
        rank = np.exp(u * math.log(rows + 1.0))
    else:
        a = 1.0 - exponent
        rank = ((rows + 1.0) ** a - 1.0) * u + 1.0
        rank = rank ** (1.0 / a)
    rank = np.clip(np.floor(rank).astype(np.int64) - 1, 0, rows - 1)
    return (rank * 2654435761) % rows


def reuse_histogram(indices: np.ndarray) -> tuple[float, ...]:
    """The access-reuse histogram (module doc) of a window of lookups; sums to 1.

    Example:
        >>> reuse_histogram(np.array([5, 5, 7, 9]))
        (0.5, 0.5, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    """
    if indices.size == 0:
        return (1.0,) + (0.0,) * (REUSE_BINS - 1)
    _, inverse, counts = np.unique(indices, return_inverse=True, return_counts=True)
    per_lookup = counts[inverse]
    bins = np.minimum(np.floor(np.log2(per_lookup)).astype(np.int64), REUSE_BINS - 1)
    hist = np.bincount(bins, minlength=REUSE_BINS) / indices.size
    return tuple(float(x) for x in hist)


@dataclass(frozen=True)
class TableInfo:
    """One embedding table as the sharding planner and cost model see it.

    Args:
        name: table name (column shards are ``"<name>@c<i>"``).
        rows: number of embedding rows.
        dim: embedding dimension (columns).
        pooling: mean lookups per sample (pooling factor), > 0.
        bytes_per_element: 4 for fp32, 2 for fp16.
        reuse: access-reuse histogram, ``REUSE_BINS`` fractions summing to 1 (module doc).
        access_exponent: the power-law exponent the profiler draws this table's ids from
            (0: uniform); :attr:`reuse` is what the cost model sees.

    Example:
        >>> t = TableInfo("t", rows=1000, dim=16, pooling=2.0, bytes_per_element=4,
        ...               reuse=(1.0,) + (0.0,) * 7)
        >>> t.bytes  # 1000 * (16 * 4 + 4 optimizer-state bytes per row)
        68000
        >>> [(c.name, c.dim) for c in t.column_shard(2)]
        [('t@c0', 8), ('t@c1', 8)]
    """

    name: str
    rows: int
    dim: int
    pooling: float
    bytes_per_element: float
    reuse: tuple[float, ...]
    access_exponent: float = 0.0

    def __post_init__(self) -> None:
        where = f"table {self.name!r}"
        if not isinstance(self.name, str) or not self.name:
            raise TableSetError(f"table name: expected a non-empty string, got {self.name!r}")
        if not isinstance(self.rows, int) or self.rows < 1:
            raise TableSetError(f"{where}: rows: expected a positive integer, got {self.rows!r}")
        if not isinstance(self.dim, int) or self.dim < 1:
            raise TableSetError(f"{where}: dim: expected a positive integer, got {self.dim!r}")
        if not self.pooling > 0 or not math.isfinite(self.pooling):
            raise TableSetError(f"{where}: pooling: expected a positive number, got {self.pooling!r}")
        if self.bytes_per_element not in (1, 2, 4, 8):
            raise TableSetError(f"{where}: bytes_per_element: expected 1, 2, 4 or 8, "
                                f"got {self.bytes_per_element!r}")
        if len(self.reuse) != REUSE_BINS or any(r < 0 for r in self.reuse) \
                or abs(sum(self.reuse) - 1.0) > 1e-4:
            raise TableSetError(f"{where}: reuse: expected {REUSE_BINS} non-negative fractions "
                                f"summing to 1, got {self.reuse!r}")

    @property
    def bytes(self) -> int:
        """Weights plus the fused row-wise Adagrad state (one fp32 per row)."""
        return int(self.rows * (self.dim * self.bytes_per_element + OPTIMIZER_BYTES_PER_ROW))

    def column_shard(self, parts: int) -> tuple[TableInfo, ...]:
        """The table split by columns into ``parts`` shards (dims as equal as possible, each >= 1).

        Each shard keeps rows, pooling and reuse (every lookup touches every column shard).
        """
        if not isinstance(parts, int) or not 1 <= parts <= self.dim:
            raise TableSetError(f"table {self.name!r}: column_shard: parts must be in 1..{self.dim}, "
                                f"got {parts!r}")
        base, extra = divmod(self.dim, parts)
        return tuple(replace(self, name=f"{self.name}@c{i}", dim=base + (i < extra))
                     for i in range(parts))

    def feature_row(self) -> list[float]:
        """This table's raw features in :data:`FEATURE_NAMES` order."""
        return [float(self.rows), float(self.dim), float(self.pooling), float(self.bytes),
                *self.reuse]

    def to_dict(self) -> dict[str, object]:
        return {"name": self.name, "rows": self.rows, "dim": self.dim, "pooling": self.pooling,
                "bytes_per_element": self.bytes_per_element, "reuse": list(self.reuse),
                "access_exponent": self.access_exponent}

    @classmethod
    def from_dict(cls, doc: Mapping[str, object], where: str = "table") -> TableInfo:
        """Inverse of :meth:`to_dict`; a missing or mistyped key raises naming ``where``."""
        try:
            return cls(name=str(doc["name"]), rows=int(doc["rows"]),  # type: ignore[call-overload]
                       dim=int(doc["dim"]), pooling=float(doc["pooling"]),  # type: ignore[arg-type]
                       bytes_per_element=float(doc["bytes_per_element"]),  # type: ignore[arg-type]
                       reuse=tuple(float(r) for r in doc["reuse"]),  # type: ignore[attr-defined]
                       access_exponent=float(doc.get("access_exponent", 0.0)))  # type: ignore[arg-type]
        except KeyError as exc:
            raise TableSetError(f"{where}: missing key {exc.args[0]!r}") from None
        except (TypeError, ValueError) as exc:
            if isinstance(exc, TableSetError):
                raise TableSetError(f"{where}: {exc}") from None
            raise TableSetError(f"{where}: bad value: {exc}") from None


@dataclass(frozen=True)
class TableSet:
    """An ordered set of tables (names unique); the unit a sharding plan assigns.

    Example:
        >>> ts = TableSet.generate(3, seed=1)
        >>> ts.features()[:, 1].tolist() == [float(t.dim) for t in ts.tables]
        True
        >>> ts.total_bytes == sum(t.bytes for t in ts.tables)
        True
    """

    tables: tuple[TableInfo, ...]
    _cache: dict[str, torch.Tensor] = field(default_factory=dict, init=False, repr=False,
                                            compare=False, hash=False)

    def __post_init__(self) -> None:
        names = [t.name for t in self.tables]
        if len(set(names)) != len(names):
            dup = sorted({n for n in names if names.count(n) > 1})
            raise TableSetError(f"table names must be unique; repeated: {', '.join(dup)}")

    def __len__(self) -> int:
        return len(self.tables)

    @cached_property
    def total_bytes(self) -> int:
        return sum(t.bytes for t in self.tables)

    def features(self) -> torch.Tensor:
        """Raw per-table features [T, F] (float32, columns :data:`FEATURE_NAMES`), computed once."""
        if "features" not in self._cache:
            rows = [t.feature_row() for t in self.tables]
            self._cache["features"] = torch.tensor(rows, dtype=torch.float32).reshape(
                len(rows), len(FEATURE_NAMES))
        return self._cache["features"]

    @classmethod
    def from_arch(cls, spec: ArchSpec, pooling: Mapping[str, float] | None = None) -> TableSet:
        """The tables of ``spec``; pooling per table is the sum over its features.

        ``pooling`` maps a feature name (or a table name, which wins) to its mean ids per sample
        (default 1: one-hot features). Access is taken as uniform over rows unless known.
        """
        pooling = dict(pooling or {})
        known = {t.name for t in spec.tables} | {f for t in spec.tables for f in t.features}
        unknown = sorted(set(pooling) - known)
        if unknown:
            raise TableSetError(f"pooling: unknown table or feature {', '.join(map(repr, unknown))}; "
                                f"the architecture has {', '.join(sorted(known))}")
        rng = np.random.default_rng(0)
        out = []
        for t in spec.tables:
            p = pooling[t.name] if t.name in pooling else sum(pooling.get(f, 1.0) for f in t.features)
            ids = access_indices(t.num_embeddings, 0.0, REUSE_WINDOW, rng)
            out.append(TableInfo(t.name, rows=t.num_embeddings, dim=t.dim, pooling=float(p),
                                 bytes_per_element=BYTES_PER_ELEMENT[t.precision],
                                 reuse=reuse_histogram(ids)))
        return cls(tuple(out))

    @classmethod
    def generate(cls, n_tables: int, seed: int, *, rows_range: tuple[float, float] = (1e3, 1e8),
                 dim_range: tuple[int, int] = (4, 256), pooling_alpha: float = 1.3,
                 max_pooling: float = 200.0, exponent_range: tuple[float, float] = (0.0, 1.4),
                 bytes_per_element: float = 4.0, prefix: str = "t") -> TableSet:
        """A realistic random table set, deterministic in ``seed``.

        Rows log-uniform in ``rows_range``; dims uniform over the multiples of 4 in
        ``dim_range``; pooling Pareto(``pooling_alpha``) from 1, capped at ``max_pooling``
        (heavy tail: a few tables look up far more than the rest); access exponent uniform in
        ``exponent_range``, summarised as the reuse histogram of a window of lookups.
        """
        if n_tables < 1:
            raise TableSetError(f"n_tables: expected a positive integer, got {n_tables}")
        lo, hi = rows_range
        if not 1 <= lo <= hi:
            raise TableSetError(f"rows_range: expected 1 <= low <= high, got {rows_range}")
        dims = np.arange(max(4, dim_range[0] + (-dim_range[0]) % 4), dim_range[1] + 1, 4)
        if dims.size == 0:
            raise TableSetError(f"dim_range: no multiple of 4 in {dim_range}")
        rng = np.random.default_rng(seed)
        rows = np.exp(rng.uniform(math.log(lo), math.log(hi), n_tables)).round().astype(np.int64)
        dim = rng.choice(dims, n_tables)
        pooling = np.minimum((1.0 - rng.random(n_tables)) ** (-1.0 / pooling_alpha), max_pooling)
        exponent = rng.uniform(*exponent_range, n_tables)
        tables = []
        for i in range(n_tables):
            r = max(1, int(rows[i]))
            ids = access_indices(r, float(exponent[i]), REUSE_WINDOW, rng)
            tables.append(TableInfo(f"{prefix}{i}", rows=r, dim=int(dim[i]),
                                    pooling=round(float(pooling[i]), 3),
                                    bytes_per_element=bytes_per_element, reuse=reuse_histogram(ids),
                                    access_exponent=round(float(exponent[i]), 4)))
        return cls(tuple(tables))

    def subset(self, indices: Sequence[int]) -> TableSet:
        """The tables at ``indices``, in that order."""
        return TableSet(tuple(self.tables[i] for i in indices))

    def to_dict(self) -> dict[str, object]:
        return {"tables": [t.to_dict() for t in self.tables]}

    @classmethod
    def from_dict(cls, doc: Mapping[str, object], where: str = "table set") -> TableSet:
        tables = doc.get("tables")
        if not isinstance(tables, list):
            raise TableSetError(f"{where}: expected a list under 'tables'")
        return cls(tuple(TableInfo.from_dict(t, f"{where}: tables[{i}]") for i, t in enumerate(tables)))
