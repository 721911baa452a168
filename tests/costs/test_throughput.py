import doctest
from pathlib import Path

import pytest

import autorec.costs.throughput as throughput
from autorec.arch import ArchSpec, MLPConfig, TableSpec
from autorec.costs import CPU_EMULATION_FACTOR, PEAK_FLOPS, PRECISION_BITS, arch_cost, peak_flops
from autorec.study import OBJECTIVES, StudyConfig, cost_summary

# NVIDIA's published dense H100 SXM peaks, rounded as the datasheet prints them (TFLOP/s).
DATASHEET_H100 = {"fp32": 67, "bf16": 989, "fp16": 989, "fp8_e4m3": 1979, "int8": 1979}


def spec_in(precision: str) -> ArchSpec:
    """Every dense part but the (fp32) feature projection of the 4-wide table in ``precision``."""
    return ArchSpec(dim=8, n_dense=3, dense_arch=(16,), dense_arch_precision=precision,
                    tables=(TableSpec(name="t", features=("f",), num_embeddings=100, dim=4),),
                    layers=(MLPConfig(hidden=(32,), n_out=4, precision=precision),),
                    over_arch=(16,), over_arch_precision=precision)


def test_module_examples_run():
    result = doctest.testmod(throughput)
    assert result.attempted > 0 and result.failed == 0


def test_h100_table_matches_the_published_dense_peaks():
    for precision, tflops in DATASHEET_H100.items():
        assert peak_flops("h100", precision) / 1e12 == pytest.approx(tflops, rel=0.005), precision
    assert throughput.H100_SXM_NATIVE["tf32"] / 1e12 == pytest.approx(495, rel=0.005)


def test_every_precision_has_an_h100_rate_and_a_cpu_factor():
    assert set(PEAK_FLOPS["h100"]) == set(PRECISION_BITS) == set(CPU_EMULATION_FACTOR)


def test_all_fp32_spec_takes_flops_over_the_fp32_peak():
    cost = arch_cost(spec_in("fp32"))
    assert cost.forward_flops > 0
    assert cost.compute_time("h100") == pytest.approx(cost.forward_flops / 66.9e12, rel=1e-12)
    assert cost.fp32_equivalent_flops == cost.forward_flops


def test_fp32_bf16_fp8_ratios_on_h100():
    fp32, bf16, fp8 = (arch_cost(spec_in(p)) for p in ("fp32", "bf16", "fp8_e4m3"))
    assert fp32.forward_flops == bf16.forward_flops == fp8.forward_flops
    projections = next(p.forward_flops for p in fp32.parts if p.name == "projections")
    rest = fp32.forward_flops - projections
    assert 0 < projections < rest
    fixed = projections / 66.9e12  # the projections stay fp32 in every spec
    assert fp32.compute_time() - fixed == pytest.approx(rest / 66.9e12)
    assert bf16.compute_time() - fixed == pytest.approx(rest / 989.4e12)
    assert fp8.compute_time() - fixed == pytest.approx(rest / 1978.9e12)
    # bf16 runs the reduced parts 989.4 / 66.9 ~ 14.8x faster than fp32, fp8 twice bf16's rate
    assert (fp32.compute_time() - fixed) / (bf16.compute_time() - fixed) == pytest.approx(14.79, abs=0.01)
    assert (bf16.compute_time() - fixed) / (fp8.compute_time() - fixed) == pytest.approx(2.0, rel=1e-3)


def test_lower_precision_never_increases_the_h100_estimate():
    times = {p: arch_cost(spec_in(p)).compute_time("h100") for p in PRECISION_BITS}
    assert times["fp32"] > times["bf16"] == times["fp16"] > times["fp8_e4m3"]
    for precision, seconds in times.items():
        assert seconds <= times["fp32"], precision
        if PRECISION_BITS[precision] <= 8:
            assert seconds <= times["bf16"] * 1.0001, precision
    # Hopper has no MX matmul: MX formats pay the block scales on top of the FP8 rate
    assert times["mxfp4_e2m1"] == times["mxfp8_e4m3"] > times["fp8_e4m3"]


def test_cpu_factors_weight_each_part():
    fp32, mx = arch_cost(spec_in("fp32")), arch_cost(spec_in("mxfp4_e2m1"))
    projections = next(p.forward_flops for p in fp32.parts if p.name == "projections")
    rest = fp32.forward_flops - projections
    assert mx.fp32_equivalent_flops == pytest.approx(projections + 4.99 * rest)


def test_unknown_device_or_precision_is_named():
    cost = arch_cost(spec_in("fp32"))
    with pytest.raises(ValueError, match="unknown device 'a100'"):
        cost.compute_time("a100")
    with pytest.raises(ValueError, match="device 'cpu' has no peak"):
        cost.compute_time("cpu")
    with pytest.raises(ValueError, match="unknown precision 'fp4' for device 'h100'"):
        peak_flops("h100", "fp4")
    with pytest.raises(ValueError, match="unknown precision 'fp4' for device 'cpu'"):
        throughput.emulation_factor("fp4")


def test_compute_time_is_a_study_objective(tmp_path):
    assert OBJECTIVES["compute_time_h100"] == "minimize"
    spec = spec_in("bf16")
    assert cost_summary(spec)["compute_time_h100"] == arch_cost(spec).compute_time("h100")
    space = Path(__file__).parents[2] / "search_spaces" / "precision.yaml"
    config = StudyConfig.from_dict({"name": "s", "data": {"name": "movielens100k"}, "space": str(space),
                                    "objectives": ["val_auc", "compute_time_h100"]}, tmp_path / "s.yaml")
    assert config.directions == ["maximize", "minimize"]
