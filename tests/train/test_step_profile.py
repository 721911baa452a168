"""The step profile and roofline floor of issue 25's benchmarks (benchmarks/step_profile.py,
benchmarks/roofline.py): the pieces are those of a real step, the floor is the larger bound."""

import pytest

from autorec.arch import ArchSpec, TableSpec
from autorec.costs.training import training_flops
from benchmarks.roofline import ADAM_BYTES_PER_PARAM, Rates, pooling_factors, step_bytes, step_floor
from benchmarks.step_profile import PIECES, best_rates, floor_figures, profile_preset
from tests.doctests import assert_examples_run


def test_the_examples_run():
    assert_examples_run("benchmarks.roofline")


def test_the_floor_is_the_larger_of_compute_and_memory():
    spec = ArchSpec(dim=4, tables=(TableSpec(name="t", features=("f",), num_embeddings=10, dim=4),),
                    over_arch=(8,))
    factors = {"f": 3.0}
    flops = training_flops(spec, 16, pooling_factors=factors, touched_rows="looked_up").total * 16
    moved = step_bytes(spec, 16, factors)
    # 48 ids: read in the forward, read and written with 1 state value each by the fused update
    dense_params = 4 * 8 + 8 + 8 * 1 + 1
    assert moved == 48 * (3 * 4 + 2) * 4 + 16 * 4 * 4 + ADAM_BYTES_PER_PARAM * dense_params
    compute_bound = step_floor(spec, 16, Rates(matmul_flops=1.0, bandwidth=1e30), factors)
    assert compute_bound.bound == "compute" and compute_bound.seconds == pytest.approx(flops)
    memory_bound = step_floor(spec, 16, Rates(matmul_flops=1e30, bandwidth=1.0), factors)
    assert memory_bound.bound == "memory" and memory_bound.seconds == pytest.approx(moved)


def test_pooling_factors_are_mean_ids_per_sample(planted_data):
    batches = list(zip(planted_data.batches("train", 64, shuffle=False), range(3), strict=False))
    factors = pooling_factors([b for b, _ in batches])
    kjt = batches[0][0].sparse_features
    assert set(factors) == set(kjt.keys()) and all(v > 0 for v in factors.values())
    # by hand: each feature's ids over the three batches (its lengths per sample, via to_dict),
    # divided by the samples
    samples = sum(b.labels.numel() for b, _ in batches)
    for key in kjt.keys():
        ids = sum(int(b.sparse_features.to_dict()[key].lengths().sum()) for b, _ in batches)
        assert factors[key] == pytest.approx(ids / samples), key
    assert samples == 3 * 64


def test_a_profiled_step_splits_into_its_pieces(planted_data):
    figures = profile_preset("dlrm", planted_data, batch_size=64, steps=2, warmup=1,
                             rates=Rates(matmul_flops=1e10, bandwidth=1e10))
    pieces = [figures[f"dlrm_{p}_ms"] for p in PIECES]
    assert all(p >= 0 for p in pieces)
    # the lookup, the interaction and the over-arch were each seen, forward and backward
    for piece in ("embedding_fwd", "interaction_fwd", "over_arch_fwd", "over_arch_bwd", "embedding_bwd"):
        assert figures[f"dlrm_{piece}_ms"] > 0, piece
    assert figures["dlrm_step_ms"] > 0 and 0 < figures["dlrm_floor_share"]
    assert figures["dlrm_floor_bound"] in ("compute", "memory") and "ms" in figures["dlrm_top_ops"]
    # the floor set again at the end of a run from the step's recorded FLOPs and bytes is the same
    again = floor_figures(figures, "dlrm", Rates(matmul_flops=1e10, bandwidth=1e10))
    assert again["dlrm_floor_bound"] == figures["dlrm_floor_bound"]
    for key in ("dlrm_floor_ms", "dlrm_floor_share"):
        assert again[key] == pytest.approx(figures[key], rel=1e-6), key
    faster = floor_figures(figures, "dlrm", best_rates(Rates(1e10, 1e10), Rates(2e10, 1e9)))
    assert faster["dlrm_floor_ms"] < figures["dlrm_floor_ms"]  # the best of each rate is taken


def test_a_bf16_step_is_profiled_under_autocast(planted_data):
    figures = profile_preset("wukong", planted_data, batch_size=64, steps=2, warmup=1,
                             rates=Rates(matmul_flops=1e10, bandwidth=1e10), autocast="bf16")
    assert figures["wukong_bf16_step_ms"] > 0 and figures["wukong_bf16_interaction_fwd_ms"] > 0
    assert not any(k.startswith("wukong_step") for k in figures)  # keyed apart from the fp32 run


@pytest.mark.slow  # Inductor compiles the dense parts: about a minute on two cores
def test_the_compiled_step_is_timed_beside_the_eager_one(planted_data):
    figures = profile_preset("wukong", planted_data, batch_size=64, steps=2, warmup=1,
                             rates=Rates(matmul_flops=1e10, bandwidth=1e10), compiled=True)
    assert figures["wukong_compiled_step_ms"] > 0 and figures["wukong_compile_s"] > 0
    assert figures["wukong_compile_speedup"] == pytest.approx(
        figures["wukong_step_ms"] / figures["wukong_compiled_step_ms"])
    # the warm-up steps compiled something: they took far longer than the steps timed after them
    # (had compile_dense left the eager modules in place, two warm-up steps would cost two steps)
    assert figures["wukong_compile_s"] > 20 * 1e-3 * figures["wukong_compiled_step_ms"], figures
