"""shrink() and the errors of prune()/grow() on targets that are no pruning or growth."""

from __future__ import annotations

import pytest
import torch

from autorec.arch import CrossConfig, DhenConfig, DotConfig, MLPConfig, TableSpec, WukongConfig
from autorec.costs import arch_cost
from autorec.growth import GrowthError, grow, prune, shrink
from autorec.models import build_model
from autorec.presets import PRESETS
from tests.growth.cases import SPECS, TABLES, spec
from tests.test_models import SCHEMA


def test_a_float_ratio_scales_every_width_and_never_below_one():
    full = spec(MLPConfig(hidden=(64, 3), n_out=3), dense_arch=(16, 2), over_arch=(32, 1))
    small = shrink(full, 0.25)
    assert small.dense_arch == (4, 1) and small.over_arch == (8, 1)
    assert small.layers[0] == MLPConfig(hidden=(16, 1), n_out=3)  # rows handed on stay
    assert small.tables == full.tables and small.dim == full.dim


def test_a_mapping_scales_only_the_parts_it_names():
    full = SPECS["mixed"]
    small = shrink(full, {"layers.1": 0.5, "over_arch": 0.5})
    assert small.dense_arch == full.dense_arch and small.layers[0] == full.layers[0]
    assert small.layers[1] == CrossConfig(num_layers=1, rank=2) and small.over_arch == (16, 8)


