"""``autorec train``: its flags come from TrainSettings and a bad value is one line naming the flag."""

import argparse

import pytest

from autorec.cli import build_parser, main
from autorec.cli.common import UsageError, add_model_args, model_from_args
from autorec.cli.train import DISTRIBUTED_FIELDS, FLAGS, TRAIN_FIELDS
from autorec.config.train import TrainSettings


def test_the_flags_parse_into_the_settings():
    args = build_parser().parse_args(["train", "--epochs", "3", "--lr", "0.01", "--optimizer", "adagrad",
                                      "--max-steps-per-epoch", "7", "--pipeline", "--dense-parallel", "fsdp",
                                      "--seed", "4"])
    settings = model_from_args(TrainSettings, args, (*TRAIN_FIELDS, *DISTRIBUTED_FIELDS, "seed"), FLAGS)
    assert (settings.epochs, settings.dense_lr, settings.dense_optimizer) == (3, 0.01, "adagrad")
    assert (settings.max_steps_per_epoch, settings.pipeline, settings.dense_parallel, settings.seed) == (
        7, True, "fsdp", 4)


def test_the_defaults_are_the_settings_defaults():
    args = build_parser().parse_args(["train"])
    assert model_from_args(TrainSettings, args, (*TRAIN_FIELDS, *DISTRIBUTED_FIELDS, "seed"), FLAGS) == (
        TrainSettings())


@pytest.mark.parametrize("flags, message", [
    (["--epochs", "0"], "--epochs: expected a number >= 1, got 0"),
    (["--lr", "-1"], "--lr: expected a number >= 0.0, got -1.0"),
    (["--checkpoint-every", "0"], "--checkpoint-every: expected a number >= 1, got 0"),
    (["--num-workers", "-2"], "--num-workers: expected a number >= 0, got -2"),
])
def test_a_bad_value_names_its_flag(flags, message, capsys):
    assert main(["train", *flags]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"autorec: error: {message}"


def test_model_args_follow_the_field_types():
    parser = argparse.ArgumentParser()
    add_model_args(parser, TrainSettings, ("max_steps_per_epoch", "dense_optimizer", "resume", "dense_lr"),
                   {"dense_lr": "--lr"})
    args = parser.parse_args(["--max-steps-per-epoch", "5", "--resume", "--lr", "2e-3"])
    assert (args.max_steps_per_epoch, args.dense_optimizer) == (5, "adam")
    assert (args.resume, args.dense_lr) == (True, 2e-3)
    with pytest.raises(SystemExit):
        parser.parse_args(["--dense-optimizer", "sgd"])
    with pytest.raises(UsageError, match=r"^resume: needs checkpoint_dir"):
        model_from_args(TrainSettings, args, ("max_steps_per_epoch", "resume"))
