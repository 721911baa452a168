import doctest
import itertools
import json
import math
import time

import pytest
import torch
from torchrec.datasets.utils import Batch
from torchrec.sparse.jagged_tensor import KeyedJaggedTensor

import autorec.costs.analytic as analytic
from autorec.arch import ArchSpec, DotConfig, MLPConfig, TableSpec
from autorec.costs import TRAIN_FLOPS_FACTOR, arch_cost, bytes_per_element, measure_latency, tensor_bytes
from autorec.data import Schema, SparseFeature
from autorec.models import build_model
from autorec.presets import PRESETS, preset

SCHEMA = Schema(dense=("x", "y", "z"), sparse=(SparseFeature("u", 50), SparseFeature("i", 30),
                                                SparseFeature("g", 10, multi_hot=True)))


def linear_flops(*sizes: int) -> int:
    """2 * in * out for each Linear of a chain of ``sizes``."""
    return sum(2 * a * b for a, b in itertools.pairwise(sizes))


def mlp_spec(precision: str = "fp32", table_precision: str = "fp32") -> ArchSpec:
    """One 8-wide table, no dense features, an MLP block and an over-arch: only Linear layers."""
    return ArchSpec(dim=8, tables=(TableSpec(name="t", features=("f",), num_embeddings=100, dim=8,
                                             precision=table_precision),),
                    layers=(MLPConfig(hidden=(32,), n_out=4, precision=precision),), over_arch=(16,))


