"""Hash sizes in the supernet: a one-hot path looks every feature up once, each folded by its own
group's value, with the same result as one lookup per value; a mix of values mixes lookups; in
either row layout (``hash_rows``), and with ``own`` a hashed path reads and trains its own rows."""

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


DATA = load_dataset("synthetic", preset="tiny", num_samples=2000)


@pytest.fixture(scope="module", params=["shared", "own"])
def run(request, tmp_path_factory):
    config = OneShotTrainConfig(steps=1, batch_size=64, checkpoint_every=1, hash_rows=request.param)
    return SupernetTraining(SearchSpace.from_dict(SPACE), DATA, config, tmp_path_factory.mktemp("net"))


def reference(net, sparse, hash_index: dict[str, int]) -> dict[str, torch.Tensor]:
    """Each feature's pooled embedding from a lookup of the whole batch folded by its value."""
    out = {}
    for group, features in net.groups:
        k = hash_index[group]
        looked = net.sparse_arch(fold_ids(sparse, net.hash_row_maps[k], net.hash_offsets[k])).to_dict()
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


def test_own_rows_follow_the_full_table_and_a_hashed_path_trains_only_its_block(tmp_path):
    config = OneShotTrainConfig(steps=1, batch_size=64, checkpoint_every=1, hash_rows="own")
    run = SupernetTraining(SearchSpace.from_dict(SPACE), DATA, config, tmp_path)
    net = run.search.supernet
    cards = {f.name: f.num_embeddings for f in DATA.schema.sparse}
    tables = dict(net.sparse_arch.named_parameters())
    for name, card in cards.items():
        half, quarter = net.hash_row_maps[1][name], net.hash_row_maps[2][name]
        assert (net.hash_offsets[1][name], net.hash_offsets[2][name]) == (card, card + half)
        assert tables[f"embedding_bags.t_{name}.weight"].shape[0] == card + half + quarter
    # a path with every feature at 0.5 sums the rows card + id mod half (indices computed here)
    values = {name: c.values[0] for name, c in net.arch.choices.items()}
    values.update({f"emb.{g}.hash": 0.5 for g, _ in net.groups})
    sparse = next(iter(DATA.batches("train", 8, shuffle=False))).sparse_features
    with torch.no_grad():
        pooled = hashing.pooled_by_hash(net, sparse, run.search.one_hot(values))
    for name, card in cards.items():
        jagged, weight = sparse[name], tables[f"embedding_bags.t_{name}.weight"].detach()
        rows = [[card + int(i) % net.hash_row_maps[1][name] for i in ids] for ids in jagged.to_dense()]
        want = torch.stack([weight[r].sum(0) if r else torch.zeros(weight.shape[1]) for r in rows])
        torch.testing.assert_close(pooled[name], want, msg=name)
    before = {k: v.detach().clone() for k, v in tables.items()}
    path = {c.name: 0 for c in run.choices}
    path.update({c.name: 2 for c in run.choices if c.name.endswith(".hash")})  # every feature at 0.25
    run.train_paths(next(iter(DATA.batches("train", 64, shuffle=True))), [path])
    for name, card in cards.items():
        key = f"embedding_bags.t_{name}.weight"
        moved = (tables[key].detach() != before[key]).any(dim=1).nonzero().flatten()
        start = card + net.hash_row_maps[1][name]
        assert len(moved) > 0 and bool((moved >= start).all()), name  # only the 0.25 block's rows


def test_an_unknown_row_layout_is_refused_by_name():
    with pytest.raises(ValueError, match="hash_rows: expected one of shared, own, got 'mine'"):
        OneShotTrainConfig(hash_rows="mine")
    with pytest.raises(ValueError, match="hash_rows: expected one of shared, own, got 'mine'"):
        hashing.hash_layout({"a": 10}, [1, 0.5], "mine")
