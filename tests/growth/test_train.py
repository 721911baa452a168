"""Training under a schedule: phase architectures, boundaries, optimizer state, early stopping."""

import math

import pytest
import torch

from autorec.costs.training import training_flops
from autorec.data import load_dataset
from autorec.growth.schedule import GrowthSchedule, Phase
from autorec.growth.train import CurveStopper, GrowthTrainConfig, train_schedule
from autorec.models import build_model
from autorec.presets import preset
from tests.doctests import assert_examples_run

DATA = load_dataset("synthetic", preset="tiny", num_samples=1500)
SPEC = preset("dcnv2", DATA.schema)
CONFIG = GrowthTrainConfig(batch_size=64, eval_batch_size=512)


def test_examples_run():
    assert_examples_run("autorec.growth.train")


def test_phases_prune_and_grow_at_their_boundaries_and_end_full_size():
    s = GrowthSchedule((Phase(6), Phase(6, {"over_arch": 0.5, "layers.0": 0.25}),
                        Phase(6, {"over_arch": 0.25}), Phase(6)))
    result = train_schedule(SPEC, s, DATA, CONFIG, keep_model=True)
    assert [p.boundary for p in result.phases] == ["build", "prune", "prune+grow", "grow"]
    assert [p.steps for p in result.phases] == [6, 6, 6, 6]
    assert result.phases[1].spec.over_arch == (128, 64) and result.phases[2].spec.over_arch == (64, 32)
    assert result.phases[2].spec.layers[0] == SPEC.layers[0]  # layers.0 grown back in phase 2
    assert result.phases[-1].spec == SPEC and result.spec == SPEC and result.schedule == s
    # the model trained last really is the full-size one
    sizes = {n: p.shape for n, p in result.model.named_parameters()}
    assert sizes["over_arch.0._mlp.0._linear.weight"][0] == 256
    # FLOPs: per phase, steps x batch x the phase architecture's training FLOPs per sample
    expected = sum(6 * 64 * round(training_flops(p.spec, 64).total) for p in result.phases)
    assert result.train_flops == expected
    assert result.flops_ratio == pytest.approx(expected / (24 * 64 * round(training_flops(SPEC, 64).total)))
    assert result.flops_ratio < 1
    assert 0 <= result.val["auc"] <= 1 and 0 <= result.test["auc"] <= 1
    assert result.stopped_at is None and result.curve[-1] == (24, result.val["auc"])


def test_optimizer_state_is_carried_for_unchanged_parameters_only():
    s = GrowthSchedule((Phase(4, {"over_arch": 0.5}), Phase(4)))
    carried = train_schedule(SPEC, s, DATA, CONFIG).phases[1]
    # the tables, dense arch and cross layer come through unchanged; the over-arch does not
    assert carried.carried > 0 and carried.restarted > 0
    assert carried.carried + carried.restarted == len(list(build_model(SPEC).parameters()))
    fresh = train_schedule(SPEC, s, DATA, GrowthTrainConfig(batch_size=64, carry_optimizer=False)).phases[1]
    assert fresh.carried == 0 and fresh.restarted == carried.carried + carried.restarted


def test_the_same_seed_trains_the_same_model():
    s = GrowthSchedule((Phase(5, {"over_arch": 0.5}), Phase(5)))
    a = train_schedule(SPEC, s, DATA, CONFIG, keep_model=True)
    b = train_schedule(SPEC, s, DATA, CONFIG, keep_model=True)
    assert a.val == b.val
    for (name, x), (_, y) in zip(a.model.state_dict().items(), b.model.state_dict().items(), strict=True):
        assert torch.equal(x, y), name


def test_a_recipes_dense_weight_decay_shrinks_the_dense_weights():
    """The study's recipe reaches the schedule's optimizers: with a strong dense weight decay
    (L2 under Adam, so each step moves a weight about lr towards 0) the dense weights end smaller."""
    from autorec.train.records import TrainConfig

    s = GrowthSchedule((Phase(4, {"over_arch": 0.5}), Phase(8)))

    def dense_norm(weight_decay: float) -> float:
        recipe = TrainConfig(dense_lr=0.01, dense_weight_decay=weight_decay, embedding_weight_decay=0.0)
        config = GrowthTrainConfig.from_recipe(recipe, batch_size=64, eval_batch_size=512)
        assert (config.dense_lr, config.dense_weight_decay, config.embedding_lr) == (0.01, weight_decay, 0.2)
        model = train_schedule(SPEC, s, DATA, config, keep_model=True).model
        return sum(p.norm().item() for n, p in model.named_parameters()
                   if not n.startswith("sparse_arch.") and p.dim() == 2)

    assert dense_norm(50.0) < 0.5 * dense_norm(0.0)


def test_the_dense_schedule_is_one_full_phase():
    result = train_schedule(SPEC, GrowthSchedule.full_size(8), DATA, CONFIG)
    assert [p.boundary for p in result.phases] == ["build"] and result.flops_ratio == 1.0


def test_learning_curve_early_stopping_cuts_a_run_behind_the_reference():
    config = GrowthTrainConfig(batch_size=64, eval_every=4)
    s = GrowthSchedule((Phase(4, {"over_arch": 0.25}), Phase(12)))
    stopper = CurveStopper(margin=0.0, min_fraction=0.0, settle=0.0)
    stopper.offer([(step, 1.0) for step in range(0, 17, 4)], final=1.0)  # an unbeatable reference
    result = train_schedule(SPEC, s, DATA, config, stopper=stopper)
    # phase 0 is reduced (never compared); the first full-size evaluation stops the run
    assert result.stopped_at == 8 and result.test == {} and [p.steps for p in result.phases] == [4, 4]
    assert result.curve[-1][0] == 8 and not math.isnan(result.val_auc)
    lenient = CurveStopper(margin=1.0, min_fraction=0.0, settle=0.0)
    lenient.offer([(step, 1.0) for step in range(0, 17, 4)], final=1.0)
    finished = train_schedule(SPEC, s, DATA, config, stopper=lenient)
    assert finished.stopped_at is None and [step for step, _ in finished.curve] == [4, 8, 12, 16]


def test_bad_config():
    with pytest.raises(ValueError, match="batch_size: expected a positive integer, got 0"):
        GrowthTrainConfig(batch_size=0)
    with pytest.raises(ValueError, match="eval_every: expected a positive integer or None"):
        GrowthTrainConfig(eval_every=0)
    with pytest.raises(ValueError, match="dense_optimizer: expected one of adam, adagrad, got 'sgd'"):
        GrowthTrainConfig(dense_optimizer="sgd")
    with pytest.raises(ValueError, match="device: expected cpu or cuda"):
        GrowthTrainConfig(device="tpu")
    with pytest.raises(ValueError, match=r"dense_weight_decay: expected a number >= 0, got -0\.1"):
        GrowthTrainConfig(dense_weight_decay=-0.1)
    with pytest.raises(ValueError, match="expected margin >= 0"):
        CurveStopper(margin=-1)
