import pytest
import torch

from autorec.data import DataError, Jagged, Schema, SparseFeature, TabularData
from autorec.data.tabular import TabularBatches

SCHEMA = Schema(dense=("x",), sparse=(SparseFeature("u", 10), SparseFeature("tags", 20, multi_hot=True)))


def table(n=10):
    lengths = torch.tensor([i % 4 for i in range(n)])
    values = torch.arange(int(lengths.sum())) % 20
    return TabularData(SCHEMA, torch.arange(n, dtype=torch.float32)[:, None],
                       (Jagged.single(torch.arange(n) % 10), Jagged.from_lengths(values, lengths)),
                       (torch.arange(n) % 2).float())


def test_take_gathers_whole_jagged_rows_in_order():
    data = table()
    tags = data.sparse[1]
    idx = torch.tensor([7, 0, 3, 3, 9])
    values, lengths = tags.take(idx)
    expected = [tags.values[tags.offsets[i]:tags.offsets[i + 1]].tolist() for i in idx.tolist()]
    assert lengths.tolist() == [len(e) for e in expected]
    assert values.tolist() == [v for e in expected for v in e]


def test_batch_is_a_torchrec_batch_with_jagged_features():
    batch = table().batch(torch.tensor([1, 2, 3]))
    assert batch.dense_features.shape == (3, 1)
    assert batch.sparse_features.keys() == ["u", "tags"]
    assert batch.sparse_features["tags"].lengths().tolist() == [1, 2, 3]
    assert batch.labels.tolist() == [1.0, 0.0, 1.0]


def test_split_is_disjoint_complete_and_seeded():
    data = table(100)
    parts = data.split((0.8, 0.1, 0.1), seed=0)
    assert [len(p) for p in parts] == [80, 10, 10]
    seen = torch.cat([p.dense[:, 0] for p in parts]).sort().values
    assert torch.equal(seen, data.dense[:, 0])
    again = data.split((0.8, 0.1, 0.1), seed=0)
    other = data.split((0.8, 0.1, 0.1), seed=1)
    assert torch.equal(parts[1].dense, again[1].dense)
    assert not torch.equal(parts[1].dense, other[1].dense)
    # The multi-hot column travels with its rows.
    for part in parts:
        assert torch.equal(part.sparse[1].offsets.diff(), (part.dense[:, 0].long() % 4))


def test_batches_cover_an_epoch_and_reshuffle_per_epoch():
    source = TabularBatches(table(10), 4, shuffle=True, seed=0)
    first = [b.dense_features[:, 0].tolist() for b in source]
    assert len(source) == 3 and sorted(x for b in first for x in b) == list(range(10))
    source.epoch = 1
    assert [b.dense_features[:, 0].tolist() for b in source] != first


def test_out_of_range_ids_are_rejected():
    with pytest.raises(DataError, match=r"'u' has ids outside \[0, 10\)"):
        TabularData(SCHEMA, torch.zeros(2, 1), (Jagged.single(torch.tensor([3, 10])),
                                                Jagged.single(torch.tensor([1, 1]))), torch.zeros(2))


def test_dataloader_workers_split_batches_without_duplicates():
    from autorec.data import InMemoryDataset

    ds = InMemoryDataset("t", {"train": table(50), "val": table(10), "test": table(10)})
    plain = [b.dense_features[:, 0].tolist() for b in ds.loader("train", 8, shuffle=True, num_workers=0)]
    loaded = [b.dense_features[:, 0].tolist() for b in ds.loader("train", 8, shuffle=True, num_workers=2)]
    assert loaded == plain and sorted(x for b in loaded for x in b) == list(range(50))


@pytest.mark.parametrize("shuffle", [True, False])
def test_batches_from_a_start_are_the_tail_of_the_whole_order(shuffle):
    source = TabularBatches(table(10), 3, shuffle=shuffle, seed=4)
    source.epoch = 2
    whole = [b.labels.tolist() + b.dense_features.flatten().tolist() for b in source]
    for start in (0, 1, 3, 4, 9):
        tail = [b.labels.tolist() + b.dense_features.flatten().tolist() for b in source.iter_from(start)]
        assert tail == whole[start:], start


@pytest.mark.parametrize("rows", [10, 2**31 + 1])  # ids held as int32, or int64 past its range
def test_a_batch_reads_single_id_columns_sample_major_as_each_columns_take(rows):
    """``batch`` gathers the one-id columns from one sample-major copy: the KJT is the one the
    columns' own ``take`` give, in schema order, between and beside multi-hot columns."""
    schema = Schema(dense=("x",), sparse=(SparseFeature("a", rows), SparseFeature("tags", 20, multi_hot=True),
                                          SparseFeature("b", rows), SparseFeature("c", rows)))
    n = 12
    lengths = torch.tensor([i % 3 for i in range(n)])
    columns = (Jagged.single(torch.arange(n) % 10), Jagged.from_lengths(torch.arange(int(lengths.sum())) % 20,
               lengths), Jagged.single(9 - torch.arange(n) % 10), Jagged.single(torch.arange(n) % 7))
    data = TabularData(schema, torch.randn(n, 1), columns, torch.zeros(n))
    idx = torch.tensor([5, 0, 11, 5, 3])
    kjt = data.batch(idx).sparse_features
    want = [column.take(idx) for column in columns]
    assert kjt.values().dtype == torch.int64
    assert kjt.values().tolist() == torch.cat([v for v, _ in want]).tolist()
    assert kjt.lengths().tolist() == torch.cat([n for _, n in want]).tolist()
    assert data._single_ids[1].dtype == (torch.int32 if rows < 2**31 else torch.int64)
