"""Batches of the same keys joined into fewer, larger ones: the same samples in the same order.

A forward pass that only scores (no gradient) costs a fixed Python price per call on top of its
arithmetic; the supernet's, which reads its choices' gates module by module, is about a third of
the time of a pass over 1024 samples on the scale workload. Scoring the same validation samples
in batches of 8192 pays that price an eighth as often and gives each sample the logit it had, up
to float rounding (each sample's row is computed alone): on the scale supernet the same AUC to
the last digit, in 0.63 of the time (BENCHMARKS.md, "`k55`: paths scored in joined batches").
torchrec's ``KeyedJaggedTensor.concat`` joins tensors of different keys; joining
along the batch is written here: per key, the values and lengths of each batch in turn.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import torch
from torchrec.datasets.utils import Batch
from torchrec.sparse.jagged_tensor import KeyedJaggedTensor


def concat_batches(batches: Sequence[Batch]) -> Batch:
    """One Batch holding ``batches``' samples in order (all with the same sparse keys).

    Shapes: dense [B_i, n_dense] -> [sum B_i, n_dense]; labels [B_i] -> [sum B_i]; the KJT's
    values, lengths and weights (if any) regrouped key by key.

    Example:
        >>> def batch(ids, lengths):
        ...     kjt = KeyedJaggedTensor(keys=["a", "b"], values=torch.tensor(ids),
        ...                             lengths=torch.tensor(lengths))
        ...     return Batch(torch.zeros(2, 1), kjt, torch.zeros(2))
        >>> out = concat_batches([batch([1, 2, 3], [1, 1, 0, 1]), batch([4, 5], [1, 0, 1, 0])])
        >>> out.sparse_features.to_dict()["a"].values().tolist(), out.dense_features.shape
        ([1, 2, 4], torch.Size([4, 1]))
        >>> out.sparse_features.to_dict()["b"].lengths().tolist()
        [0, 1, 1, 0]
    """
    if not batches:
        raise ValueError("concat_batches: no batches given")
    if len(batches) == 1:
        return batches[0]
    keys = batches[0].sparse_features.keys()
    for i, b in enumerate(batches):
        if b.sparse_features.keys() != keys:
            raise ValueError(f"concat_batches: batch {i} has sparse keys {b.sparse_features.keys()}, "
                             f"batch 0 has {keys}")
        kjt = b.sparse_features  # every key one length per sample: the regrouping below reads them so
        if kjt.variable_stride_per_key() or kjt.lengths().numel() != len(keys) * len(b.labels):
            raise ValueError(f"concat_batches: batch {i} holds {kjt.lengths().numel()} lengths for "
                             f"{len(keys)} keys and {len(b.labels)} labels; expected one length per key "
                             f"and sample ({len(keys) * len(b.labels)}), not a variable batch per key")
    weighted = batches[0].sparse_features.weights_or_none() is not None
    values: list[list[torch.Tensor]] = [[] for _ in keys]
    lengths: list[list[torch.Tensor]] = [[] for _ in keys]
    weights: list[list[torch.Tensor]] = [[] for _ in keys]
    for b in batches:
        kjt = b.sparse_features
        per_key = kjt.length_per_key()
        for k, (v, n) in enumerate(zip(kjt.values().split(per_key), kjt.lengths().view(len(keys), -1),
                                       strict=True)):
            values[k].append(v)
            lengths[k].append(n)
        if weighted:
            for k, w in enumerate(kjt.weights().split(per_key)):
                weights[k].append(w)
    sparse = KeyedJaggedTensor(
        keys=keys, values=torch.cat([t for per in values for t in per]),
        lengths=torch.cat([t for per in lengths for t in per]),
        weights=torch.cat([t for per in weights for t in per]) if weighted else None)
    return Batch(dense_features=torch.cat([b.dense_features for b in batches]), sparse_features=sparse,
                 labels=torch.cat([b.labels for b in batches]))


def merged(batches: Iterable[Batch], samples: int) -> list[Batch]:
    """``batches`` joined in order into batches of at most ``samples`` samples each (a batch
    larger than ``samples`` is kept whole).

    Example:
        >>> kjt = KeyedJaggedTensor(keys=["a"], values=torch.tensor([1, 2]), lengths=torch.tensor([1, 1]))
        >>> two = Batch(torch.zeros(2, 1), kjt, torch.zeros(2))
        >>> [len(b.labels) for b in merged([two] * 5, 4)]
        [4, 4, 2]
    """
    if samples < 1:
        raise ValueError(f"merged: samples must be positive, got {samples}")
    out: list[Batch] = []
    group: list[Batch] = []
    size = 0
    for b in batches:
        n = len(b.labels)
        if group and size + n > samples:
            out.append(concat_batches(group))
            group, size = [], 0
        group.append(b)
        size += n
    if group:
        out.append(concat_batches(group))
    return out
