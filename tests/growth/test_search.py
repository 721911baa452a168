"""Schedule search: the space, the RL policy, the TPE baseline, the evaluator's budget and cache."""

import math

import pytest
import torch

from autorec.data import load_dataset
from autorec.growth.cost import TrainingCostModel
from autorec.growth.schedule import GrowthSchedule, Phase
from autorec.growth.search import (
    ScheduleEvaluator,
    SchedulePolicy,
    ScheduleSpace,
    baseline_evaluation,
    prunable_parts,
    rl_search,
    search,
    tpe_search,
)
from autorec.growth.space import fit_budget
from autorec.growth.train import GrowthTrainConfig
from autorec.presets import preset
from tests.doctests import assert_examples_run

DATA = load_dataset("synthetic", preset="tiny", num_samples=1200)
SPEC = preset("dcnv2", DATA.schema)
CONFIG = GrowthTrainConfig(batch_size=64, eval_batch_size=512)


def test_examples_run():
    assert_examples_run("autorec.growth.search")
    assert_examples_run("autorec.growth.space")


def test_fit_budget_narrows_the_widest_part_until_the_schedule_fits():
    space = ScheduleSpace(("layers.0", "over_arch"), 100, phases=2, shares=(0.0, 0.2, 0.4),
                          ratios=(0.25, 0.5, 1.0), min_final=0.2)
    cost = TrainingCostModel(SPEC, 64, measure=False)
    values = [0.4, 1.0, 1.0, 0.2, 1.0, 0.5]  # the first phase at full width: 0.91 of dense
    assert cost.flops_ratio(space.schedule(values)) > 0.8
    fitted = fit_budget(space, values, cost.flops_ratio, 0.8)
    assert fitted is not None and cost.flops_ratio(fitted) <= 0.8
    first = fitted.to_dict()["phases"][0]["widths"]
    assert first["layers.0"] < 1.0  # the widest parts went down, the first phase's first
    assert fit_budget(space, values, cost.flops_ratio, 1.0) == space.schedule(values)  # fits already
    assert fit_budget(space, [0.2, 0.25, 0.25, 0.0, 1.0, 1.0], cost.flops_ratio, 0.1) is None


def test_prunable_parts_leave_out_what_cannot_be_grown_back():
    assert prunable_parts(SPEC) == ("dense_arch", "layers.0", "over_arch")
    assert prunable_parts(preset("dlrm", DATA.schema)) == ("dense_arch", "over_arch")  # dot has no width


def test_space_decisions_masks_and_decoding():
    space = ScheduleSpace(("layers.0", "over_arch"), 100, phases=2, shares=(0.0, 0.3, 0.6), ratios=(0.5, 1.0),
                          min_final=0.2)
    assert [n for n, _ in space.decisions] == ["phase0.share", "phase0.layers.0", "phase0.over_arch",
                                               "phase1.share", "phase1.layers.0", "phase1.over_arch"]
    assert space.allowed(3, [0.6, 0.5, 0.5]) == [True, False, False]  # only 0.2 of the steps left
    assert space.allowed(3, [0.3, 0.5, 0.5]) == [True, True, False]
    s = space.schedule([0.3, 0.5, 1.0, 0.3, 1.0, 0.5])
    assert s == GrowthSchedule((Phase(30, {"layers.0": 0.5}), Phase(30, {"over_arch": 0.5}), Phase(40)))
    # shares past the budget are cut (TPE proposes them; the RL mask forbids them)
    assert space.schedule([0.6, 0.5, 0.5, 0.6, 0.5, 0.5]) == GrowthSchedule(
        (Phase(80, {"layers.0": 0.5, "over_arch": 0.5}), Phase(20)))
    # all-full and zero-share choices are the dense schedule
    assert space.schedule([0.3, 1.0, 1.0, 0.0, 0.5, 0.5]) == GrowthSchedule.full_size(100)
    with pytest.raises(ValueError, match="expected 6 decision values, got 2"):
        space.schedule([0.3, 0.5])


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"total_steps": 0}, "total_steps: expected a positive integer"),
    ({"phases": 0}, "phases: expected a positive integer"),
    ({"shares": (0.1, 0.2)}, r"shares: expected choices in \[0, 1\) including 0"),
    ({"ratios": (0.0, 1.0)}, r"ratios: expected choices in \(0, 1\]"),
    ({"min_final": 0.0}, "min_final: expected a share"),
])
def test_bad_spaces(kwargs, message):
    with pytest.raises(ValueError, match=message):
        ScheduleSpace(**{"parts": ("over_arch",), "total_steps": 10, **kwargs})


def test_policy_respects_the_mask_and_learns():
    space = ScheduleSpace(("over_arch",), 100, phases=2, shares=(0.0, 0.4, 0.6), ratios=(0.25, 1.0))
    policy = SchedulePolicy(space)
    g = torch.Generator().manual_seed(0)
    for _ in range(30):
        actions, _, _ = policy.act(g)
        values = [c[a] for (_, c), a in zip(space.decisions, actions, strict=True)]
        assert values[0] + values[2] <= 0.8 + 1e-9  # never past the final phase's minimum


