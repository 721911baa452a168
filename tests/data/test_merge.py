"""Batches joined along the batch: the same samples, in order, as one batch of them all."""

import pytest
import torch
from torchrec.datasets.utils import Batch
from torchrec.sparse.jagged_tensor import KeyedJaggedTensor

from autorec.data import Jagged, Schema, SparseFeature, TabularData
from autorec.data.merge import concat_batches, merged

SCHEMA = Schema(dense=("x",), sparse=(SparseFeature("u", 10), SparseFeature("tags", 20, multi_hot=True)))


def table(n: int) -> TabularData:
    lengths = torch.tensor([(3 * i) % 4 for i in range(n)])  # some rows hold no tag
    values = torch.arange(int(lengths.sum())) % 20
    return TabularData(SCHEMA, torch.arange(n, dtype=torch.float32)[:, None],
                       (Jagged.single(torch.arange(n) % 10), Jagged.from_lengths(values, lengths)),
                       (torch.arange(n) % 2).float())


def same(a: Batch, b: Batch) -> None:
    assert torch.equal(a.dense_features, b.dense_features) and torch.equal(a.labels, b.labels)
    assert a.sparse_features.keys() == b.sparse_features.keys()
    for key in a.sparse_features.keys():
        x, y = a.sparse_features[key], b.sparse_features[key]
        assert torch.equal(x.values(), y.values()) and torch.equal(x.lengths(), y.lengths()), key


def test_joined_batches_are_the_batch_of_their_samples_in_order():
    data = table(23)
    order = torch.randperm(23, generator=torch.Generator().manual_seed(0))
    parts = [data.batch(order[i:i + 5]) for i in range(0, 23, 5)]  # 5, 5, 5, 5, 3
    same(concat_batches(parts), data.batch(order))
    joined = merged(parts, 10)
    assert [len(b.labels) for b in joined] == [10, 10, 3]
    for got, start in zip(joined, (0, 10, 20), strict=True):
        same(got, data.batch(order[start:start + 10]))
    assert merged(parts, 3)[0] is parts[0]  # a batch larger than the join is kept whole


def test_per_id_weights_travel_with_their_ids():
    def batch(ids, lengths, weights):
        kjt = KeyedJaggedTensor(keys=["a", "b"], values=torch.tensor(ids), lengths=torch.tensor(lengths),
                                weights=torch.tensor(weights))
        return Batch(torch.zeros(2, 1), kjt, torch.zeros(2))

    out = concat_batches([batch([1, 2, 3], [1, 1, 0, 1], [0.1, 0.2, 0.3]),
                          batch([4, 5, 6], [2, 0, 1, 0], [0.4, 0.5, 0.6])]).sparse_features
    assert out["a"].values().tolist() == [1, 2, 4, 5] and out["a"].lengths().tolist() == [1, 1, 2, 0]
    assert out["a"].weights().tolist() == pytest.approx([0.1, 0.2, 0.4, 0.5])
    assert out["b"].values().tolist() == [3, 6] and out["b"].weights().tolist() == pytest.approx([0.3, 0.6])


def test_bad_joins_are_refused_with_what_is_wrong():
    data = table(4)
    other = Batch(torch.zeros(1, 1), KeyedJaggedTensor(keys=["u"], values=torch.tensor([1]),
                                                     lengths=torch.tensor([1])), torch.zeros(1))
    with pytest.raises(ValueError, match=r"batch 1 has sparse keys \['u'\], batch 0 has \['u', 'tags'\]"):
        concat_batches([data.batch(torch.arange(2)), other])
    with pytest.raises(ValueError, match="no batches given"):
        concat_batches([])
    with pytest.raises(ValueError, match="samples must be positive, got 0"):
        merged([data.batch(torch.arange(2))], 0)

    short = Batch(torch.zeros(3, 1), KeyedJaggedTensor(keys=["u", "tags"], values=torch.tensor([1, 2]),
                                                     lengths=torch.tensor([1, 1])), torch.zeros(3))
    with pytest.raises(ValueError, match=r"batch 1 holds 2 lengths for 2 keys and 3 labels; expected one "
                                         r"length per key and sample \(6\)"):
        concat_batches([data.batch(torch.arange(2)), short])
    # three samples' lengths for one key and one for the other: as many lengths as 2 keys x 2 labels
    variable = KeyedJaggedTensor(keys=["u", "tags"], values=torch.tensor([1, 2, 3, 4]),
                                 lengths=torch.tensor([1, 1, 1, 1]), stride_per_key_per_rank=[[3], [1]])
    with pytest.raises(ValueError, match="not a variable batch per key"):
        concat_batches([Batch(torch.zeros(2, 1), variable, torch.zeros(2)), data.batch(torch.arange(2))])
