"""Architecture selection by validation AUC with the supernet's inherited weights."""

import pytest

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
    with pytest.raises(ValueError, match="selection: expected one of argmax, validation, got 'best'"):
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
