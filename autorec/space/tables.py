"""The embedding tables a space makes for a schema: per feature group its width (0 drops the
group's features), precision and hash size, and how many distinct table sets that gives.

``embedding.dim`` may hold 0: the group's features are then dropped (no table; the ArchSpec lists
them in ``dropped``), so the interaction stack gets fewer input vectors. ``embedding.hash`` holds
fractions in (0, 1]: a kept table gets ``max(1, round(fraction * cardinality))`` rows and, when
that is fewer than the cardinality, ``hash_from`` (its ids are folded by modulo). At least one
table stays: choices that drop every group give the last group its narrowest width, first
precision and first hash size (so parameter names never depend on the order of the features,
which an ArchSpec with dropped features does not record).

Example:
    >>> from autorec.data import Schema, SparseFeature
    >>> from autorec.space import SearchSpace
    >>> schema = Schema((), (SparseFeature("u", 1000), SparseFeature("i", 10)))
    >>> space = SearchSpace.from_dict({"dim": [8], "embedding": {"dim": [0, 8], "hash": [1, 0.1]}})
    >>> space.size(schema)  # u and i each: dropped, or 8 wide at 2 hash sizes; not both dropped
    8
    >>> spec = space.from_params({"emb.u": 8, "emb.u.hash": 0.1, "emb.i": 0}, schema)
    >>> spec.tables[0].num_embeddings, spec.tables[0].hash_from, spec.dropped
    (100, 1000, ('i',))
"""

from __future__ import annotations

from fractions import Fraction
from typing import TYPE_CHECKING, Any

from autorec.arch import ArchSpec, TableSpec

if TYPE_CHECKING:
    from autorec.data.schema import Schema
    from autorec.space import SearchSpace
    from autorec.space.choosers import Chooser
    from autorec.space.parse import EmbeddingChoices


def hashed_rows(cardinality: int, fraction: Any) -> int:
    """Rows of a table hashed to ``fraction`` of ``cardinality`` ids (at least 1, at most all)."""
    return min(cardinality, max(1, round(cardinality * float(fraction))))


def can_drop(emb: EmbeddingChoices) -> bool:
    return emb.dim is not None and 0 in emb.dim


def choose_tables(space: SearchSpace, chooser: Chooser, schema: Schema,
                  groups: tuple[tuple[str, tuple[str, ...]], ...], dim: int,
                  target: ArchSpec | None) -> tuple[tuple[TableSpec, ...], tuple[str, ...]]:
    """(tables in schema order, dropped features): the embedding part of one walk."""
    emb = space.embedding
    by_feature = {t.features[0]: t for t in target.tables} if target else {}
    dropped_target = set(target.dropped) if target else set()
    cards = {f.name: f.num_embeddings for f in schema.sparse}
    width: dict[str, int] = {}
    precision: dict[str, str] = {}
    rows: dict[str, int] = {}
    kept = 0
    for group, features in groups:
        table = by_feature.get(features[0])
        if emb.dim is not None:
            want = None if target is None else (0 if features[0] in dropped_target else
                                                getattr(table, "dim", None))
            group_width = chooser.choose(f"emb.{group}", emb.dim, want)
        else:
            want = _ratio_of(emb.dim_ratio, table.dim, dim) if table else None
            group_width = int(Fraction(str(chooser.choose(f"emb.{group}", emb.dim_ratio, want))) * dim)
        for name in features:
            width[name] = group_width
        if not group_width:
            continue
        kept += 1
        group_precision = chooser.choose(f"emb.{group}.precision", emb.precision,
                                         getattr(table, "precision", None))
        fraction = chooser.choose(f"emb.{group}.hash", emb.hash, _fraction_of(emb.hash, table, features,
                                                                              by_feature, cards))
        for name in features:
            precision[name], rows[name] = group_precision, hashed_rows(cards[name], fraction)
    if not kept:  # every group dropped: the last one stays, as narrow as the space allows
        assert emb.dim is not None
        for name in groups[-1][1]:
            width[name] = min(w for w in emb.dim if w)
            precision[name], rows[name] = emb.precision[0], hashed_rows(cards[name], emb.hash[0])
    tables = tuple(TableSpec(name=f"t_{f.name}", features=(f.name,), num_embeddings=rows[f.name],
                             dim=width[f.name], precision=precision[f.name],
                             hash_from=f.num_embeddings if rows[f.name] < f.num_embeddings else None)
                   for f in schema.sparse if width[f.name])
    return tables, tuple(f.name for f in schema.sparse if not width[f.name])


def table_ways(emb: EmbeddingChoices, schema: Schema,
               groups: tuple[tuple[str, tuple[str, ...]], ...]) -> dict[int, int]:
    """Kept sparse features -> the number of distinct table sets keeping that many."""
    cards = {f.name: f.num_embeddings for f in schema.sparse}
    widths = emb.dim if emb.dim is not None else emb.dim_ratio
    nonzero = sum(1 for w in widths if w)
    ways = {0: 1}
    for _, features in groups:
        sizes = len({tuple(hashed_rows(cards[f], h) for f in features) for h in emb.hash})
        keep = nonzero * len(emb.precision) * sizes
        step: dict[int, int] = {}
        for count, n in ways.items():
            step[count + len(features)] = step.get(count + len(features), 0) + n * keep
            if nonzero < len(widths):  # 0 among the widths: the group may be dropped
                step[count] = step.get(count, 0) + n
        ways = step
    ways.pop(0, None)  # at least one table
    return ways


def _fraction_of(hashes: tuple[Any, ...], table: TableSpec | None, features: tuple[str, ...],
                 by_feature: dict[str, TableSpec], cards: dict[str, int]) -> Any:
    """The hash fraction that gives the target's table rows (the first, if several do)."""
    if table is None:
        return None
    for fraction in hashes:
        if all(hashed_rows(cards[f], fraction) == by_feature[f].num_embeddings for f in features):
            return fraction
    return table.num_embeddings / cards[features[0]]


def _ratio_of(ratios: tuple[Any, ...], width: int, dim: int) -> Any:
    """The ratio choice giving a table ``width`` wide at ``dim``, else the ratio itself."""
    for ratio in ratios:
        if Fraction(str(ratio)) * dim == width:
            return ratio
    return width / dim
