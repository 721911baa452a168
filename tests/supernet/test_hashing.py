"""Hash sizes in the supernet: a one-hot path looks every feature up once, each folded by its own
group's value, with the same result as one lookup per value; a mix of values mixes lookups."""

from __future__ import annotations

import pytest
import torch

from autorec.data import load_dataset
from autorec.models import fold_ids
from autorec.oneshot.train import OneShotTrainConfig, SupernetTraining
from autorec.space import SearchSpace
from autorec.supernet import hashing

SPACE = {"dim": [8], "dense_arch": [[16]], "over_arch": [[16]],
         "embedding": {"dim": [4, 8], "hash": [1, 0.5, 0.25]},
         "layers": {"num": [1], "kinds": ["dlrm"]}}


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    data = load_dataset("synthetic", preset="tiny", num_samples=2000)
    config = OneShotTrainConfig(steps=1, batch_size=64, checkpoint_every=1)
    return SupernetTraining(SearchSpace.from_dict(SPACE), data, config, tmp_path_factory.mktemp("net"))


def reference(net, sparse, hash_index: dict[str, int]) -> dict[str, torch.Tensor]:
    """Each feature's pooled embedding from a lookup of the whole batch folded by its value."""
    out = {}
    for group, features in net.groups:
        looked = net.sparse_arch(fold_ids(sparse, net.hash_row_maps[hash_index[group]])).to_dict()
        out.update({name: looked[name] for name in features})
    return out


def test_a_one_hot_path_of_mixed_hash_values_is_one_lookup_with_each_features_own_fold(run, monkeypatch):
    net, search = run.search.supernet, run.search
    groups = [g for g, _ in net.groups]
    assert len(groups) >= 3
    hash_index = {g: i % 3 for i, g in enumerate(groups)}  # every value used by some group
    values = {name: c.values[0] for name, c in net.arch.choices.items()}
    for group, k in hash_index.items():
        values[f"emb.{group}.hash"] = net.arch.choices[f"emb.{group}.hash"].values[k]
    weights = search.one_hot(values)
    sparse = next(iter(run.search.dataset.batches("train", 64, shuffle=False))).sparse_features

    calls = []
    real = net.sparse_arch.forward
    monkeypatch.setattr(net.sparse_arch, "forward", lambda kjt: calls.append(1) or real(kjt))
    with torch.no_grad():
        pooled = hashing.pooled_by_hash(net, sparse, weights)
    assert len(calls) == 1
    monkeypatch.undo()
    with torch.no_grad():
        expected = reference(net, sparse, hash_index)
    assert pooled.keys() == expected.keys()
    for name in expected:
        torch.testing.assert_close(pooled[name], expected[name], msg=name)


def test_a_straight_through_weight_still_gets_its_gradient(run):
    net, search = run.search.supernet, run.search
    group = net.groups[0][0]
    values = {name: c.values[0] for name, c in net.arch.choices.items()}
    weights = search.one_hot(values)
    logits = torch.zeros(3, requires_grad=True)
    soft = torch.softmax(logits, 0)
    hard = torch.nn.functional.one_hot(torch.tensor(1), 3).float()
    weights[f"emb.{group}.hash"] = hard - soft.detach() + soft
    sparse = next(iter(run.search.dataset.batches("train", 64, shuffle=False))).sparse_features
    pooled = hashing.pooled_by_hash(net, sparse, weights)
    sum(p.sum() for p in pooled.values()).backward()
    assert logits.grad is not None and bool(logits.grad.abs().sum() > 0)


def test_a_mix_of_hash_values_is_the_weighted_sum_of_their_lookups(run):
    net, search = run.search.supernet, run.search
    values = {name: c.values[0] for name, c in net.arch.choices.items()}
    weights = search.one_hot(values)
    for group, _ in net.groups:
        weights[f"emb.{group}.hash"] = torch.tensor([0.5, 0.0, 0.5])
    sparse = next(iter(run.search.dataset.batches("train", 64, shuffle=False))).sparse_features
    with torch.no_grad():
        pooled = hashing.pooled_by_hash(net, sparse, weights)
        full = reference(net, sparse, {g: 0 for g, _ in net.groups})
        quarter = reference(net, sparse, {g: 2 for g, _ in net.groups})
    for name in full:
        torch.testing.assert_close(pooled[name], 0.5 * full[name] + 0.5 * quarter[name], msg=name)
