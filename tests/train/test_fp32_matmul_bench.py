"""benchmarks/fp32_matmul.py on a tiny workload: three arms train on the same batches, and each
arm's floor share is the one floor over its own step time."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch

from autorec.data import load_dataset
from benchmarks.fp32_matmul import ARMS, figures_of, measure, rates
from benchmarks.roofline import Rates


def test_every_arm_is_timed_against_one_floor_at_the_ieee_rate() -> None:
    data = load_dataset("synthetic", preset="tiny", num_samples=2000)
    times, floor = measure("dlrm", data, SimpleNamespace(batch_size=64, rounds=2, steps=2))
    assert set(times) == set(ARMS) and all(len(t) == 2 and min(t) > 0 for t in times.values())
    fp32, bf16 = Rates(matmul_flops=1e11, bandwidth=1e10), Rates(matmul_flops=1e12, bandwidth=1e10)
    got = figures_of("dlrm", times, floor, 64, fp32, bf16)
    floor_s = got["fp32_matmul_dlrm_floor_ms"] / 1e3
    for arm in ARMS:
        key = f"fp32_matmul_dlrm_{arm}"
        assert math.isclose(got[f"{key}_floor_share"], 1e3 * floor_s / got[f"{key}_step_ms"])
        assert got[f"{key}_floor_share_at_bf16_rate"] < got[f"{key}_floor_share"]  # a 10x faster rate
    assert "fp32_matmul_dlrm_ieee_speedup" not in got
    assert got["fp32_matmul_dlrm_bf16mm_speedup_min"] <= got["fp32_matmul_dlrm_bf16mm_speedup"]
    assert torch.backends.mkldnn.matmul.fp32_precision != "bf16"  # the arms left no setting behind


def test_the_fp32_rate_is_refused_under_bf16_products() -> None:
    before = torch.backends.mkldnn.matmul.fp32_precision
    with pytest.raises(AssertionError, match="IEEE"):
        torch.backends.mkldnn.matmul.fp32_precision = "bf16"
        try:
            rates()
        finally:
            torch.backends.mkldnn.matmul.fp32_precision = before
