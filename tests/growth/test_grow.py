"""grow(): the grown model computes exactly what the model did, for every block kind."""

from __future__ import annotations

import pytest
import torch

from autorec.arch import CrossConfig, DhenConfig, MLPConfig, WukongConfig
from autorec.growth import GrowthError, grow, prune, shrink
from autorec.models import build_model
from tests.growth.cases import SPECS, batch, outputs, scramble, spec


def assert_same_function(model, grown) -> None:
    for index in range(2):
        b = batch(index=index)
        torch.testing.assert_close(outputs(grown, b), outputs(model, b), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name, ratio", [(name, 0.5) for name in sorted(SPECS)]
                         + [("wukong", 0.25), ("dhen_concat", 0.25), ("mixed", 0.25)])
def test_widening_back_to_full_size_keeps_the_function(name, ratio):
    full = SPECS[name]
    small_spec = shrink(full, ratio)
    assert small_spec != full
    small = scramble(build_model(small_spec), seed=1)
    grown = grow(small, small_spec, full, generator=torch.Generator().manual_seed(0))
    assert grown.spec == full
    assert_same_function(small, grown)


@pytest.mark.parametrize("name", ["dcnv2_full", "dcnv2_low", "mlp", "dhen_weighted"])
@pytest.mark.parametrize("widen", ["copy", "fresh"])
def test_copy_and_fresh_widening_both_keep_the_function(name, widen):
    full = SPECS[name]
    small_spec = shrink(full, 0.5)
    small = scramble(build_model(small_spec), seed=2)
    assert_same_function(small, grow(small, small_spec, full, widen=widen))


def test_fresh_units_get_fresh_incoming_and_zero_outgoing_weights():
    small_spec = spec(over_arch=(4,))
    small = scramble(build_model(small_spec))
    grown = grow(small, small_spec, spec(over_arch=(6,)), widen="fresh")
    incoming = grown.over_arch[0]._mlp[0]._linear.weight
    outgoing = grown.over_arch[1].weight
    assert torch.equal(incoming[:4], small.over_arch[0]._mlp[0]._linear.weight)
    assert incoming[4:].abs().sum() > 0 and outgoing[:, 4:].abs().sum() == 0
    # Not dead: the loss reaches the new units' outgoing weights.
    b = batch()
    loss = torch.nn.functional.binary_cross_entropy_with_logits(
        grown(b.dense_features, b.sparse_features), b.labels)
    loss.backward()
    assert grown.over_arch[1].weight.grad[:, 4:].abs().sum() > 0


def test_copied_units_split_their_outgoing_weights_unequally():
    small_spec = spec(over_arch=(4,))
    small = scramble(build_model(small_spec))
    grown = grow(small, small_spec, spec(over_arch=(8,)), widen="copy",
                 generator=torch.Generator().manual_seed(0))
    w_in, w_out = grown.over_arch[0]._mlp[0]._linear.weight, grown.over_arch[1].weight
    torch.testing.assert_close(w_in[4:], w_in[:4])
    old = small.over_arch[1].weight
    torch.testing.assert_close(w_out[:, :4] + w_out[:, 4:], old)
    fractions = w_out[:, :4] / old
    assert ((fractions > 0.25) & (fractions < 0.75)).all() and fractions.std() > 0.01
    # Unequal shares, unequal gradients: one step and a unit and its copy part ways.
    b = batch()
    optimizer = torch.optim.SGD(grown.parameters(), lr=0.1)
    torch.nn.functional.binary_cross_entropy_with_logits(
        grown(b.dense_features, b.sparse_features), b.labels).backward()
    optimizer.step()
    assert not torch.allclose(w_in[4:], w_in[:4])


def test_a_gated_model_grows_with_its_gates_folded_in():
    from autorec.growth import add_gates

    small_spec = spec(over_arch=(4,))
    small = scramble(build_model(small_spec))
    gates = add_gates(small, small_spec)
    with torch.no_grad():
        gates["over_arch[0]"].copy_(torch.tensor([0.5, 0.0, 2.0, 1.0]))
    grown = grow(small, small_spec, spec(over_arch=(8,)))
    assert not any("parametrizations" in k for k in grown.state_dict())
    assert_same_function(small, grown)


def test_dmt_towers_are_carried_over_and_the_rest_grows():
    from autorec.arch import TowerSpec

    towers = TowerSpec(groups=(("cat_0", "cat_1"), ("cat_2", "cat_3")),
                       module=MLPConfig(hidden=(8,), n_out=2), n_out=2)
    full = SPECS["wukong"].replace(towers=towers)
    small_spec = shrink(full, 0.5)
    small = scramble(build_model(small_spec))
    assert_same_function(small, grow(small, small_spec, full))
    with pytest.raises(GrowthError, match="towers: growth keeps the DMT towers as they are"):
        grow(small, small_spec, full.replace(towers=None))


