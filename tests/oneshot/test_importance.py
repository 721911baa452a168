"""Permutation importance of a trained model's features (``drop_read: rerank``): one key's bags
shuffled across the batch, and what a trained model loses by it."""

from __future__ import annotations

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


def test_a_trained_model_loses_auc_only_on_the_features_that_carry_signal() -> None:
    data = load_synthetic(seed=5, num_samples=20_000, num_dense=1, num_tables=4, rows=50, teacher_dim=4,
                          teacher_order=2, table_weight=(3.0, 0.0, 0.0, 3.0))
    trainer = Trainer(preset("dlrm", data.schema), data,
                      TrainConfig(epochs=3, batch_size=256, seed=0, progress=False, val_samples=4000))
    trainer.fit()
    base, costs = permutation_costs(trainer, {f"emb.{f}": (f,) for f in data.schema.sparse_names}, seed=0)
    assert base == pytest.approx(trainer.evaluate("val")["auc"])  # the transform left the model as it was
    signal, noise = [costs[f"emb.{f}"] for f in data.schema.sparse_names[::3]], \
        [costs[f"emb.{f}"] for f in data.schema.sparse_names[1:3]]
    assert min(signal) > 0.02, costs
    assert max(abs(c) for c in noise) < 0.01, costs
    # Shuffling both signal features together costs more than either alone.
    both = base - trainer.evaluate("val", permuting(list(data.schema.sparse_names[::3]), 0))["auc"]
    assert both > max(signal)