def test_a_full_rank_cross_layer_becomes_low_rank_at_the_ratio_of_its_flops():
    full = spec(CrossConfig(num_layers=2, rank=0))
    n = full.num_inputs * full.dim  # 5 * 8 = 40
    assert shrink(full, 0.5).layers[0] == CrossConfig(num_layers=2, rank=n // 4)
    assert shrink(full, 1.0).layers[0] == full.layers[0]
    ratio = arch_cost(shrink(full, 0.5)).parts[1].forward_flops / arch_cost(full).parts[1].forward_flops
    assert ratio == pytest.approx(0.5, rel=0.1)


def test_sizes_a_layernorm_spans_are_divided_by_a_power_of_two():
    full = spec(WukongConfig(n_fm=12, n_lcb=4, rank=6, mlp=(30,)),
                WukongConfig(n_fm=8, n_lcb=8, rank=8, mlp=(30,)))
    small = shrink(full, 0.3)
    # layer 0's rows feed layer 1's FM LayerNorm: 16 rows / 4 (1/4 is nearest 0.3 among 1, 1/2,
    # 1/4); the FM ranks 6 -> 3 (6 is no multiple of 4), 8 -> 2; the last layer's rows feed the
    # over-arch: scaled freely.
    assert (small.layers[0].n_fm, small.layers[0].n_lcb, small.layers[0].rank) == (3, 1, 3)
    assert (small.layers[1].n_fm, small.layers[1].n_lcb, small.layers[1].rank) == (2, 2, 2)
    assert small.layers[0].mlp == (9,)


@pytest.mark.parametrize("name", sorted(SPECS) + [f"preset:{p}" for p in sorted(PRESETS)])
def test_every_shrink_grows_exactly_into_every_wider_one(name):
    full = PRESETS[name[7:]](SCHEMA) if name.startswith("preset:") else SPECS[name]
    ratios = [0.2, 0.45, 0.8, 1.0]
    for i, small_ratio in enumerate(ratios[:-1]):
        small = shrink(full, small_ratio)
        model = build_model(small)
        for wider in ratios[i + 1:]:
            grow(model, small, shrink(full, wider))  # would raise if not exact


def test_an_identity_shortcut_stays_an_identity():
    full = SPECS["wukong"]
    for ratio in (0.5, 0.25, 0.7):
        small = shrink(full, ratio)
        widths = small.layer_widths()
        assert widths[1] == widths[2]


def test_rows_a_dlrm_layer_reads_are_kept():
    full = spec(WukongConfig(n_fm=4, n_lcb=4, rank=4, mlp=(16,)), DotConfig())
    small = shrink(full, 0.5)
    assert (small.layers[0].n_fm, small.layers[0].n_lcb, small.layers[0].rank) == (4, 4, 2)


def test_a_dhen_dot_module_keeps_two_rows_to_read():
    layer = DhenConfig(modules=("dot", "linear"), ensemble="sum", n_out=4)
    assert shrink(spec(layer, layer), 0.1).layers[0].n_out == 2


@pytest.mark.parametrize("name", sorted(PRESETS))
@pytest.mark.parametrize("ratio", [0.3, 0.5, 0.75])
def test_shrunk_presets_are_valid_and_cheaper(name, ratio):
    full = PRESETS[name](SCHEMA)
    small = shrink(full, ratio)
    assert arch_cost(small).forward_flops < arch_cost(full).forward_flops


@pytest.mark.parametrize("ratio, message", [
    (0.0, r"ratio\['dense_arch'\]: expected a number in \(0, 1\], got 0.0"),
    (1.5, r"ratio\['dense_arch'\]: expected a number in \(0, 1\], got 1.5"),
    ({"over_arch": "half"}, r"ratio\['over_arch'\]: expected a number in \(0, 1\], got 'half'"),
    ({"layers.7": 0.5},
     r"ratio\['layers.7'\]: unknown part; expected one of dense_arch, layers.0, over_arch"),
])
def test_bad_ratios_name_the_part(ratio, message):
    with pytest.raises(GrowthError, match=message):
        shrink(spec(DotConfig()), ratio)


BAD_TARGETS = [
    (spec(DotConfig()), spec(CrossConfig()), "prune", r"layers\.0: block kinds differ: dlrm -> dcnv2"),
    (spec(), spec(over_arch=(64, 16)), "prune", r"over_arch\[0\]: pruning cannot widen 32 -> 64"),
    (spec(), spec(over_arch=(16, 16)), "grow", r"over_arch\[0\]: growth cannot narrow 32 -> 16"),
    (spec(), spec(over_arch=(16,)), "prune", r"over_arch: pruning keeps the depth: \[32, 16\] -> \[16\]"),
    (spec(), spec(over_arch=(32,)), "grow", r"over_arch: growth cannot remove layers"),
    (spec(MLPConfig(hidden=(), n_out=2)), spec(MLPConfig(hidden=(8,), n_out=2)), "grow",
     r"layers\.0\.mlp: cannot deepen \[\] -> \[8\] exactly"),
    (spec(), spec(over_arch=(32, 16, 8)), "grow",
     r"over_arch\[2\]: an added layer starts as the identity on the 16 units before it, so it needs "
     r"at least 16 units, got 8"),
    (spec(MLPConfig(n_out=2)), spec(MLPConfig(n_out=3)), "grow",
     r"layers\.0\.n_out: the rows an mlp layer hands on stay: 2 -> 3"),
    (spec(WukongConfig(n_fm=4)), spec(WukongConfig(n_fm=8)), "prune",
     r"layers\.0\.n_fm: pruning cannot widen 4 -> 8"),
    (spec(CrossConfig(rank=0)), spec(CrossConfig(rank=4)), "grow",
     r"layers\.0\.rank: growth cannot make a full-rank layer low-rank \(0 -> 4\)"),
    (spec(CrossConfig(rank=4)), spec(CrossConfig(rank=0)), "prune",
     r"layers\.0\.rank: pruning cannot go from rank 4 to full \(0\)"),
    (spec(CrossConfig(rank=0)), spec(CrossConfig(rank=40)), "prune",
     r"layers\.0\.rank: a low rank of 40 is no pruning of the 40 x 40 cross matrices"),
    (spec(CrossConfig(num_layers=2)), spec(CrossConfig(num_layers=1)), "grow",
     r"layers\.0\.num_layers: growth cannot go 2 -> 1"),
    (spec(DhenConfig(modules=("dot", "linear"))), spec(DhenConfig(modules=("linear", "dot", "conv"))),
     "grow", r"layers\.0\.modules: the modules both keep must stay in the same order"),
    (spec(DhenConfig(modules=("dot", "linear"))), spec(DhenConfig(modules=("dot",))), "grow",
     r"layers\.0\.modules: growth cannot remove modules: \['dot', 'linear'\] -> \['dot'\]"),
    (spec(DhenConfig(ensemble="sum")), spec(DhenConfig(ensemble="concat")), "grow",
     r"layers\.0\.ensemble: 'sum' -> 'concat' is no pruning or growth"),
    (spec(DotConfig()), spec(DotConfig(n_passthrough=0)), "grow", r"layers\.0: a dlrm layer has nothing"),
    (spec(), spec().replace(tables=(*TABLES[:3], TableSpec(name="x", features=("cat_3",),
                                                           num_embeddings=9, dim=8))),
     "grow", r"tables: growth carries the embedding tables as they are"),
    (spec(WukongConfig(n_fm=4, n_lcb=4), DotConfig()), spec(WukongConfig(n_fm=2, n_lcb=4), DotConfig()),
     "prune", r"layers\.1: a dlrm layer whose input rows are pruned or grown is not supported"),
    (spec(), spec().replace(layers=(DotConfig(),)), "prune",
     r"layers: pruning keeps the number of interaction layers: 0 -> 1"),
]


@pytest.mark.parametrize("old, new, op, message", BAD_TARGETS)
def test_a_target_that_is_no_pruning_or_growth_is_refused_naming_the_part(old, new, op, message):
    with pytest.raises(GrowthError, match=message):
        (prune if op == "prune" else grow)(build_model(old), old, new)


def test_a_model_of_another_spec_is_refused():
    message = (r"model: it is not a model of spec \('over_arch\.0\._mlp\.0\._linear\.weight' "
               r"is \(32, 40\), spec gives \(32, 24\)\)")
    with pytest.raises(GrowthError, match=message):
        grow(build_model(spec()), spec(DotConfig()), spec(DotConfig()))


def test_a_non_spec_and_an_unknown_widening_are_refused():
    with pytest.raises(GrowthError, match="target: expected an ArchSpec, got dict"):
        grow(build_model(spec()), spec(), {"over_arch": [64]})
    with pytest.raises(GrowthError, match="widen: expected one of auto, copy, fresh, got 'clone'"):
        grow(build_model(spec()), spec(), spec(), widen="clone")


def test_layouts_map_products_concatenations_and_pairwise_dots():
    from autorec.growth.layout import Concat, Fixed, Pairs, Product, Space, Units

    spaces = {"a": Space("a", old=3, new=4, index=torch.tensor([0, 1, 2, 0]),
                         share=torch.tensor([0.25, 1.0, 1.0, 0.75])),
              "b": Space("b", old=2, new=1, index=torch.tensor([1]))}
    assert Product(Units("a"), Fixed(2)).index(spaces).tolist() == [0, 1, 2, 3, 4, 5, 0, 1]
    assert Concat((Units("b"), Units("a"))).index(spaces).tolist() == [1, 2, 3, 4, 2]
    # Pairs of the 4 new rows (0, 1, 2, copy of 0) among the 3 old pairs (0,1), (0,2), (1,2):
    pairs = Pairs(Units("a"))
    assert pairs.index(spaces).tolist() == [0, 1, -1, 2, 0, 1]  # (0, 0') is no old pair
    torch.testing.assert_close(pairs.share(spaces), torch.tensor([0.25, 0.25, 0.0, 1.0, 0.75, 0.75]))
    assert Product(Units("a"), Units("b")).unit_of("b", spaces).tolist() == [0, 1] * 3
