"""The tower partitioner: interaction statistics, the graph, balanced K-way partitions, baselines,
the adjusted Rand index, and recovery of planted groups from a trained model (fixed seed)."""

from __future__ import annotations

import itertools

import networkx as nx
import numpy as np
import pytest
import torch
from sklearn.metrics import adjusted_rand_score

from autorec.arch import ArchSpec, DotConfig, MLPConfig, TableSpec
from autorec.data.synthetic import load_synthetic, table_groups
from autorec.models import build_model
from autorec.presets import preset
from autorec.towers.partition import (
    PartitionError,
    adjusted_rand_index,
    cut_fraction,
    feature_graph,
    imbalance,
    interaction_matrix,
    labels,
    partition,
    random_partition,
    round_robin_partition,
    table_loads,
    with_towers,
)
from autorec.train.partition import rank_batches
from tests.doctests import assert_examples_run


def _planted_graph(sizes: list[int], seed: int = 0, noise: float = 0.3,
                   bytes_of: dict[str, float] | None = None) -> tuple[nx.Graph, list[int]]:
    """Blocks of strongly linked nodes plus weak random links everywhere."""
    rng = np.random.default_rng(seed)
    truth = [g for g, size in enumerate(sizes) for _ in range(size)]
    order = rng.permutation(len(truth))  # node names must not give the groups away
    names = [f"n{i}" for i in range(len(truth))]
    graph = nx.Graph()
    for name in names:
        graph.add_node(name, bytes=(bytes_of or {}).get(name, 1.0), lookups=1.0)
    for a, b in itertools.combinations(range(len(truth)), 2):
        same = truth[order[a]] == truth[order[b]]
        graph.add_edge(names[a], names[b], weight=float(rng.uniform(1, 2) if same else rng.uniform(0, noise)))
    return graph, [truth[order[i]] for i in range(len(truth))]


@pytest.mark.parametrize(("sizes", "k"), [([4, 4, 4, 4], 4), ([3, 3], 2), ([5, 5, 5], 3), ([2] * 6, 6)])
def test_planted_blocks_are_recovered_and_balanced(sizes: list[int], k: int) -> None:
    graph, truth = _planted_graph(sizes, seed=k)
    parts = partition(graph, k, tolerance=0.1)
    assert len(parts) == k and set().union(*parts) == set(graph.nodes)
    assert adjusted_rand_index(truth, labels(parts, list(graph.nodes))) == 1.0
    assert max(imbalance(graph, parts).values()) <= 1.1 + 1e-9
    for baseline in (round_robin_partition(graph, k), random_partition(graph, k, seed=1)):
        assert cut_fraction(graph, parts) <= cut_fraction(graph, baseline)


def test_the_balance_constraint_wins_over_the_interactions() -> None:
    # Two planted blocks, but block 0's tables hold 3x the bytes: a balanced cut must split it.
    graph, truth = _planted_graph([4, 4], seed=3)
    heavy = [n for n, t in zip(graph.nodes, truth, strict=True) if t == 0]
    for n in heavy:
        graph.nodes[n]["bytes"] = 3.0
    parts = partition(graph, 2, tolerance=0.2)
    loads = [sum(graph.nodes[n]["bytes"] for n in p) for p in parts]
    assert max(loads) <= 1.2 * sum(loads) / 2 + 1e-9
    assert adjusted_rand_index(truth, labels(parts, list(graph.nodes))) < 1.0


def test_an_impossible_balance_is_an_error_naming_the_loads() -> None:
    graph, _ = _planted_graph([2, 2], seed=0)
    graph.nodes["n0"]["bytes"] = 100.0  # one table alone is over any tower's share
    with pytest.raises(PartitionError, match=r"cannot balance 4 tables into 2 towers.*bytes"):
        partition(graph, 2, tolerance=0.1)
    with pytest.raises(PartitionError, match=r"k must be an integer in \[1, 4\]"):
        partition(graph, 5)
    with pytest.raises(PartitionError, match="tolerance must be >= 0"):
        partition(graph, 2, tolerance=-1)