def test_module_examples_run():
    result = doctest.testmod(analytic, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0


def test_mlp_stack_flops_match_two_in_out_per_linear():
    cost = arch_cost(mlp_spec())
    parts = {p.name: p for p in cost.parts}
    assert parts["layers.0"].forward_flops == linear_flops(8, 32, 4 * 8)
    assert parts["over_arch"].forward_flops == linear_flops(4 * 8, 16, 1)
    assert cost.forward_flops == linear_flops(8, 32, 32) + linear_flops(32, 16, 1)
    assert cost.train_flops == TRAIN_FLOPS_FACTOR * cost.forward_flops == 3 * cost.forward_flops


def test_dlrm_preset_flops_are_the_sum_of_its_parts_by_hand():
    spec = preset("dlrm", SCHEMA, dim=8)
    f, d = spec.num_inputs, spec.dim  # dense vector + 3 features = 4 vectors of 8
    dense = linear_flops(3, 64, 8)
    dots = 2 * f * f * d  # bmm of X [F, D] by X^T [D, F]
    rows = math.ceil((d + f * (f - 1) // 2) / d)  # passthrough + 6 dots, packed into D-wide rows
    over = linear_flops(rows * d, 256, 128, 1)
    cost = arch_cost(spec)
    assert [(p.name, p.forward_flops) for p in cost.parts] == [
        ("dense_arch", dense), ("layers.0", dots), ("over_arch", over)]
    assert cost.forward_flops == dense + dots + over


def test_projections_of_narrow_tables_are_counted():
    spec = ArchSpec(dim=8, n_dense=2, dense_arch=(4,), over_arch=(4,),
                    tables=(TableSpec(name="a", features=("a1", "a2"), num_embeddings=10, dim=4),
                            TableSpec(name="b", features=("b",), num_embeddings=10, dim=8)))
    cost = arch_cost(spec)
    parts = {p.name: p for p in cost.parts}
    assert parts["projections"].forward_flops == 2 * linear_flops(4, 8)  # a1 and a2: 4 -> 8, no bias
    assert parts["projections"].params == 2 * 4 * 8
    assert cost.forward_flops == linear_flops(2, 4, 8) + 2 * linear_flops(4, 8) + linear_flops(4 * 8, 4, 1)


def dense_and_embedding_params(spec: ArchSpec) -> tuple[int, int]:
    model = build_model(spec)
    embedding = sum(p.numel() for p in model.sparse_arch.parameters())
    return sum(p.numel() for p in model.parameters()) - embedding, embedding


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_parameter_counts_equal_the_built_model(name):
    spec = preset(name, SCHEMA, dim=8)
    cost = arch_cost(spec)
    assert (cost.dense_params, cost.embedding_params) == dense_and_embedding_params(spec)
    assert cost.params == cost.dense_params + cost.embedding_params
    assert sum(p.params for p in cost.parts) == cost.dense_params
    assert cost.dense_bytes == 4 * cost.dense_params and cost.embedding_bytes == 4 * cost.embedding_params
    assert cost.forward_flops == sum(p.forward_flops for p in cost.parts) > 0


def test_parameter_counts_with_projections():
    spec = ArchSpec(dim=8, over_arch=(4,), layers=(DotConfig(n_passthrough=0),),
                    tables=(TableSpec(name="a", features=("a1", "a2"), num_embeddings=10, dim=4),
                            TableSpec(name="b", features=("b",), num_embeddings=7, dim=16)))
    cost = arch_cost(spec)
    assert (cost.dense_params, cost.embedding_params) == dense_and_embedding_params(spec)
    assert cost.embedding_params == 10 * 4 + 7 * 16


EXPECTED_BYTES_PER_ELEMENT = {
    "fp32": 4, "bf16": 2, "fp16": 2, "fp8_e4m3": 1, "fp8_e5m2": 1, "int8": 1,
    "mxfp8_e4m3": 1 + 1 / 32, "mxfp8_e5m2": 1 + 1 / 32, "mxint8": 1 + 1 / 32,
    "mxfp6_e3m2": 0.75 + 1 / 32, "mxfp6_e2m3": 0.75 + 1 / 32, "mxfp4_e2m1": 0.5 + 1 / 32,
}


@pytest.mark.parametrize("precision", sorted(EXPECTED_BYTES_PER_ELEMENT))
def test_layer_precision_sets_the_bytes_of_its_matrices(precision):
    assert bytes_per_element(precision) == EXPECTED_BYTES_PER_ELEMENT[precision]
    base, cost = arch_cost(mlp_spec()), arch_cost(mlp_spec(precision))
    layer = {p.name: p for p in cost.parts}["layers.0"]
    matrices, biases = 8 * 32 + 32 * 32, 32 + 32  # Linear(8, 32), Linear(32, 32): 1280 = 40 * 32
    assert layer.precision == precision and layer.params == matrices + biases
    assert layer.bytes == matrices * EXPECTED_BYTES_PER_ELEMENT[precision] + 4 * biases
    # Precision changes bytes only: not FLOPs, parameter counts, or the other parts.
    assert cost.forward_flops == base.forward_flops and cost.dense_params == base.dense_params
    others = [p for p in cost.parts if p.name != "layers.0"]
    assert others == [p for p in base.parts if p.name != "layers.0"]
    assert cost.dense_bytes - base.dense_bytes == layer.bytes - 4 * (matrices + biases)


def test_tensor_bytes_round_up_partial_bytes_and_mx_blocks():
    assert tensor_bytes(3, "mxfp4_e2m1") == 2 + 1  # 1.5 bytes of values, one started block of 32
    assert tensor_bytes(33, "mxfp6_e3m2") == math.ceil(33 * 0.75) + 2
    assert tensor_bytes(10, "bf16") == 20
    with pytest.raises(ValueError, match="unknown precision 'fp64'"):
        bytes_per_element("fp64")


@pytest.mark.parametrize(("precision", "width"), [("fp32", 4), ("fp16", 2)])
def test_table_precision_sets_embedding_and_lookup_bytes(precision, width):
    cost = arch_cost(mlp_spec(table_precision=precision))
    assert cost.embedding_params == 100 * 8
    assert cost.embedding_bytes == 100 * 8 * width
    assert cost.embedding_lookup_bytes == 8 * width  # one id of one feature per sample


def test_pooling_factors_scale_lookup_bytes():
    spec = preset("dlrm", SCHEMA, dim=8)
    assert arch_cost(spec).embedding_lookup_bytes == 3 * 8 * 4
    assert arch_cost(spec, {"g": 2.5}).embedding_lookup_bytes == (1 + 1 + 2.5) * 8 * 4
    with pytest.raises(ValueError, match="unknown feature 'nope'"):
        arch_cost(spec, {"nope": 1.0})
    with pytest.raises(ValueError, match=r"pooling_factors\['g'\]"):
        arch_cost(spec, {"g": -1.0})


def test_huge_tables_are_costed_without_allocating_them():
    spec = ArchSpec(dim=128, tables=tuple(TableSpec(name=f"t{i}", features=(f"f{i}",), num_embeddings=10**9,
                                                    dim=128) for i in range(4)), over_arch=(64,))
    start = time.perf_counter()
    cost = arch_cost(spec)
    assert time.perf_counter() - start < 10
    assert cost.embedding_bytes == 4 * 10**9 * 128 * 4  # 2 TB: built on the meta device only


def test_costs_are_cached_per_spec_and_serialise():
    spec = preset("wukong", SCHEMA, dim=8)
    arch_cost(spec)
    hits = analytic._dense_parts.cache_info().hits
    cost = arch_cost(ArchSpec.from_json(spec.to_json()))  # an equal spec hits the cache
    assert analytic._dense_parts.cache_info().hits == hits + 1
    data = json.loads(json.dumps(cost.to_dict()))
    assert data["forward_flops"] == cost.forward_flops and data["params"] == cost.params
    assert [p["name"] for p in data["parts"]] == ["dense_arch", "layers.0", "layers.1", "over_arch"]


def batch(size: int) -> Batch:
    g = torch.Generator().manual_seed(0)
    lengths = torch.cat([torch.ones(2 * size, dtype=torch.int64), torch.randint(0, 4, (size,), generator=g)])
    values = torch.randint(0, 10, (int(lengths.sum()),), generator=g)
    sparse = KeyedJaggedTensor.from_lengths_sync(["u", "i", "g"], values, lengths)
    return Batch(dense_features=torch.randn(size, 3, generator=g), sparse_features=sparse,
                 labels=torch.zeros(size))


def test_latency_is_positive_and_finite():
    spec = preset("dlrm", SCHEMA, dim=8)
    seconds = measure_latency(spec, batch(32), repeats=3)
    assert 0 < seconds < 10 and math.isfinite(seconds)
    model = build_model(spec)
    assert 0 < measure_latency(model, batch(32), repeats=3, warmup=1) < 10
    assert model.training  # restored after timing in eval mode
    with pytest.raises(ValueError, match="repeats >= 1"):
        measure_latency(model, batch(4), repeats=0)
