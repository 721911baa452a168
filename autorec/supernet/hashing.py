"""Hash sizes in the supernet: one table per feature, looked up with ids folded to fewer rows.

A hash choice's values are fractions of a table's rows; each value's ids are taken modulo that
value's rows (:func:`autorec.models.fold_ids`). Two layouts (the supernet's ``hash_rows``):

- ``shared`` (the default): every value reads the same full table, so the first ``r`` rows are
  shared by every value with ``r`` rows or more, as widths share their first columns. Those rows
  are trained mostly as the unhashed ids' own, and the proxy under-rates what folding costs: on
  the scale workload a per-feature winner with 13 of 21 tables hashed tested 0.023 below the
  same model with every row (BENCHMARKS.md, issue 20).
- ``own``: each value below 1 reads its own block of rows after the full table's (a table of
  ``card`` ids at the values 1, 0.25 and 0.05 holds ``card`` + its 25% + its 5% rows), trained
  only on the steps that chose it, with its ids colliding as a derived hashed table's do. On the
  scale workload it did not price the folding in either (the same winner scored 0.0007 higher
  hashed: BENCHMARKS.md, `k14`), so it is an option, not the default.

On a one-hot path (each group's weights a single 1) every feature's ids are folded by
its own group's value and all features are looked up at once: one lookup per step, whatever
mix of values the groups chose. Otherwise each value with a non-zero weight in some group
costs one lookup of every feature, and the groups mix them by their weights.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import torch
from torchrec.sparse.jagged_tensor import KeyedJaggedTensor

from autorec.models import fold_ids
from autorec.space.tables import hashed_rows
from autorec.supernet.mixed import SupernetError, Weights, one_hot_index

if TYPE_CHECKING:
    from autorec.supernet.supernet import Supernet


HASH_ROWS = ("shared", "own")


class HashLayout(NamedTuple):
    """Per hash value, feature -> the rows its ids fold to (``rows``) and the first of them in
    the supernet's table (``offsets``); feature -> the supernet table's rows (``table_rows``)."""

    rows: tuple[dict[str, int], ...]
    offsets: tuple[dict[str, int], ...]
    table_rows: dict[str, int]


def hash_layout(cards: Mapping[str, int], values: Sequence[Any],
                hash_rows: str = "shared") -> HashLayout:
    """The rows of every hash value of every feature (``cards``: feature -> ids) in layout
    ``hash_rows`` (see the module docstring).

    Example:
        >>> own = hash_layout({"a": 100}, [1, 0.25, 0.05], "own")
        >>> own.rows, own.offsets, own.table_rows
        (({'a': 100}, {'a': 25}, {'a': 5}), ({'a': 0}, {'a': 100}, {'a': 125}), {'a': 130})
        >>> hash_layout({"a": 100}, [1, 0.25], "shared").table_rows
        {'a': 100}
    """
    if hash_rows not in HASH_ROWS:
        raise SupernetError(f"hash_rows: expected one of {', '.join(HASH_ROWS)}, got {hash_rows!r}")
    rows = tuple({name: hashed_rows(card, h) for name, card in cards.items()} for h in values)
    if hash_rows == "shared":
        return HashLayout(rows, tuple({name: 0 for name in cards} for _ in values), dict(cards))
    offsets: list[dict[str, int]] = []
    table_rows = dict(cards)  # the full block first, whether or not the values hold 1
    for h, by_name in zip(values, rows, strict=True):
        if float(h) >= 1:
            offsets.append({name: 0 for name in cards})
            continue
        offsets.append(dict(table_rows))
        table_rows = {name: table_rows[name] + by_name[name] for name in cards}
    return HashLayout(rows, tuple(offsets), table_rows)


def pooled_by_hash(net: Supernet, sparse: KeyedJaggedTensor, weights: Weights) -> dict[str, torch.Tensor]:
    """Pooled embeddings per feature, mixed over the hash values by their weights (a value
    whose weight is 0 for every group is not looked up: one lookup on a one-hot path)."""
    if len(net.hash_values) == 1:
        if net.hash_values[0] >= 1:
            return net.sparse_arch(sparse).to_dict()
        return net.sparse_arch(fold_ids(sparse, net.hash_row_maps[0], net.hash_offsets[0])).to_dict()
    per_group = {group: net.weights_of(weights, f"emb.{group}.hash", len(net.hash_values))
                 for group, _ in net.groups}
    chosen = {group: one_hot_index(w) for group, w in per_group.items()}
    if all(k is not None for k in chosen.values()):
        rows = {name: net.hash_row_maps[chosen[group]][name] for group, features in net.groups
                for name in features}
        offsets = {name: net.hash_offsets[chosen[group]][name] for group, features in net.groups
                   for name in features}
        looked = net.sparse_arch(fold_ids(sparse, rows, offsets)).to_dict()
        # times the weight (1): a straight-through estimator's gradient still reaches it
        return {name: per_group[group][chosen[group]] * looked[name] for group, features in net.groups
                for name in features}
    out: dict[str, torch.Tensor] = {}
    for k in range(len(net.hash_values)):
        if all(float(w[k]) == 0.0 for w in per_group.values()):
            continue
        folded = fold_ids(sparse, net.hash_row_maps[k], net.hash_offsets[k])
        looked = net.sparse_arch(folded).to_dict()
        for group, features in net.groups:
            for name in features:
                term = per_group[group][k] * looked[name]
                out[name] = term if name not in out else out[name] + term
    return out