def test_evaluator_trains_each_schedule_once_and_counts_its_budget():
    space = ScheduleSpace(("over_arch",), 12, phases=1, shares=(0.0, 0.5), ratios=(0.5, 1.0))
    baseline = baseline_evaluation(SPEC, DATA, 12, CONFIG)
    evaluator = ScheduleEvaluator(SPEC, DATA, space, CONFIG, TrainingCostModel(SPEC, 64, measure=False),
                                  lam=0.1, budget=1, baseline=baseline)
    assert evaluator(GrowthSchedule.full_size(12)) is baseline and not evaluator.exhausted
    s = space.decode([1, 0])
    first = evaluator(s)
    assert evaluator(s) is first and evaluator.exhausted and len(evaluator.trained) == 1
    assert first.reward == pytest.approx(first.val_auc - 0.1 * first.flops_ratio)
    assert 0 < first.flops_ratio < 1 and math.isfinite(first.test_auc)
    with pytest.raises(ValueError, match="budget: expected a positive number"):
        ScheduleEvaluator(SPEC, DATA, space, CONFIG, TrainingCostModel(SPEC, 64, measure=False), budget=0)


def test_rl_and_tpe_spend_the_same_budget_over_the_same_space():
    space = ScheduleSpace(("layers.0", "over_arch"), 10, phases=1, shares=(0.0, 0.5), ratios=(0.25, 1.0))
    cost = TrainingCostModel(SPEC, 64, measure=False)
    baseline = baseline_evaluation(SPEC, DATA, 10, CONFIG)
    rl = rl_search(ScheduleEvaluator(SPEC, DATA, space, CONFIG, cost, budget=3, baseline=baseline),
                   batch_size=2, seed=0)
    tpe = tpe_search(ScheduleEvaluator(SPEC, DATA, space, CONFIG, cost, budget=len(rl.evaluations),
                                       baseline=baseline), seed=0)
    assert 2 <= len(rl.evaluations) <= 4 and len(tpe.evaluations) == len(rl.evaluations)
    for result in (rl, tpe):
        assert len({e.schedule for e in result.evaluations}) == len(result.evaluations)  # none twice
        assert result.best is not None and result.best.reward == max(e.reward for e in result.evaluations)
        assert all(e.schedule.total_steps == 10 for e in result.evaluations)


def test_search_end_to_end_and_bad_method():
    result, baseline = search(SPEC, DATA, method="tpe", total_steps=8, budget=2, config=CONFIG)
    assert baseline.flops_ratio == 1.0 and len(result.evaluations) == 2
    with pytest.raises(ValueError, match="method: expected one of rl, tpe, got 'grid'"):
        search(SPEC, DATA, method="grid")


@pytest.mark.parametrize("method", ["rl", "tpe"])
def test_a_flops_budget_trains_only_schedules_within_it(method):
    space = ScheduleSpace(("layers.0", "over_arch"), 10, phases=1, shares=(0.0, 0.3, 0.6),
                          ratios=(0.25, 0.5, 1.0), min_final=0.4)
    cost = TrainingCostModel(SPEC, 64, measure=False)
    # the space holds schedules on both sides of the budget
    every = [cost.flops_ratio(space.decode([s, a, b])) for s in range(3) for a in range(3) for b in range(3)]
    assert min(every) < 0.8 < max(every)
    baseline = baseline_evaluation(SPEC, DATA, 10, CONFIG)
    evaluator = ScheduleEvaluator(SPEC, DATA, space, CONFIG, cost, budget=3, baseline=baseline,
                                  max_ratio=0.8)
    over = evaluator(GrowthSchedule.full_size(10))  # the dense run: above the budget, not trained
    assert not over.trained and over.reward == pytest.approx(-1.0 - 0.01) and math.isnan(over.val_auc)
    assert evaluator.over_budget == [GrowthSchedule.full_size(10)] and not evaluator.trained
    found = (rl_search(evaluator, batch_size=2, seed=0) if method == "rl" else tpe_search(evaluator, seed=0))
    assert len(found.evaluations) >= 3 and all(e.flops_ratio <= 0.8 for e in found.evaluations)
    if method == "tpe":  # over-budget proposals are narrowed onto the budget, not answered -1
        assert all(len(s.phases) == 1 for s in evaluator.over_budget)  # only those with nothing to narrow
    assert found.best is not None and found.best.flops_ratio <= 0.8 and found.best.trained
    with pytest.raises(ValueError, match=r"max_ratio: expected a FLOPs ratio in \(0, 1\], got 1.5"):
        ScheduleEvaluator(SPEC, DATA, space, CONFIG, cost, max_ratio=1.5)


def test_a_budgeted_search_does_not_stop_cheap_runs_against_the_dense_curve():
    result, baseline = search(SPEC, DATA, method="tpe", total_steps=10, budget=2, config=CONFIG,
                              max_ratio=0.7, margin=0.0)
    assert baseline.flops_ratio == 1.0 and len(result.evaluations) == 2
    assert all(e.flops_ratio <= 0.7 for e in result.evaluations)
    assert result.evaluations[0].stopped_at is None  # the first has no reference to trail
