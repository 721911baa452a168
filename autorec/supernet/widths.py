"""Embedding-width choices in the supernet: which columns of a feature's one table each width reads.

Two layouts (the supernet's ``width_columns``):

- ``shared`` (the default): the table is as wide as the widest choice and width ``w`` reads its
  first ``w`` columns, so narrow columns are trained by every path that keeps the feature and
  wide ones only by the wide paths. Inherited weights then flatter the narrow widths: on the scale
  workload the proxy ranked width 4 above 8 while stand-alone trainings put 8 ahead by 0.015 AUC
  (BENCHMARKS.md, issue 20).
- ``own``: each non-zero width reads its own block of columns (the table is as wide as the
  widths summed: 4 + 8 + 16 = 28 for the widths 4, 8, 16), so every width's weights are trained
  on the steps that chose it, and only on those, as a stand-alone model of that width would be.
  It costs the wider table (lookups and memory grow by the sum over the widest).

A width equal to D reads its columns unprojected in both layouts; the others pass through the
matching input columns of one per-feature projection to D (:func:`~autorec.supernet.mixed.projected_width`).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from autorec.space import SearchSpace
from autorec.supernet.mixed import SupernetError

WIDTH_COLUMNS = ("shared", "own")


@dataclass(frozen=True)
class EmbeddingWidths:
    """The width choice's values (``embedding.dim`` or ``dim_ratio`` entries), the table width
    each gives, and the first table column each reads.

    Example:
        >>> from autorec.space import SearchSpace
        >>> space = SearchSpace.from_dict({"dim": [16], "embedding": {"dim": [0, 4, 8, 16]}})
        >>> own = embedding_widths(space, 16, "own")
        >>> own.offsets, own.table_width
        ((0, 0, 4, 12), 28)
        >>> embedding_widths(space, 16).offsets, embedding_widths(space, 16).table_width
        ((0, 0, 0, 0), 16)
    """

    values: tuple[Any, ...]
    widths: tuple[int, ...]
    offsets: tuple[int, ...]

    @property
    def table_width(self) -> int:
        """Columns of each feature's supernet table."""
        return max(o + w for o, w in zip(self.offsets, self.widths, strict=True))


def embedding_widths(space: SearchSpace, dim: int, columns: str = "shared") -> EmbeddingWidths:
    """The supernet's embedding widths at D = ``dim``, laid out as ``columns`` says (see the
    module docstring); a SupernetError for an unknown layout or a ratio giving a width below 1."""
    if columns not in WIDTH_COLUMNS:
        raise SupernetError(f"width_columns: expected one of {', '.join(WIDTH_COLUMNS)}, got {columns!r}")
    emb = space.embedding
    if emb.dim is not None:  # 0 (a dropped feature) reads no column: a zero vector
        values: tuple[Any, ...] = tuple(emb.dim)
        widths = tuple(int(v) for v in values)
    else:
        values = tuple(emb.dim_ratio)
        widths = tuple(int(Fraction(str(r)) * dim) for r in values)
        if any(w < 1 for w in widths):
            raise SupernetError(f"{space.source}: embedding.dim_ratio {values} gives a table width "
                                f"below 1 at dim {dim}")
    if columns == "shared":
        return EmbeddingWidths(values, widths, (0,) * len(widths))
    offsets, start = [], 0
    for w in widths:
        offsets.append(start)
        start += w
    return EmbeddingWidths(values, widths, tuple(offsets))
