"""What a dataset holds: named dense columns and named sparse (jagged) features."""

from __future__ import annotations

from dataclasses import dataclass


class DataError(ValueError):
    """Input data is malformed; the message names the file (and line) and what was expected."""


@dataclass(frozen=True)
class SparseFeature:
    """A categorical feature whose ids lie in ``[0, num_embeddings)``.

    ``multi_hot`` features carry a variable number of ids per sample (jagged, never truncated).
    """

    name: str
    num_embeddings: int
    multi_hot: bool = False


@dataclass(frozen=True)
class Schema:
    """Column layout of every :class:`~torchrec.datasets.utils.Batch` a dataset yields.

    ``dense`` names the columns of ``Batch.dense_features`` [B, n_dense]; ``sparse`` gives the
    keys of ``Batch.sparse_features`` in order.
    """

    dense: tuple[str, ...]
    sparse: tuple[SparseFeature, ...]

    @property
    def n_dense(self) -> int:
        return len(self.dense)

    @property
    def sparse_names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.sparse)

    def feature(self, name: str) -> SparseFeature:
        for f in self.sparse:
            if f.name == name:
                return f
        raise KeyError(f"no sparse feature {name!r}; the schema has {', '.join(self.sparse_names)}")
