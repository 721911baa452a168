"""The synthetic dataset: shapes, determinism, id popularity, memory, CTR, Bayes AUC, teacher order."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest
import torch
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from torchrec.datasets.utils import Batch

from autorec.data import DataError, Jagged, TabularData, load_dataset
from autorec.data.base import SPLITS
from autorec.data.splits import SplitRule
from autorec.data.synthetic import ORDER3_FORMS, PRESETS, SyntheticConfig, SyntheticDataset, load_synthetic

SMALL = {"preset": "tiny", "num_samples": 4000}


def all_ids(ds: SyntheticDataset, table: int) -> torch.Tensor:
    return torch.cat([ds.splits[s].sparse[table].values for s in SPLITS])


def lengths(column: Jagged) -> torch.Tensor:
    return column.offsets[1:] - column.offsets[:-1]


def test_shapes_schema_and_batches() -> None:
    ds = load_dataset("synthetic", seed=0, **SMALL)
    assert isinstance(ds, SyntheticDataset)
    assert ds.schema.dense == ("int_0", "int_1", "int_2")
    assert ds.schema.sparse_names == ("cat_0", "cat_1", "cat_2", "cat_3")
    assert [f.num_embeddings for f in ds.schema.sparse] == [50, 100, 200, 1000]
    assert [f.multi_hot for f in ds.schema.sparse] == [False, False, True, True]
    assert [ds.num_rows(s) for s in SPLITS] == [3200, 400, 400]
    batch = next(iter(ds.batches("train", 64, shuffle=True)))
    assert isinstance(batch, Batch)
    assert batch.dense_features.shape == (64, 3) and batch.dense_features.dtype == torch.float32
    assert batch.labels.shape == (64,) and batch.labels.dtype == torch.float32
    assert set(batch.labels.unique().tolist()) <= {0.0, 1.0}
    assert batch.sparse_features.keys() == ["cat_0", "cat_1", "cat_2", "cat_3"]
    assert batch.sparse_features.stride() == 64
    assert {s: p.shape for s, p in ds.probs.items()} == {s: (ds.num_rows(s),) for s in SPLITS}


def test_criteo_like_shape_generates() -> None:
    ds = load_synthetic(preset="criteo_like", num_samples=1000)
    assert ds.schema.n_dense == 13 and len(ds.schema.sparse) == 26
    assert {f.num_embeddings for f in ds.schema.sparse} == {1_000_000}
    assert not any(f.multi_hot for f in ds.schema.sparse)


def test_same_seed_same_data_other_seed_other_data() -> None:
    a, b, c = (load_synthetic(seed=seed, **SMALL) for seed in (3, 3, 4))
    for s in SPLITS:
        x, y = a.splits[s], b.splits[s]
        assert torch.equal(x.dense, y.dense) and torch.equal(x.labels, y.labels)
        assert torch.equal(a.probs[s], b.probs[s])
        for u, v in zip(x.sparse, y.sparse, strict=True):
            assert torch.equal(u.values, v.values) and torch.equal(u.offsets, v.offsets)
    assert not torch.equal(a.splits["train"].dense, c.splits["train"].dense)
    assert not torch.equal(a.splits["train"].sparse[3].values, c.splits["train"].sparse[3].values)
    assert not torch.equal(a.probs["test"], c.probs["test"])


def test_split_is_the_standard_one() -> None:
    n = 1234
    schema = SyntheticConfig(num_dense=1, num_tables=1, rows=1).schema()
    numbered = TabularData(schema, torch.arange(n, dtype=torch.float32)[:, None],
                           (Jagged.single(torch.zeros(n, dtype=torch.int64)),), torch.zeros(n))
    for part, idx in zip(numbered.split((0.8, 0.1, 0.1), seed=7), SplitRule().rows(n, 7), strict=True):
        assert torch.equal(part.dense[:, 0].long(), idx)


def test_a_sequential_split_is_generation_order_with_the_same_samples() -> None:
    rows = load_synthetic(seed=0, preset="tiny", num_samples=1000)
    seq = load_synthetic(seed=0, preset="tiny", num_samples=1000, split="sequential",
                         fractions=(0.6, 0.2, 0.2))
    longer = load_synthetic(seed=0, preset="tiny", num_samples=1000, split="sequential")
    assert [seq.num_rows(s) for s in ("train", "val", "test")] == [600, 200, 200]
    every = torch.cat([rows.probs[s] for s in ("train", "val", "test")]).sort().values
    assert torch.equal(torch.cat([seq.probs[s] for s in ("train", "val", "test")]).sort().values, every)
    # In generation order, cuts nest: 60% train is the first 600 of 80% train, then 20% val the
    # next 200 (a random split's parts would not line up so).
    assert torch.equal(seq.probs["train"], longer.probs["train"][:600])
    assert torch.equal(seq.probs["val"], longer.probs["train"][600:800])
    with pytest.raises(DataError, match="split: expected one of random, sequential"):
        load_synthetic(seed=0, preset="tiny", num_samples=1000, split="shuffled")


def test_ids_in_range_hot_and_scrambled() -> None:
    ds = load_synthetic(num_samples=20_000, num_dense=0, num_tables=1, rows=1000, zipf_alpha=1.05,
                        teacher_order=1)
    ids = all_ids(ds, 0)
    assert 0 <= int(ids.min()) and int(ids.max()) < 1000
    counts = torch.bincount(ids, minlength=1000).sort(descending=True)
    top_share = float(counts.values[:10].sum()) / ids.numel()
    assert top_share > 0.25  # the top 1% of ids; uniform ids would give ~0.01
    assert int(counts.indices[:10].max()) > 250  # hot ids are spread, not the smallest numbers

    flat = load_synthetic(num_samples=20_000, num_dense=0, num_tables=1, rows=1000, zipf_alpha=0.0,
                          teacher_order=1)
    flat_counts = torch.bincount(all_ids(flat, 0), minlength=1000).sort(descending=True).values
    assert float(flat_counts[:10].sum()) / flat_counts.sum() < 0.03


def test_multi_hot_lengths_are_jagged_and_at_least_one() -> None:
    ds = load_synthetic(num_samples=20_000, num_dense=2, num_tables=3, rows=500, pooling=[1, 2.5, 4])
    for table, pooling in enumerate((1.0, 2.5, 4.0)):
        n = torch.cat([lengths(ds.splits[s].sparse[table]) for s in SPLITS])
        assert int(n.min()) >= 1
        assert float(n.float().mean()) == pytest.approx(pooling, rel=0.05)
        assert (int(n.max()) > 1) == (pooling > 1)
    assert [f.multi_hot for f in ds.schema.sparse] == [False, True, True]


def _peak_rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM")


def test_huge_tables_cost_no_memory() -> None:
    try:
        Path("/proc/self/clear_refs").write_text("5")  # resets the peak resident set size
    except OSError:
        pytest.skip("needs Linux /proc/self/clear_refs to measure peak memory")
    before = _peak_rss_kib()
    ds = load_synthetic(num_samples=20_000, num_dense=2, num_tables=4, rows=10**8, pooling=[1, 1, 1, 3])
    grown_mib = (_peak_rss_kib() - before) / 1024
    assert grown_mib < 100  # one int64 per row of one table would be 800 MiB
    ids = all_ids(ds, 3)
    assert 0 <= int(ids.min()) and int(ids.max()) < 10**8 and int(ids.max()) > 10**7
    assert ds.bayes_auc("train") > 0.6


@pytest.mark.parametrize("base_ctr", [0.25, 0.05])
def test_base_ctr_is_reached(base_ctr: float) -> None:
    ds = load_synthetic(seed=1, base_ctr=base_ctr, **SMALL)
    probs = torch.cat([ds.probs[s] for s in SPLITS])
    labels = torch.cat([ds.splits[s].labels for s in SPLITS])
    assert float(probs.mean()) == pytest.approx(base_ctr, abs=1e-3)
    assert float(labels.mean()) == pytest.approx(base_ctr, abs=5 * (base_ctr / len(labels)) ** 0.5)


def test_bayes_auc_beats_wrong_predictors_and_is_described() -> None:
    ds = load_synthetic(seed=2, num_samples=20_000, num_tables=4, num_dense=3, rows=300)
    labels, probs = ds.splits["train"].labels.numpy(), ds.probs["train"].numpy()
    bayes = ds.bayes_auc("train")
    assert bayes > 0.75
    shuffled = np.random.default_rng(0).permutation(probs)
    assert roc_auc_score(labels, shuffled) < bayes - 0.15
    assert roc_auc_score(labels, 1 - probs) < 0.5
    described = ds.describe()
    assert described["bayes_auc"] == {s: ds.bayes_auc(s) for s in SPLITS}
    assert described["config"]["rows"] == 300 and described["rows"]["train"] == 16_000
    # The stored p is the teacher's function of the features, not a free array.
    torch.testing.assert_close(ds.probability(ds.splits["val"]), ds.probs["val"], atol=1e-5, rtol=0)


def _crafted(ds: SyntheticDataset, columns: list[Jagged]) -> TabularData:
    n = columns[0].offsets.numel() - 1
    return TabularData(ds.schema, torch.zeros(n, ds.schema.n_dense), tuple(columns), torch.zeros(n))


def test_hidden_vectors_are_a_function_of_seed_table_and_id() -> None:
    a = load_synthetic(seed=5, **SMALL)
    b = load_synthetic(seed=5, **{**SMALL, "num_samples": 500})
    c = load_synthetic(seed=6, **SMALL)
    # Three samples: ids 5, 5 and 7 in every table, then one bag {5, 7}.
    singles = [Jagged.single(torch.tensor([5, 5, 7])) for _ in range(4)]
    ea, fa = a.teacher.fields(_crafted(a, singles))
    eb, _ = b.teacher.fields(_crafted(b, singles))
    ec, _ = c.teacher.fields(_crafted(c, singles))
    assert ea.shape == (3, 5, 4) and fa.shape == (3,)
    assert torch.equal(ea[0], ea[1]) and not torch.equal(ea[0, 1:], ea[2, 1:])
    assert torch.equal(ea, eb) and not torch.equal(ea[:, 1:], ec[:, 1:])
    assert not torch.equal(ea[0, 1], ea[0, 2])  # same id, another table, another vector
    bag = Jagged.from_lengths(torch.tensor([5, 7]), torch.tensor([2]))
    pooled, _ = a.teacher.fields(_crafted(a, [bag] * 4))
    torch.testing.assert_close(pooled[0, 1:], (ea[0, 1:] + ea[2, 1:]) / 2)


def _products(ds: SyntheticDataset, order: int) -> np.ndarray:
    """Features from the true hidden vectors: the first-order sum, pairwise dots and (order 3) the
    triple products of the dataset's order-3 form, for every triple of fields (no teacher weights)."""
    e, first = ds.teacher.fields(ds.splits["train"])
    fields = range(e.shape[1])
    columns = [first] + [(e[:, i] * e[:, j]).sum(1) for i, j in itertools.combinations(fields, 2)]
    for i, j, k in itertools.combinations(fields, 3) if order >= 3 else ():
        if ds.config.order3_form == "diagonal":
            columns.append((e[:, i] * e[:, j] * e[:, k]).sum(1))
        else:  # <e_a, e_b> times each coordinate of the third: linear in the hidden direction
            for a, b, c in ((i, j, k), (i, k, j), (j, k, i)):
                columns.extend(((e[:, a] * e[:, b]).sum(1, keepdim=True) * e[:, c]).unbind(1))
    return torch.stack(columns, 1).numpy()


