"""Hash sizes in the supernet: one full table per feature, looked up with ids folded to fewer rows.

A hash choice's values are fractions of a table's rows. Every value reads the same full table
with its ids taken modulo that value's rows (:func:`autorec.models.fold_ids`), so the first
``r`` rows are shared by every value with ``r`` rows or more, as widths share their first
columns. On a one-hot path (each group's weights a single 1) every feature's ids are folded by
its own group's value and all features are looked up at once: one lookup per step, whatever
mix of values the groups chose. Otherwise each value with a non-zero weight in some group
costs one lookup of every feature, and the groups mix them by their weights.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torchrec.sparse.jagged_tensor import KeyedJaggedTensor

from autorec.models import fold_ids
from autorec.supernet.mixed import Weights, one_hot_index

if TYPE_CHECKING:
    from autorec.supernet.supernet import Supernet


def pooled_by_hash(net: Supernet, sparse: KeyedJaggedTensor, weights: Weights) -> dict[str, torch.Tensor]:
    """Pooled embeddings per feature, mixed over the hash values by their weights (a value
    whose weight is 0 for every group is not looked up: one lookup on a one-hot path)."""
    if len(net.hash_values) == 1:
        if net.hash_values[0] >= 1:
            return net.sparse_arch(sparse).to_dict()
        return net.sparse_arch(fold_ids(sparse, net.hash_row_maps[0])).to_dict()
    per_group = {group: net.weights_of(weights, f"emb.{group}.hash", len(net.hash_values))
                 for group, _ in net.groups}
    chosen = {group: one_hot_index(w) for group, w in per_group.items()}
    if all(k is not None for k in chosen.values()):
        rows = {name: net.hash_row_maps[chosen[group]][name] for group, features in net.groups
                for name in features}
        looked = net.sparse_arch(fold_ids(sparse, rows)).to_dict()
        # times the weight (1): a straight-through estimator's gradient still reaches it
        return {name: per_group[group][chosen[group]] * looked[name] for group, features in net.groups
                for name in features}
    out: dict[str, torch.Tensor] = {}
    for k in range(len(net.hash_values)):
        if all(float(w[k]) == 0.0 for w in per_group.values()):
            continue
        folded = fold_ids(sparse, net.hash_row_maps[k])
        looked = net.sparse_arch(folded).to_dict()
        for group, features in net.groups:
            for name in features:
                term = per_group[group][k] * looked[name]
                out[name] = term if name not in out else out[name] + term
    return out

