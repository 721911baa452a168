"""The options of the synthetic dataset (:class:`SyntheticConfig`) and its named presets.

Example:
    >>> config = SyntheticConfig.from_options(preset="tiny", num_samples=100)
    >>> config.num_fields, config.table_pooling
    (5, (1.0, 1.0, 2.0, 3.0))
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any

from autorec.data.schema import DataError, Schema, SparseFeature

# Quality presets: 6 single-hot tables of 20 to 1000 rows and 500k samples, so that every id is
# seen often enough for its vector to be learned and what separates models is the interaction
# order they can represent, not the estimation of rare ids. With tables up to 10^4 rows and
# 200k samples, every model overfit the tail in 1-2 epochs and the order-3 structure was
# drowned out (BENCHMARKS.md).
_QUALITY: dict[str, Any] = {
    "num_samples": 500_000, "num_dense": 4, "num_tables": 6, "rows": (20, 50, 100, 200, 500, 1000),
    "pooling": 1.0, "zipf_alpha": 1.1, "teacher_dim": 4, "temperature": 0.33,
}

# The scale workload (one-shot search at scale): Criteo Kaggle's 26 table cardinalities capped at
# 10^6 rows, 13 dense features, 5M samples (4M to train), a few multi-hot features, an order-3
# teacher, and planted per-table importance: 5 strong tables that need wide (16-d) embeddings, 13
# of medium weight needing 2, 4 or 8 dims, and 8 pure-noise tables (one of them 10^6 rows).
_CRITEO_ROWS = (1460, 583, 10131227, 2202608, 305, 24, 12517, 633, 3, 93145, 5683, 8351593, 3194, 27,
                14992, 5461306, 10, 5652, 2173, 4, 7046547, 18, 15, 286181, 105, 142572)
_SCALE_WEIGHT = (1, 1, 2, 1, 1, 0, 2, 1, 0, 2, 1, 2, 1, 0, 1, 1, 0, 1, 1, 0, 0, 1, 0, 2, 0, 1)
_SCALE_RANK = (4, 2, 16, 8, 2, 1, 16, 4, 1, 16, 8, 16, 2, 1, 4, 8, 1, 2, 4, 1, 1, 2, 1, 16, 1, 4)
_SCALE_POOLING = tuple(2.0 if t in (3, 14) else 3.0 if t == 10 else 1.0 for t in range(26))

PRESETS: dict[str, dict[str, Any]] = {
    # The benchmark shape: Criteo's 13 dense + 26 single-hot features, 1M rows per table.
    "criteo_like": {"num_samples": 1_000_000, "num_dense": 13, "num_tables": 26, "rows": 1_000_000,
                    "pooling": 1.0, "teacher_order": 2, "teacher_dim": 8},
    "scale": {"num_samples": 5_000_000, "num_dense": 13, "num_tables": 26,
              "rows": tuple(min(r, 1_000_000) for r in _CRITEO_ROWS), "pooling": _SCALE_POOLING,
              "zipf_alpha": 1.05, "teacher_order": 3, "teacher_dim": 16, "interaction_share": 0.6,
              "temperature": 0.5, "table_weight": tuple(float(w) for w in _SCALE_WEIGHT),
              "table_rank": _SCALE_RANK},
    # Quality tests: the order-3 teacher leaves a 2nd-order model visibly short of a 3rd-order one.
    "order2": {**_QUALITY, "teacher_order": 2},
    "order3": {**_QUALITY, "teacher_order": 3, "interaction_share": 0.8},
    # DMT towers: 16 tables in 4 planted groups; features interact (pairwise) only within their
    # group, the dense field only at first order. Tables are dealt to groups in blocks of 4 of
    # equal rows (50, 100, 200, 500), so every group holds one table of each size and a
    # partition that recovers the groups is also balanced in bytes and lookups.
    "groups4": {**_QUALITY, "num_tables": 16, "num_groups": 4,
                "rows": (50,) * 4 + (100,) * 4 + (200,) * 4 + (500,) * 4, "teacher_order": 2,
                "interaction_share": 0.8},
    # Smoke tests and quickstarts.
    "tiny": {"num_samples": 5000, "num_dense": 3, "num_tables": 4, "rows": (50, 100, 200, 1000),
             "pooling": (1.0, 1.0, 2.0, 3.0), "teacher_order": 2, "teacher_dim": 4},
}

ORDER3_FORMS = ("modulated", "diagonal")


@dataclass(frozen=True)
class SyntheticConfig:
    """Everything that shapes a synthetic dataset; ``load_synthetic`` options map onto these fields.

    Args:
        num_samples: samples before the 80/10/10 split.
        num_dense: dense columns ``int_0..``.
        num_tables: sparse features ``cat_0..``, one table each.
        rows: ids per table, one int for all or one per table (up to 10^8 and more: nothing of
            size ``rows`` is allocated).
        pooling: mean lookups per sample, per table or one for all; ``> 1`` makes the feature
            multi-hot with ``1 + Poisson(pooling - 1)`` lookups.
        zipf_alpha: power-law exponent of id popularity (0 is uniform; ~1 is Criteo-like).
        teacher_order: 1, 2 or 3: the highest interaction order planted in the labels.
        teacher_dim: D, the size of the teacher's hidden vectors.
        num_triples: R, the random field triples of the order-3 term.
        order3_form: "modulated" or "diagonal", the shape of the order-3 term (module docstring).
        interaction_share: share of logit variance in the highest-order term (order >= 2).
        temperature: divides the unit-variance teacher score; lower is less label noise.
        base_ctr: mean click probability, reached through the bias.
        table_weight: planted importance, per table or one for all: table ``t``'s hidden vector
            and scalar are scaled by it (its pairwise terms by the product of the two weights), so
            a few tables can carry most of the signal and a weight of 0 makes a table pure noise.
        table_rank: the width a table needs, per table or one for all (1..teacher_dim; 0 means
            teacher_dim): its hidden vectors live in the first ``rank`` of the D coordinates
            (scaled to keep their variance), so an embedding narrower than ``rank`` loses signal
            and one wider gains nothing.
        num_groups: 0 (off) or G planted feature groups: the tables are dealt to G groups in
            blocks of G consecutive tables, each block shuffled by the seed (every group gets
            one table of each block); pairs and triples of the teacher are drawn within groups
            only and the dense field keeps its first-order term only (``feature_groups``).
    """

    num_samples: int = 100_000
    num_dense: int = 13
    num_tables: int = 26
    rows: int | tuple[int, ...] = 100_000
    pooling: float | tuple[float, ...] = 1.0
    zipf_alpha: float = 1.05
    teacher_order: int = 2
    teacher_dim: int = 8
    num_triples: int = 16
    order3_form: str = "modulated"
    interaction_share: float = 0.7
    temperature: float = 0.5
    base_ctr: float = 0.25
    num_groups: int = 0
    table_weight: float | tuple[float, ...] = 1.0
    table_rank: int | tuple[int, ...] = 0

    def __post_init__(self) -> None:
        for name in ("rows", "pooling", "table_weight", "table_rank"):
            value = getattr(self, name)
            if isinstance(value, Sequence) and not isinstance(value, str):
                object.__setattr__(self, name, tuple(value))
        checks = [
            (self.num_samples >= 10, "num_samples must be >= 10"),
            (self.num_dense >= 0, "num_dense must be >= 0"),
            (self.num_tables >= 1, "num_tables must be >= 1"),
            (all(r >= 1 for r in self.table_rows), "rows must be >= 1"),
            (all(m >= 1.0 for m in self.table_pooling), "pooling must be >= 1"),
            (self.zipf_alpha >= 0, "zipf_alpha must be >= 0"),
            (all(w >= 0 for w in self.table_weights), "table_weight must be >= 0"),
            (any(w > 0 for w in self.table_weights) or self.num_dense > 0,
             "table_weight: some table (or a dense feature) must carry signal"),
            (all(0 <= r <= self.teacher_dim for r in self._per_table("table_rank", int)),
             f"table_rank must lie in [0, teacher_dim={self.teacher_dim}]"),
            (self.teacher_order in (1, 2, 3), "teacher_order must be 1, 2 or 3"),
            (self.teacher_dim >= 1, "teacher_dim must be >= 1"),
            (self.num_triples >= 1, "num_triples must be >= 1"),
            (self.order3_form in ORDER3_FORMS,
             f"order3_form must be one of {', '.join(ORDER3_FORMS)}, got {self.order3_form!r}"),
            (0.0 <= self.interaction_share <= 1.0, "interaction_share must lie in [0, 1]"),
            (self.temperature > 0, "temperature must be > 0"),
            (0.0 < self.base_ctr < 1.0, "base_ctr must lie in (0, 1)"),
            (0 <= self.num_groups <= self.num_tables,
             f"num_groups must lie in [0, num_tables={self.num_tables}], got {self.num_groups}"),
            (self.num_fields >= self.teacher_order,
             f"teacher_order {self.teacher_order} needs as many fields (tables + dense)"),
        ]
        for ok, message in checks:
            if not ok:
                raise DataError(f"synthetic: {message}")

    @classmethod
    def from_options(cls, preset: str | None = None, **options: Any) -> SyntheticConfig:
        """A preset (see ``PRESETS``) overridden by ``options``; unknown names are errors."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(options) - known)
        if unknown:
            raise DataError(f"synthetic: unknown option(s) {', '.join(unknown)}; "
                            f"expected preset or one of {', '.join(sorted(known))}")
        if preset is not None and preset not in PRESETS:
            raise DataError(f"synthetic: unknown preset {preset!r}; expected one of {', '.join(PRESETS)}")
        return cls(**{**PRESETS.get(preset or "", {}), **options})

    @property
    def table_rows(self) -> tuple[int, ...]:
        return self._per_table("rows", int)

    @property
    def table_pooling(self) -> tuple[float, ...]:
        return self._per_table("pooling", float)

    @property
    def table_weights(self) -> tuple[float, ...]:
        return self._per_table("table_weight", float)

    @property
    def table_ranks(self) -> tuple[int, ...]:
        """The hidden width of each table (``table_rank``, 0 read as teacher_dim)."""
        return tuple(r or self.teacher_dim for r in self._per_table("table_rank", int))

    @property
    def num_fields(self) -> int:
        """F: one field per table, plus one for the projected dense features."""
        return self.num_tables + (self.num_dense > 0)

    def _per_table(self, name: str, kind: type) -> tuple:
        value = getattr(self, name)
        if not isinstance(value, tuple):
            return (kind(value),) * self.num_tables
        if len(value) != self.num_tables:
            raise DataError(f"synthetic: {name} has {len(value)} entries for {self.num_tables} tables")
        return tuple(kind(v) for v in value)

    def schema(self) -> Schema:
        return Schema(
            dense=tuple(f"int_{i}" for i in range(self.num_dense)),
            sparse=tuple(SparseFeature(f"cat_{t}", rows, multi_hot=pooling > 1.0)
                         for t, (rows, pooling) in enumerate(zip(self.table_rows, self.table_pooling,
                                                                 strict=True))),
        )