def test_baselines_deal_equal_counts() -> None:
    graph, _ = _planted_graph([3, 3, 4], seed=0)
    for parts in (round_robin_partition(graph, 3), random_partition(graph, 3, seed=5)):
        assert sorted(len(p) for p in parts) == [3, 3, 4]
        assert set().union(*parts) == set(graph.nodes)
    assert random_partition(graph, 3, seed=5) == random_partition(graph, 3, seed=5)
    assert random_partition(graph, 3, seed=5) != random_partition(graph, 3, seed=6)


def test_adjusted_rand_index_matches_sklearn() -> None:
    rng = np.random.default_rng(0)
    for _ in range(20):
        a, b = rng.integers(0, 4, 30), rng.integers(0, 5, 30)
        assert adjusted_rand_index(a, b) == pytest.approx(adjusted_rand_score(a, b))
    assert adjusted_rand_index([0, 1, 1, 2], [7, 3, 3, 9]) == 1.0
    with pytest.raises(ValueError, match="3 true labels against 2"):
        adjusted_rand_index([0, 1, 1], [0, 1])


def _spec_and_batch() -> tuple[ArchSpec, torch.Tensor, object]:
    from torchrec.sparse.jagged_tensor import KeyedJaggedTensor

    tables = (TableSpec(name="ta", features=("a",), num_embeddings=10, dim=4),
              TableSpec(name="tbc", features=("b", "c"), num_embeddings=20, dim=4, precision="fp16"),
              TableSpec(name="td", features=("d",), num_embeddings=30, dim=4))
    spec = ArchSpec(dim=4, n_dense=2, dense_arch=(8,), tables=tables, layers=(DotConfig(),), over_arch=(8,))
    lengths = torch.tensor([1] * 8 + [2] * 8 + [1] * 8 + [3] * 8)
    kjt = KeyedJaggedTensor.from_lengths_sync(["a", "b", "c", "d"], torch.arange(int(lengths.sum())) % 10,
                                              lengths)
    return spec, torch.randn(8, 2), kjt


def test_a_feature_the_model_cannot_see_interacts_with_nothing() -> None:
    spec, dense, kjt = _spec_and_batch()
    torch.manual_seed(0)
    model = build_model(spec)
    with torch.no_grad():
        model.sparse_arch.embedding_bags["td"].weight.zero_()  # d's embedding is 0 for every sample
    names, w = interaction_matrix(model, dense, kjt, method="ablation")
    d = names.index("d")
    assert names == ("a", "b", "c", "d") and w.shape == (4, 4)
    # zero up to float rounding: the ablated batches' matmuls may block (and round) differently
    # with the thread count an earlier test left
    tiny = 1e-6 * np.abs(w).max()
    assert np.all(np.abs(w[d]) <= tiny) and np.all(np.abs(w[:, d]) <= tiny)
    assert w[0, 1] > 1e3 * tiny and np.allclose(w, w.T) and np.all(np.diag(w) == 0)
    _, dots = interaction_matrix(model, dense, kjt, method="dot")
    assert np.all(dots[d] == 0) and dots[0, 1] > 0
    with pytest.raises(ValueError, match="method must be one of ablation, dot"):
        interaction_matrix(model, dense, kjt, method="hessian")