def _fit_auc(ds: SyntheticDataset, order: int) -> float:
    labels = ds.splits["train"].labels.numpy()
    features = _products(ds, order)
    model = LogisticRegression(max_iter=2000).fit(features, labels)
    return float(roc_auc_score(labels, model.decision_function(features)))


@pytest.mark.parametrize("form", ORDER3_FORMS)
def test_order3_teacher_is_beyond_pairwise_products(form: str) -> None:
    common = {"num_samples": 20_000, "num_dense": 2, "num_tables": 4, "rows": 500, "teacher_dim": 4}
    order2 = load_synthetic(seed=0, teacher_order=2, **common)
    order3 = load_synthetic(seed=0, teacher_order=3, interaction_share=0.8, order3_form=form, **common)
    assert len(order3.readout.weight) == 3 and len(order2.readout.weight) == 2
    # Pairwise products of the true vectors explain an order-2 teacher ...
    assert _fit_auc(order2, 2) > order2.bayes_auc("train") - 0.01
    # ... but not an order-3 one, which needs its triple products.
    assert _fit_auc(order3, 2) < order3.bayes_auc("train") - 0.08
    assert _fit_auc(order3, 3) > order3.bayes_auc("train") - 0.01


def test_options_are_checked() -> None:
    with pytest.raises(DataError, match="rowz"):
        load_synthetic(rowz=10)
    with pytest.raises(DataError, match="unknown preset 'huge'"):
        load_synthetic(preset="huge")
    with pytest.raises(DataError, match="generated"):
        load_synthetic(path="/tmp/x")
    with pytest.raises(DataError, match="rows has 2 entries for 3 tables"):
        SyntheticConfig(num_tables=3, rows=[10, 20])
    with pytest.raises(DataError, match="teacher_order"):
        SyntheticConfig(teacher_order=4)
    with pytest.raises(DataError, match="order3_form must be one of modulated, diagonal, got 'cubic'"):
        SyntheticConfig(order3_form="cubic")
    config = SyntheticConfig.from_options(preset="order3", num_samples=100, rows=[7] * 6)
    assert (config.num_samples, config.table_rows, config.teacher_order) == (100, (7,) * 6, 3)
    assert set(PRESETS) >= {"criteo_like", "order2", "order3", "tiny"}
