"""Table sets: generation statistics, from_arch, column shards, features, validation."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from autorec.data import Schema, SparseFeature
from autorec.presets import preset
from autorec.sharding.tables import (
    FEATURE_NAMES,
    REUSE_BINS,
    TableInfo,
    TableSet,
    TableSetError,
    access_indices,
    reuse_histogram,
)


@pytest.fixture(scope="module")
def big() -> TableSet:
    return TableSet.generate(400, seed=3)


def test_generated_ranges(big: TableSet) -> None:
    rows = np.array([t.rows for t in big.tables])
    dims = np.array([t.dim for t in big.tables])
    assert rows.min() >= 1000 and rows.max() <= 10**8
    # log-uniform: every decade of 10^3..10^8 is populated, about a fifth each
    decades = np.histogram(np.log10(rows), bins=5, range=(3, 8))[0]
    assert decades.min() > 400 / 5 * 0.5
    assert dims.min() >= 4 and dims.max() <= 256 and (dims % 4 == 0).all()
    assert len(set(dims.tolist())) > 30


def test_pooling_heavy_tailed(big: TableSet) -> None:
    pooling = np.array([t.pooling for t in big.tables])
    assert pooling.min() >= 1.0
    # heavy tail: the top 5% of tables hold a large share of all lookups; mean well above median
    top = np.sort(pooling)[-20:].sum() / pooling.sum()
    assert top > 0.2
    assert pooling.mean() > 1.5 * np.median(pooling)
    assert pooling.max() > 20 * np.median(pooling)


def test_reuse_histograms(big: TableSet) -> None:
    reuse = np.array([t.reuse for t in big.tables])
    assert reuse.shape == (400, REUSE_BINS)
    np.testing.assert_allclose(reuse.sum(1), 1.0, atol=1e-9)
    exps = np.array([t.access_exponent for t in big.tables])
    rows = np.array([t.rows for t in big.tables])
    # steeper power laws reuse more: among tables of similar size the reuse mass rises with it
    similar = (rows > 1e5) & (rows < 1e7)
    hot = reuse[:, 1:].sum(1)
    assert np.corrcoef(exps[similar], hot[similar])[0, 1] > 0.6


def test_access_power_law_and_uniform() -> None:
    rng = np.random.default_rng(0)
    uniform = reuse_histogram(access_indices(10**8, 0.0, 8192, rng))
    steep = reuse_histogram(access_indices(10**8, 1.4, 8192, rng))
    assert uniform[0] > 0.99
    assert sum(steep[4:]) > 0.2
    ids = access_indices(50, 1.0, 10000, rng)
    assert ids.min() >= 0 and ids.max() < 50


def test_seeded_determinism() -> None:
    assert TableSet.generate(30, seed=7) == TableSet.generate(30, seed=7)
    assert TableSet.generate(30, seed=7) != TableSet.generate(30, seed=8)


def test_features_order() -> None:
    ts = TableSet.generate(5, seed=0)
    f = ts.features()
    assert f.shape == (5, len(FEATURE_NAMES)) and f.dtype == torch.float32
    t = ts.tables[2]
    assert f[2].tolist() == pytest.approx([t.rows, t.dim, t.pooling, t.bytes, *t.reuse], rel=1e-6)


def test_from_arch_preset() -> None:
    schema = Schema(dense=("a",), sparse=(SparseFeature("user", 943), SparseFeature("item", 1682),
                                          SparseFeature("tags", 50, multi_hot=True)))
    spec = preset("dlrm", schema, dim=16)
    ts = TableSet.from_arch(spec, pooling={"tags": 4.5})
    assert [t.name for t in ts.tables] == ["t_user", "t_item", "t_tags"]
    assert [t.rows for t in ts.tables] == [943, 1682, 50]
    assert [t.pooling for t in ts.tables] == [1.0, 1.0, 4.5]
    assert all(t.dim == 16 and t.bytes_per_element == 4 for t in ts.tables)
    assert ts.tables[0].bytes == 943 * (16 * 4 + 4)
    with pytest.raises(TableSetError, match="'nope'"):
        TableSet.from_arch(spec, pooling={"nope": 2.0})


def test_column_shard() -> None:
    t = TableSet.generate(1, seed=0).tables[0]
    t = TableInfo(t.name, t.rows, 10, t.pooling, 4, t.reuse)
    parts = t.column_shard(3)
    assert [p.name for p in parts] == [f"{t.name}@c0", f"{t.name}@c1", f"{t.name}@c2"]
    assert [p.dim for p in parts] == [4, 3, 3]
    assert all(p.rows == t.rows and p.pooling == t.pooling and p.reuse == t.reuse for p in parts)
    assert t.column_shard(1)[0].dim == 10
    with pytest.raises(TableSetError, match=r"parts must be in 1\.\.10"):
        t.column_shard(11)


def test_invalid_tables() -> None:
    reuse = (1.0,) + (0.0,) * 7
    with pytest.raises(TableSetError, match="rows"):
        TableInfo("t", 0, 4, 1.0, 4, reuse)
    with pytest.raises(TableSetError, match="reuse"):
        TableInfo("t", 10, 4, 1.0, 4, (0.5,) * 8)
    with pytest.raises(TableSetError, match="pooling"):
        TableInfo("t", 10, 4, 0.0, 4, reuse)
    good = TableInfo("t", 10, 4, 1.0, 4, reuse)
    with pytest.raises(TableSetError, match="repeated: t"):
        TableSet((good, good))
    with pytest.raises(TableSetError, match=r"tables\[0\]: missing key 'dim'"):
        TableSet.from_dict({"tables": [{"name": "t", "rows": 3}]})


def test_dict_round_trip() -> None:
    ts = TableSet.generate(4, seed=2)
    assert TableSet.from_dict(ts.to_dict()) == ts
