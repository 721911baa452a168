"""Architecture selection by validation AUC, or penalized validation loss, with the supernet's
inherited weights."""

import dataclasses
import itertools

import pytest
import torch

from autorec.costs import arch_cost
from autorec.data import load_dataset
from autorec.space import SearchSpace
from autorec.supernet import SupernetConfig, SupernetSearch

SPACE = {
    "dim": [8], "dense_arch": [[8]], "over_arch": [[16]],
    "layers": {"num": {"low": 1, "high": 2}, "kinds": ["wukong", "dlrm", "dcnv2"],
               "wukong": {"n_fm": [2, 4], "n_lcb": [2], "rank": [2], "mlp": [[8]]},
               "dlrm": {"n_passthrough": [1], "self_interaction": [False]},
               "dcnv2": {"num_layers": {"low": 1, "high": 2}, "rank": [0]}},
}


def test_selection_options_are_checked():
    expected = "selection: expected one of argmax, validation, penalized, got 'best'"
    with pytest.raises(ValueError, match=expected):
        SupernetConfig(selection="best")
    with pytest.raises(ValueError, match="selection_samples: expected an integer >= 1"):
        SupernetConfig(selection_samples=0)


def test_validation_selection_takes_the_best_path_it_scored():
    space = SearchSpace.from_dict(SPACE)
    data = load_dataset("synthetic", preset="tiny", num_samples=3000)
    search = SupernetSearch(space, data, 8, (8,), (16,), SupernetConfig(
        steps=30, warmup_steps=10, batch_size=128, selection="validation", selection_samples=300))
    result = search.fit()
    assert space.contains(result.spec) and space.contains(result.argmax_spec)
    # First sweep, layer 0: 3 kinds, dcnv2 and wukong with one more value of their one field ->
    # 5 paths; layer 1 adds skip (6), less the path layer 0 chose, already scored.
    first = [p["layer"] for p in result.selection if p["sweep"] == 0]
    assert first == [0] * 5 + [1] * 5
    chosen, scored = search.select()
    assert scored == result.selection  # the same fixed batches and weights: the same scores
    # Coordinate ascent that keeps the incumbent on ties ends on the best path it scored.
    assert search.path_auc(chosen, search.selection_batches()) == max(p["val_auc"] for p in scored)
    kinds = [chosen["layer0.kind"]] + ([] if chosen["layer1.kind"] == "skip" else [chosen["layer1.kind"]])
    assert [layer.kind for layer in result.spec.layers] == kinds
    for i, layer in enumerate(result.spec.layers):
        if layer.kind in ("dcnv2", "wukong"):
            field = {"dcnv2": "num_layers", "wukong": "n_fm"}[layer.kind]
            assert getattr(layer, field) == chosen[f"layer{i}.{layer.kind}.{field}"]
    # A path is scored once: fields of a kind its layer does not run do not make another path.
    for n_fm in (2, 4):
        for kind in ("dlrm", "wukong"):
            key = search._path_key({**chosen, "layer0.kind": kind, "layer0.wukong.n_fm": n_fm})
            other = search._path_key({**chosen, "layer0.kind": kind, "layer0.wukong.n_fm": 6 - n_fm})
            assert (key == other) == (kind == "dlrm")


def test_penalized_selection_minimises_the_architecture_loss_and_follows_lambda():
    space = SearchSpace.from_dict(SPACE)
    data = load_dataset("synthetic", preset="tiny", num_samples=3000)
    search = SupernetSearch(space, data, 8, (8,), (16,), SupernetConfig(
        steps=30, warmup_steps=30, batch_size=128, weight_sampling="uniform",
        selection="penalized", selection_samples=300, cost_lambda=0.0))
    result = search.fit()
    assert space.contains(result.spec)
    scored = result.selection
    assert all({"val_auc", "val_loss", "cost", "penalized_loss"} <= set(p) for p in scored)
    # At lambda 0 the penalized loss is the BCE, and the search ends on the lowest one it scored.
    assert all(p["penalized_loss"] == p["val_loss"] for p in scored)
    chosen, _ = search.select()
    batches = search.selection_batches()
    assert search.path_scores(chosen, batches)["val_loss"] == min(p["val_loss"] for p in scored)
    # A path's cost is its derived spec's (the same number arch_cost gives).
    assert search.path_cost(chosen) == pytest.approx(arch_cost(result.spec).forward_flops, rel=1e-6)
    free_cost = search.path_cost(chosen)
    # The same weights under a penalty that dwarfs the loss: the cheapest path scored wins.
    search.config = dataclasses.replace(search.config, cost_lambda=1e3)
    cheap, costly_scored = search.select()
    assert search.path_cost(cheap) == min(p["cost"] for p in costly_scored)
    assert search.path_cost(cheap) < free_cost or free_cost == min(p["cost"] for p in costly_scored)
    # Loss and cost differ from path to path, so the two lambdas are a real test of the ranking.
    assert len({round(p["cost"]) for p in costly_scored}) > 2


def test_paths_score_the_same_on_joined_batches_as_batch_by_batch():
    space = SearchSpace.from_dict(SPACE)
    data = load_dataset("synthetic", preset="tiny", num_samples=10000)
    search = SupernetSearch(space, data, 8, (8,), (16,), SupernetConfig(
        steps=20, warmup_steps=20, batch_size=128, weight_sampling="uniform", selection_samples=600))
    search.fit()
    joined = search.selection_batches()
    alone = list(itertools.islice(data.batches("val", 128, shuffle=True, seed=search.config.seed + 2), 5))
    assert len(joined) == 1 and len(joined[0].labels) == 5 * 128  # one pass for the five batches
    for kind in search.supernet.layer_kinds[0]:
        path = {**search.supernet.arch.argmax(), "layer0.kind": kind}
        (a, ya), (b, yb) = search.path_outputs(path, joined), search.path_outputs(path, alone)
        assert torch.equal(ya, yb) and torch.allclose(a, b, atol=1e-6), kind
        assert search.path_scores(path, joined)["val_auc"] == search.path_scores(path, alone)["val_auc"], kind