def test_the_embedding_tables_are_carried_over_exactly():
    full = SPECS["wukong"]
    small_spec = shrink(full, 0.5)
    small = scramble(build_model(small_spec))
    grown = grow(small, small_spec, full)
    for name, table in small.sparse_arch.state_dict().items():
        assert torch.equal(grown.sparse_arch.state_dict()[name], table)


@pytest.mark.parametrize("name, target", [
    ("dense_arch", spec(dense_arch=(16, 24, 16))),
    ("over_arch", spec(over_arch=(32, 16, 16, 20))),
    ("mlp_layer", spec(MLPConfig(hidden=(32, 32, 40), n_out=3))),
    ("wukong_mlp", spec(WukongConfig(n_fm=4, n_lcb=4, rank=4, mlp=(32, 32)))),
])
def test_deepening_by_identity_layers_keeps_the_function(name, target):
    shallow = {"dense_arch": spec(), "over_arch": spec(), "mlp_layer": spec(MLPConfig(hidden=(32,), n_out=3)),
               "wukong_mlp": spec(WukongConfig(n_fm=4, n_lcb=4, rank=4, mlp=(32,)))}[name]
    model = scramble(build_model(shallow))
    assert_same_function(model, grow(model, shallow, target))


def test_deepening_and_widening_at_once():
    shallow = spec(WukongConfig(n_fm=2, n_lcb=2, rank=2, mlp=(8,)), over_arch=(8,), dense_arch=(4,))
    deep = spec(WukongConfig(n_fm=4, n_lcb=4, rank=4, mlp=(16, 20)), over_arch=(16, 16, 24),
                dense_arch=(8, 8))
    model = scramble(build_model(shallow))
    grown = grow(model, shallow, deep)
    assert grown.spec == deep
    assert_same_function(model, grown)


@pytest.mark.parametrize("old, new", [
    (CrossConfig(num_layers=1, rank=0), CrossConfig(num_layers=3, rank=0)),
    (CrossConfig(num_layers=2, rank=4), CrossConfig(num_layers=3, rank=6)),
    (CrossConfig(num_layers=2, rank=4), CrossConfig(num_layers=2, rank=0)),
    (CrossConfig(num_layers=1, rank=3), CrossConfig(num_layers=2, rank=0)),
])
def test_cross_layers_deepen_with_zero_layers_and_turn_full_rank_exactly(old, new):
    model = scramble(build_model(spec(old)))
    grown = grow(model, spec(old), spec(new), generator=torch.Generator().manual_seed(0))
    assert_same_function(model, grown)


@pytest.mark.parametrize("ensemble", ["concat", "sum", "weighted_sum"])
def test_adding_dhen_modules_keeps_the_function(ensemble):
    old = spec(DhenConfig(modules=("dot", "linear"), ensemble=ensemble, n_out=2),
               DhenConfig(modules=("linear",), ensemble=ensemble, n_out=3))
    new = spec(DhenConfig(modules=("dot", "dcn", "linear", "conv"), ensemble=ensemble, n_out=2),
               DhenConfig(modules=("linear", "conv"), ensemble=ensemble, n_out=3))
    model = scramble(build_model(old))
    grown = grow(model, old, new)
    assert set(grown.layers[0].interactions) == {"dot", "dcn", "linear", "conv"}
    assert_same_function(model, grown)


def test_growing_a_pruned_model_gives_a_valid_full_size_model():
    full = SPECS["mixed"]
    model = scramble(build_model(full))
    small_spec = shrink(full, 0.5)
    grown = grow(prune(model, full, small_spec), small_spec, full)
    fresh = build_model(full)
    fresh.load_state_dict(grown.state_dict())  # every key and shape of a full-size model
    assert grown.spec == full
    assert torch.isfinite(outputs(grown, batch())).all()


def test_a_size_that_is_no_multiple_of_a_normalised_one_is_refused_unless_inexact_is_allowed():
    old = spec(WukongConfig(n_fm=4, n_lcb=4, rank=3, mlp=(16,)))
    new = spec(WukongConfig(n_fm=4, n_lcb=4, rank=4, mlp=(16,)))
    model = scramble(build_model(old))
    with pytest.raises(GrowthError, match=r"layers\.0\.rank: growing 3 -> 4 .*multiple of 3"):
        grow(model, old, new)
    grown = grow(model, old, new, exact=False)
    assert grown.spec == new


def test_fresh_units_where_a_layernorm_spans_them_are_refused():
    old, new = spec(WukongConfig(n_fm=4, n_lcb=4, rank=2, mlp=(16,))), SPECS["wukong"]
    with pytest.raises(GrowthError, match=r"layers\.0\.rank: fresh units"):
        grow(build_model(old), old, new.replace(layers=new.layers[:1]), widen="fresh")
