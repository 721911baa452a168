"""Ladder rules: each family's FLOPs grow rung by rung over two decades in five rungs, every rung
builds and runs, a searched architecture grows by its blocks' rules, bad requests are refused."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from autorec.arch import CrossConfig, DotConfig, SkipConfig, WukongConfig
from autorec.blocks import kind
from autorec.costs import arch_cost
from autorec.data import load_dataset
from autorec.data.synthetic.config import SyntheticConfig
from autorec.models import build_model
from autorec.presets import preset
from autorec.scaling import LadderError, build_ladder, families, family_start, scale_layer, scale_spec

SCALE = SyntheticConfig.from_options(preset="scale").schema()  # the schema only: nothing generated
TINY = load_dataset("synthetic", preset="tiny", num_samples=400)


def test_every_built_in_interaction_kind_states_a_rule():
    assert set(families()) == {"dcnv2", "dhen", "dlrm", "mlp", "wukong"}
    assert kind("skip").scaling is None


@pytest.mark.parametrize("family", families())
def test_flops_grow_every_rung_and_span_two_decades_in_five(family):
    specs = build_ladder(family_start(family, SCALE, dim=16), rungs=5)
    flops = [arch_cost(s).train_flops for s in specs]
    assert all(b > a for a, b in itertools.pairwise(flops)), flops
    assert math.log10(flops[-1] / flops[0]) >= 2.0, flops
    assert [s.name for s in specs] == [f"{family}-r{r}" for r in range(5)]
    assert {s.dim for s in specs} == {16}  # the embedding width stays


@pytest.mark.parametrize("family", families())
def test_every_rung_builds_and_runs(family):
    batch = next(iter(TINY.batches("train", 8, shuffle=False)))
    for spec in build_ladder(family_start(family, TINY.schema, dim=4), rungs=3):
        logits = build_model(spec)(batch.dense_features, batch.sparse_features)
        assert logits.shape == (8,) and torch.isfinite(logits).all()


def test_the_rules_of_wukong_and_dcnv2():
    wukong = scale_layer(WukongConfig(n_fm=4, n_lcb=4, rank=8, mlp=(64,)), 2)
    assert (wukong.n_fm, wukong.n_lcb, wukong.rank, wukong.mlp) == (16, 16, 8, (256,))
    cross = scale_layer(CrossConfig(num_layers=1, rank=4), 2)
    assert (cross.num_layers, cross.rank) == (3, 25)  # one layer per rung; rank x2.5 per rung
    assert scale_layer(CrossConfig(num_layers=2, rank=0), 1).rank == 0  # full rank stays full rank
    spec = family_start("wukong", SCALE)
    assert [len(scale_spec(spec, r).layers) for r in range(5)] == [1, 1, 2, 2, 3]


def test_a_searched_architecture_grows_by_each_of_its_blocks_rules():
    searched = preset("dlrm", SCALE).replace(name="winner", layers=(
        CrossConfig(num_layers=2, rank=8), SkipConfig(), WukongConfig(n_fm=4, n_lcb=4, rank=4, mlp=(32,))))
    grown = scale_spec(searched, 2)
    assert [c.kind for c in grown.layers] == ["dcnv2", "skip", "wukong", "wukong"]
    assert (grown.layers[0].num_layers, grown.layers[0].rank) == (4, 50)
    assert grown.layers[2].n_fm == 16 and grown.layers[3] == grown.layers[2]
    assert grown.over_arch == tuple(round(w * 2.5 ** 2) for w in searched.over_arch)  # the largest factor
    assert grown.name == "winner-r2" and scale_spec(searched, 0) == searched.replace(name="winner-r0")
    assert grown.tables == searched.tables


def test_bad_requests():
    with pytest.raises(LadderError, match="no scaling rule for family 'transformer'; the kinds with one: dc"):
        family_start("transformer", SCALE)
    with pytest.raises(LadderError, match="no scaling rule for family 'skip'"):
        family_start("skip", SCALE)
    only_skip = preset("dlrm", SCALE).replace(layers=(SkipConfig(),))
    with pytest.raises(LadderError, match=r"none of its layer kinds \(skip\) has a scaling rule"):
        scale_spec(only_skip, 1)
    with pytest.raises(LadderError, match="rung: expected an integer >= 0, got -1"):
        scale_spec(preset("dlrm", SCALE), -1)
    with pytest.raises(LadderError, match="rungs: expected an integer >= 1, got 0"):
        build_ladder(preset("dlrm", SCALE), 0)
    assert scale_spec(preset("dlrm", SCALE).replace(layers=(DotConfig(),)), 0).over_arch == (256, 128)