def test_graph_nodes_are_tables_with_their_loads() -> None:
    spec, _, kjt = _spec_and_batch()
    loads = table_loads(spec, kjt)
    assert loads["tbc"] == {"bytes": 20 * 4 * 2.0, "lookups": 2.0 + 1.0}
    assert loads["td"]["lookups"] == 3.0
    w = np.arange(16, dtype=float).reshape(4, 4)
    w = w + w.T
    graph = feature_graph(spec, ("a", "b", "c", "d"), w, loads)
    assert set(graph.nodes) == {"ta", "tbc", "td"}
    assert graph.edges["ta", "tbc"]["weight"] == w[0, 1] + w[0, 2]
    with pytest.raises(ValueError, match=r"weights have shape \(2, 2\)"):
        feature_graph(spec, ("a", "b", "c", "d"), np.zeros((2, 2)))
    with pytest.raises(ValueError, match="table 'td' has features \\['d'\\] without statistics"):
        feature_graph(spec, ("a", "b", "c"), np.zeros((3, 3)))
    parts = [frozenset({"td", "ta"}), frozenset({"tbc"})]
    towered = with_towers(spec, parts, MLPConfig(hidden=(), n_out=1), 2)
    assert towered.towers.groups == (("a", "d"), ("b", "c"))
    with pytest.raises(ValueError, match="unknown tables \\['tx'\\]"):
        with_towers(spec, [frozenset({"tx"})], DotConfig())


def test_planted_groups_are_recovered_from_a_trained_model() -> None:
    """The done-when check at test size: a DLRM trained 4 epochs on 32k samples of groups4 (with
    small tables so every id is learned), ablation statistics, 4 balanced towers: ARI >= 0.9,
    far above round robin and random."""
    torch.set_num_threads(1)
    ds = load_synthetic(seed=0, preset="groups4", num_samples=40_000,
                        rows=(10,) * 4 + (20,) * 4 + (30,) * 4 + (40,) * 4)
    spec = preset("dlrm", ds.schema, dim=8)
    torch.manual_seed(0)
    model = build_model(spec)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    for epoch in range(4):
        for batch in rank_batches(ds, "train", 256, shuffle=True, seed=0, epoch=epoch, rank=0, world_size=1):
            loss = torch.nn.functional.binary_cross_entropy_with_logits(
                model(batch.dense_features, batch.sparse_features), batch.labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    batch = next(iter(rank_batches(ds, "val", 2048, shuffle=False, seed=0, epoch=0, rank=0, world_size=1)))
    names, w = interaction_matrix(model, batch.dense_features, batch.sparse_features)
    graph = feature_graph(spec, names, w, table_loads(spec, batch.sparse_features))
    parts = partition(graph, 4, tolerance=0.1)
    order = [t.name for t in spec.tables]
    truth = table_groups(ds.config, ds.seed)
    ari = adjusted_rand_index(truth, labels(parts, order))
    assert ari >= 0.9
    assert max(imbalance(graph, parts).values()) <= 1.1 + 1e-9
    assert adjusted_rand_index(truth, labels(round_robin_partition(graph, 4), order)) < 0.5
    assert adjusted_rand_index(truth, labels(random_partition(graph, 4, seed=0), order)) < ari


def test_grouped_synthetic_data() -> None:
    ds = load_synthetic(seed=3, preset="groups4", num_samples=2000)
    groups = ds.feature_groups()
    assert sorted(f for g in groups for f in g) == sorted(ds.schema.sparse_names)
    rows = {f.name: f.num_embeddings for f in ds.schema.sparse}
    for g in groups:  # one table of each size per group: balanced by construction
        assert sorted(rows[f] for f in g) == [50, 100, 200, 500]
    group_of = {f"cat_{t}": g for t, g in enumerate(table_groups(ds.config, ds.seed))}
    pairs = ds.teacher.pair_weight
    fields = ["dense", *ds.schema.sparse_names]
    for i, j in itertools.combinations(range(len(fields)), 2):
        within = i > 0 and group_of[fields[i]] == group_of[fields[j]]
        assert (pairs[i, j] != 0) == within, (fields[i], fields[j])
    assert load_synthetic(seed=3, preset="groups4", num_samples=2000).feature_groups() == groups
    with pytest.raises(Exception, match="num_groups must lie in"):
        load_synthetic(preset="tiny", num_groups=9)
    with pytest.raises(Exception, match="no planted groups"):
        load_synthetic(preset="tiny").feature_groups()


def test_doctests() -> None:
    assert_examples_run("autorec.towers.partition")
