"""Per-feature micro choices of a space: widths with 0 (drop a feature) and hash sizes per table."""

from __future__ import annotations

import optuna
import pytest
import torch

from autorec.arch import ArchSpec, ArchSpecError
from autorec.data import Schema, SparseFeature, load_dataset
from autorec.models import build_model
from autorec.space import SearchSpace, SpaceError
from autorec.space.tables import hashed_rows
from autorec.train.trainer import TrainConfig, Trainer

SCHEMA = Schema(("x",), (SparseFeature("u", 1000), SparseFeature("i", 10), SparseFeature("c", 3)))
MICRO = {"dim": [8], "embedding": {"dim": [0, 4, 8], "hash": [1, 0.5, 0.1]},
         "layers": {"num": [1], "kinds": ["dlrm", "dcnv2"]}}


def test_size_counts_every_distinct_table_set_and_stack():
    space = SearchSpace.from_dict(MICRO)
    seen: set[str] = set()
    study = optuna.create_study(sampler=optuna.samplers.BruteForceSampler(seed=0))
    study.optimize(lambda trial: len(seen.add(space.suggest(trial, SCHEMA).to_json()) or ()), n_trials=2000)
    assert len(study.trials) < 2000  # the brute force ran out: every path of the walk was taken
    assert len(seen) == space.size(SCHEMA) == 684  # c (3 rows) gives 2 distinct hash sizes, not 3
    assert {hashed_rows(3, h) for h in (1, 0.5, 0.1)} == {3, 2, 1}


def test_specs_round_trip_through_params_and_are_contained():
    space = SearchSpace.from_dict(MICRO)
    specs = [space.sample(SCHEMA, seed) for seed in range(200)]
    assert any(s.dropped for s in specs) and any(t.hash_from for s in specs for t in s.tables)
    for spec in specs:
        assert space.contains(spec)
        assert space.from_params(space.to_params(spec), SCHEMA) == spec
        assert spec.tables  # never every feature dropped
        assert len(spec.tables) + len(spec.dropped) == 3
        assert spec.num_inputs == len(spec.tables) + 1


def test_dropping_every_group_keeps_the_last_one_at_its_narrowest():
    space = SearchSpace.from_dict(MICRO)
    spec = space.from_params({"emb.u": 0, "emb.i": 0, "emb.c": 0, "layer0.kind": "dlrm"}, SCHEMA)
    assert spec.dropped == ("u", "i") and [(t.name, t.dim, t.num_embeddings) for t in spec.tables] == [
        ("t_c", 4, 3)]
    assert space.to_params(spec) == {"emb.u": 0, "emb.i": 0, "emb.c": 4, "emb.c.hash": 1,
                                     "layer0.kind": "dlrm"}


@pytest.mark.parametrize("data, message", [
    ({"embedding": {"dim": [0]}}, "embedding.dim: expected at least one width > 0"),
    ({"embedding": {"hash": [1, 2]}}, r"embedding.hash\[1\]: expected a fraction of the rows in \(0, 1\]"),
    ({"embedding": {"hash": [0]}}, r"embedding.hash\[0\]: expected a number > 0"),
    ({"embedding": {"dim": [0, 8]}, "towers": {"num": [2]}}, "cannot be combined with a towers section"),
])
def test_bad_micro_choices(data, message):
    with pytest.raises(SpaceError, match=message):
        SearchSpace.from_dict(data, "s.yaml")


def test_arch_json_carries_hash_and_drops_and_checks_them():
    space = SearchSpace.from_dict(MICRO)
    spec = space.from_params({"emb.u": 8, "emb.u.hash": 0.1, "emb.i": 0, "emb.c": 4, "emb.c.hash": 1,
                              "layer0.kind": "dlrm"}, SCHEMA)
    data = spec.to_dict()
    assert data["tables"][0]["hash_from"] == 1000 and "hash_from" not in data["tables"][1]
    assert data["dropped"] == ["i"] and ArchSpec.from_dict(data) == spec
    with pytest.raises(ArchSpecError, match=r"tables\[0\].hash_from: expected an integer >= 101, got 100"):
        ArchSpec.from_dict({**data, "tables": [{**data["tables"][0], "hash_from": 100}, data["tables"][1]]})
    with pytest.raises(ArchSpecError, match=r"dropped\[0\]: feature 'c' is dropped, yet in a table"):
        ArchSpec.from_dict({**data, "dropped": ["c"]})


def test_a_hashed_table_folds_ids_and_a_dropped_feature_is_ignored():
    space = SearchSpace.from_dict(MICRO)
    spec = space.from_params({"emb.u": 8, "emb.u.hash": 0.1, "emb.i": 0, "emb.c": 4, "emb.c.hash": 1,
                              "layer0.kind": "dlrm"}, SCHEMA)
    model = build_model(spec)
    from torchrec.sparse.jagged_tensor import KeyedJaggedTensor

    def batch(u: int, i: int) -> KeyedJaggedTensor:  # i is in the batch, as the dataset gives it
        return KeyedJaggedTensor.from_lengths_sync(["u", "i", "c"], torch.tensor([u, i, 2]),
                                                   torch.tensor([1, 1, 1]))
    dense = torch.randn(1, 1)
    # 999 mod 100 = 99, and the dropped i (7 or 3) changes nothing
    torch.testing.assert_close(model(dense, batch(999, 7)), model(dense, batch(99, 3)))
    assert not torch.allclose(model(dense, batch(98, 7)), model(dense, batch(99, 7)))  # u is read


def test_a_micro_spec_trains_sharded_on_real_data():
    data = load_dataset("synthetic", preset="tiny", num_samples=3000)
    space = SearchSpace.from_dict({**MICRO, "embedding": {"dim": [0, 4], "hash": [0.5]}})
    spec = next(s for seed in range(50) if (s := space.sample(data.schema, seed)).dropped
                and any(t.hash_from for t in s.tables))
    result = Trainer(spec, data, TrainConfig(epochs=1, batch_size=256, progress=False)).fit()
    assert 0.0 < result.val["auc"] < 1.0


def test_the_supernet_mixes_micro_choices_and_derives_them():
    from torchrec.sparse.jagged_tensor import KeyedJaggedTensor

    from autorec.supernet import Supernet

    net = Supernet(SearchSpace.from_dict(MICRO), SCHEMA, dim=8, dense_arch=(64,), over_arch=(256, 128))
    assert {"emb.u", "emb.u.hash", "emb.c.hash"} <= set(net.arch.choices)
    values = {**net.arch.argmax(), "emb.u": 8, "emb.u.hash": 0.1, "emb.i": 0, "emb.c": 4, "emb.c.hash": 1}
    spec = net.derive(values)
    assert spec.dropped == ("i",) and spec.num_inputs == 3
    assert [(t.name, t.dim, t.num_embeddings, t.hash_from) for t in spec.tables] == [
        ("t_u", 8, 100, 1000), ("t_c", 4, 3, None)]
    one_hot = {name: torch.nn.functional.one_hot(torch.tensor(c.values.index(values[name])),
                                                 len(c.values)).float()
               for name, c in net.arch.choices.items()}

    def x0(u: int, i: int) -> torch.Tensor:
        kjt = KeyedJaggedTensor.from_lengths_sync(["u", "i", "c"], torch.tensor([u, i, 2]),
                                                  torch.tensor([1, 1, 1]))
        return net.embed(torch.zeros(1, 1), kjt, one_hot)

    assert torch.count_nonzero(x0(5, 7)[0, 2]) == 0  # the dropped feature is a zero vector
    torch.testing.assert_close(x0(999, 7), x0(99, 3))  # u hashed to 100 rows; i is ignored
