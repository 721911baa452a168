"""TrainSettings (autorec.config.train) against the trainer's TrainConfig it converts into."""

import dataclasses

import pytest
from pydantic import ValidationError

from autorec.config.train import DenseOptimizer, DenseParallel, LrSchedule, TrainSettings
from autorec.train.distributed import DENSE_PARALLEL
from autorec.train.records import LR_SCHEDULES
from autorec.train.trainer import DENSE_OPTIMIZERS, TrainConfig
from tests.doctests import assert_examples_run


def test_the_settings_have_the_trainers_fields_and_defaults():
    fields = [(f.name, f.default) for f in dataclasses.fields(TrainConfig)]
    assert [(name, f.default) for name, f in TrainSettings.model_fields.items()] == fields
    assert TrainConfig(**TrainSettings().to_kwargs()) == TrainConfig()


def test_the_choices_are_the_trainers():
    assert set(DenseOptimizer.__args__) == set(DENSE_OPTIMIZERS)
    assert set(DenseParallel.__args__) == set(DENSE_PARALLEL)
    assert set(LrSchedule.__args__) == set(LR_SCHEDULES)


def test_every_setting_reaches_the_trainer():
    settings = TrainSettings(epochs=3, batch_size=64, dense_lr=0.01, dense_optimizer="adagrad",
                             checkpoint_dir="ck", resume=True, checkpoint_every=5, pipeline=True)
    config = TrainConfig(**settings.to_kwargs())
    assert dataclasses.asdict(config) == {**dataclasses.asdict(TrainConfig()), **settings.model_dump(
        include={"epochs", "batch_size", "dense_lr", "dense_optimizer", "checkpoint_dir", "resume",
                 "checkpoint_every", "pipeline"})}
    assert (config.epochs, config.dense_optimizer, config.resume) == (3, "adagrad", True)


@pytest.mark.parametrize("values, key", [
    ({"epochs": 0}, "epochs"),
    ({"batch_size": -1}, "batch_size"),
    ({"dense_optimizer": "sgd"}, "dense_optimizer"),
    ({"checkpoint_every": 0}, "checkpoint_every"),
    ({"embedding_lr": -0.1}, "embedding_lr"),
    ({"lr_schedule": "step"}, "lr_schedule"),
    ({"warmup_steps": -1}, "warmup_steps"),
    ({"pause_at_step": 0}, "pause_at_step"),
    ({"epoch": 3}, "epoch"),  # a misspelt key is refused, not ignored
])
def test_a_bad_value_is_refused_at_its_key(values, key):
    with pytest.raises(ValidationError) as info:
        TrainSettings(**values)
    assert info.value.errors()[0]["loc"] == (key,)


def test_resume_needs_a_checkpoint_folder():
    with pytest.raises(ValidationError, match="resume: needs checkpoint_dir"):
        TrainSettings(resume=True)
    with pytest.raises(ValidationError, match="pause_at_step: needs checkpoint_dir"):
        TrainSettings(pause_at_step=100)


def test_examples_run():
    assert_examples_run("autorec.config.train")
