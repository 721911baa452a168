"""Permutation importance of a trained model's features (``drop_read: rerank``): one key's bags
shuffled across the batch, and what a trained model loses by it."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from torchrec.datasets.utils import Batch
from torchrec.sparse.jagged_tensor import KeyedJaggedTensor

from autorec.data.synthetic import load_synthetic
from autorec.oneshot.importance import permutation_costs, permute_key, permuting
from autorec.presets import preset
from autorec.train.records import TrainConfig
from autorec.train.trainer import Trainer


def _kjt(weighted: bool = False) -> KeyedJaggedTensor:
    """a: [1], [2, 3], []; b: [4], [], [5, 6, 7]."""
    values = torch.tensor([1, 2, 3, 4, 5, 6, 7])
    return KeyedJaggedTensor(keys=["a", "b"], values=values, lengths=torch.tensor([1, 2, 0, 1, 0, 3]),
                             weights=values.float() / 10 if weighted else None)


def test_one_keys_bags_move_whole_and_the_others_stay() -> None:
    out = permute_key(_kjt(weighted=True), "b", torch.tensor([2, 0, 1]))
    assert [bag.tolist() for bag in out["b"].to_dense()] == [[5, 6, 7], [4], []]
    assert out["b"].weights().tolist() == pytest.approx([0.5, 0.6, 0.7, 0.4])  # weights go with values
    assert out["a"].values().tolist() == [1, 2, 3] and out["a"].lengths().tolist() == [1, 2, 0]
    same = permute_key(_kjt(), "a", torch.arange(3))
    assert same.values().tolist() == _kjt().values().tolist()
    assert same.lengths().tolist() == _kjt().lengths().tolist()


def test_a_fresh_transform_draws_the_same_permutations() -> None:
    batch = Batch(dense_features=torch.zeros(3, 1), sparse_features=_kjt(), labels=torch.zeros(3))
    firsts = [permuting(["a", "b"], seed=4)(batch).sparse_features.values().tolist() for _ in range(2)]
    assert firsts[0] == firsts[1]
    # Over many draws each bag of ``a`` lands in every row: it is a shuffle, not a fixed shift.
    transform = permuting(["a"], seed=4)
    rows = {tuple(transform(batch).sparse_features["a"].lengths().tolist()) for _ in range(30)}
    assert len(rows) == 6  # every order of the lengths 1, 2, 0


@pytest.fixture(scope="module")
def trained() -> Trainer:
    """A DLRM trained on 4 tables, 1 and 2 pure noise; validated on 4000 samples, 1000 a batch."""
    data = load_synthetic(seed=5, num_samples=40_000, num_dense=1, num_tables=4, rows=50, teacher_dim=4,
                          teacher_order=2, table_weight=(3.0, 0.0, 0.0, 3.0))
    trainer = Trainer(preset("dlrm", data.schema), data, TrainConfig(
        epochs=3, batch_size=256, seed=0, progress=False, val_samples=4000, eval_batch_size=1000))
    trainer.fit()
    return trainer


def test_a_trained_model_loses_auc_only_on_the_features_that_carry_signal(trained: Trainer) -> None:
    trainer, data = trained, trained.dataset
    base, costs = permutation_costs(trainer, {f"emb.{f}": (f,) for f in data.schema.sparse_names}, seed=0)
    assert base == pytest.approx(trainer.evaluate("val")["auc"])  # the transform left the model as it was
    signal, noise = [costs[f"emb.{f}"] for f in data.schema.sparse_names[::3]], \
        [costs[f"emb.{f}"] for f in data.schema.sparse_names[1:3]]
    assert min(signal) > 0.02, costs
    assert max(abs(c) for c in noise) < 0.01, costs
    # Shuffling both signal features together costs more than either alone.
    both = base - trainer.evaluate("val", permuting(list(data.schema.sparse_names[::3]), 0))["auc"]
    assert both > max(signal)


def test_the_screen_stops_reading_the_clear_features_and_reads_the_close_ones_on_all(trained: Trainer):
    features = {f"emb.{f}": (f,) for f in trained.dataset.schema.sparse_names}
    base, full = permutation_costs(trained, features, seed=0)
    raced_base, raced = permutation_costs(trained, features, seed=0, screen=2000, clear=0.02)
    assert raced_base == base
    noise = ["emb.cat_1", "emb.cat_2"]
    assert [raced[n] for n in noise] == [full[n] for n in noise]  # read on all 4000: the same draws
    first = dataclasses.replace(trained.config, val_samples=2000)
    trained.config = first  # the signal ones were read on the first 2000 only
    try:
        _, screened = permutation_costs(trained, features, seed=0)
    finally:
        trained.config = dataclasses.replace(first, val_samples=4000)
    for name in ("emb.cat_0", "emb.cat_3"):
        assert raced[name] == screened[name] != full[name]


def test_shuffling_a_features_bags_is_shuffling_its_rows_of_the_embedded_input(trained: Trainer) -> None:
    model = trained.model.module  # the RecModel inside DMP
    batch = next(iter(trained.dataset.batches("val", 500, shuffle=False)))
    order = torch.randperm(500, generator=torch.Generator().manual_seed(1))
    model.eval()
    with torch.no_grad():
        x0 = model.embed(batch.dense_features, batch.sparse_features)
        x = x0.clone()
        x[:, 1 + 2] = x0[order, 1 + 2]  # the dense vector first, then cat_0, cat_1, cat_2, ...
        shuffled = model(batch.dense_features, permute_key(batch.sparse_features, "cat_2", order))
        torch.testing.assert_close(model.head(x), shuffled)
    model.train()


def test_with_towers_the_bags_themselves_are_shuffled() -> None:
    from autorec.arch import TowerSpec
    from autorec.blocks.mlp import MLPConfig

    data = load_synthetic(seed=5, num_samples=4000, num_dense=1, num_tables=4, rows=50)
    towers = TowerSpec(groups=(("cat_0", "cat_1"), ("cat_2", "cat_3")),
                       module=MLPConfig(hidden=(8,), n_out=2), n_out=2)
    trainer = Trainer(preset("dlrm", data.schema).replace(towers=towers), data,
                      TrainConfig(epochs=1, batch_size=256, seed=0, progress=False))
    trainer.fit()
    features = {f"emb.{f}": (f,) for f in data.schema.sparse_names}
    base, costs = permutation_costs(trainer, features, seed=0)
    assert base == pytest.approx(trainer.evaluate("val")["auc"]) and set(costs) == set(features)
    assert all(cost != 0 for cost in costs.values())  # each feature's bags moved through the towers
    assert permutation_costs(trainer, features, seed=0) == (base, costs)  # one seed, one read
