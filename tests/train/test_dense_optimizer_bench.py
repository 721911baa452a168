"""benchmarks/dense_optimizer.py on a tiny workload: both forms train, and the figures are theirs."""

from __future__ import annotations

import math

from autorec.data import load_dataset
from autorec.train import records
from benchmarks.dense_optimizer import measure, trainer


def test_the_benchmark_times_each_form_and_leaves_the_default_fused():
    data = load_dataset("synthetic", preset="tiny", num_samples=2000)
    got = measure("dlrm", data, batch_size=64, rounds=2, steps=2)
    for form in ("fused", "default"):
        assert got[f"dense_{form}_dlrm_step_ms"] > 0 and got[f"dense_{form}_dlrm_optimizer_ms"] > 0
    assert math.isclose(got["dense_fused_dlrm_speedup"],
                        got["dense_default_dlrm_step_ms"] / got["dense_fused_dlrm_step_ms"])
    assert records.FUSED_DEVICES["adam"] == ("cpu", "cuda")  # the default form's trainer put it back
    groups = [g for g in trainer("dlrm", data, 64, fused=True).optimizer.param_groups if "betas" in g]
    assert all(g["fused"] for g in groups)
