"""The done-when plan quality, on the benchmark's 20 held-out table sets (slow: minutes)."""

from __future__ import annotations

import importlib.util
import statistics
from pathlib import Path

import pytest

from autorec.sharding.cost_model import ShardCostModel
from autorec.sharding.policy import load_policy

BENCHMARK = Path(__file__).resolve().parents[2] / "benchmarks" / "sharding_plans.py"


@pytest.mark.slow
def test_rl_beats_the_best_baseline_on_held_out_sets():
    spec = importlib.util.spec_from_file_location("sharding_plans", BENCHMARK)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    model = ShardCostModel.default("cpu")
    result = bench.quality(20, 7, model, load_policy(bench.ROOT / "cost_models" / "cpu"), log=False)
    summary = bench.summarise(result)
    planners = summary["planners"]
    # the target, per set: the planner as shipped (polished) is >= 15% below each set's
    # best plain baseline by max-device cost (measured 16.3% with polish, 15.0% without)
    assert summary["rl_saving_vs_best_baseline_per_set"] >= 0.15, summary
    assert planners[summary["best_baseline_by_mean"]]["rl_saving"] >= 0.15, summary
    assert planners["rl"]["failures"] == 0
    assert planners["rl"]["over_lower_bound"] <= 1.03  # cost / even share (shard-mlp)
    # the polish never makes the plan worse by the policy's objective, and is the planner's
    assert summary["objective"] == "phase"
    assert planners["rl, no polish"]["sets_rl_dearer_phase"] == 0
    assert planners["rl, no polish"]["rl_phase_saving"] > 0.01
    assert summary["rl_equals_polished_no_polish_plan"] == "20/20"
    # the training earned its place before the polish: the trained policy's unpolished plans
    # beat its untrained priors' by the objective it was trained for (measured 5.7% by phase-max)
    rows = result["rows"]
    raw = {r["seed"]: r["phase"] for r in rows["rl, no polish"]}
    priors = [1 - raw[r["seed"]] / r["phase"] for r in rows["rl untrained, priors only (ablation)"]]
    assert statistics.mean(priors) >= 0.03
