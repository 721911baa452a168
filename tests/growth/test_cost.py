"""The training-cost model: total FLOPs per phase (autorec.costs.training), step times measured or fitted."""

import math

import pytest

from autorec.costs import arch_cost
from autorec.costs.training import training_flops
from autorec.data import load_dataset
from autorec.growth.cost import TrainingCostModel, measure_train_step
from autorec.growth.schedule import GrowthSchedule, Phase
from autorec.growth.shrink import shrink
from autorec.presets import preset
from tests.doctests import assert_examples_run

DATA = load_dataset("synthetic", preset="tiny", num_samples=400)
SPEC = preset("dcnv2", DATA.schema)
BATCH = next(iter(DATA.batches("train", 128, shuffle=False)))


def test_examples_run():
    assert_examples_run("autorec.growth.cost")


def test_flops_are_the_sum_over_phases_of_steps_batch_and_per_sample_flops():
    model = TrainingCostModel(SPEC, batch_size=128, measure=False)
    widths = {"over_arch": 0.5, "layers.0": 0.25}
    s = GrowthSchedule((Phase(30, widths), Phase(10)))
    cost = model.cost(s)
    small = round(training_flops(shrink(SPEC, widths), 128).total)  # dense, lookups, optimizers
    full = round(training_flops(SPEC, 128).total)
    assert small < full and full > arch_cost(SPEC).train_flops
    assert cost.flops == 30 * 128 * small + 10 * 128 * full
    assert [p.train_flops_per_sample for p in cost.phases] == [small, full]
    assert model.flops_ratio(s) == pytest.approx(cost.flops / (40 * 128 * full))
    assert model.flops_ratio(GrowthSchedule.full_size(40)) == 1.0
    # nothing measured yet: no step times to predict from
    assert all(math.isnan(p.step_seconds) and not p.measured for p in cost.phases)


def test_step_times_are_measured_once_per_architecture_then_fitted():
    model = TrainingCostModel(SPEC, batch_size=128, batch=BATCH, repeats=2)
    s = GrowthSchedule((Phase(5, {"over_arch": 0.25, "layers.0": 0.25}), Phase(5, {"over_arch": 0.5}),
                        Phase(5)))
    cost = model.cost(s)
    assert all(p.measured and p.step_seconds > 0 for p in cost.phases)
    assert len(model.step_seconds) == 3
    assert cost.seconds == pytest.approx(sum(5 * p.step_seconds for p in cost.phases))
    model.cost(s)
    assert len(model.step_seconds) == 3  # cached
    a, b = model.fit()
    assert math.isfinite(a) and math.isfinite(b)
    model.measure = False
    unseen = GrowthSchedule((Phase(5, {"over_arch": 0.75}), Phase(5)))
    predicted = model.cost(unseen).phases[0]
    assert not predicted.measured
    assert predicted.step_seconds == pytest.approx(a + b * predicted.train_flops_per_sample)


def test_bad_arguments():
    with pytest.raises(ValueError, match="measure=True needs a batch"):
        TrainingCostModel(SPEC, batch_size=128)
    with pytest.raises(ValueError, match="batch_size: expected a positive integer, got 0"):
        TrainingCostModel(SPEC, batch_size=0, measure=False)
    with pytest.raises(ValueError, match="expected repeats >= 1"):
        measure_train_step(SPEC, BATCH, repeats=0)
