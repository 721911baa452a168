"""Warm start: the presets a study names are its first trials (autorec.study.warm)."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest

from autorec.presets import preset
from autorec.study import StudyConfig, StudyConfigError, open_storage, run_study, trial_arch
from autorec.study.warm import WARM_ATTR
from tests import studyfiles

QUICKSTART = studyfiles.ROOT / "search_spaces" / "quickstart.yaml"


def quiet(*_: object) -> None:
    pass


def stored(config: StudyConfig) -> list[optuna.trial.FrozenTrial]:
    return optuna.load_study(study_name=config.name, storage=open_storage(config.storage_url)).trials


def test_the_named_presets_are_the_first_trials_and_a_resume_does_not_enqueue_them_again(tmp_path: Path):
    path = studyfiles.write_study(tmp_path, space=str(QUICKSTART), strategy="tpe",
                                  warm_start=["dcnv2", "dlrm"])
    config = StudyConfig.load(path)
    run_study(config, log=quiet)
    trials = stored(config)
    assert len(trials) == 3
    schema = _schema(config)
    for trial, name in zip(trials, ("dcnv2", "dlrm"), strict=False):
        assert trial.user_attrs[WARM_ATTR] == name
        want, got = preset(name, schema).to_dict(), trial_arch(trial).to_dict()
        for key in ("name", "metadata"):
            want.pop(key), got.pop(key)
        assert got == want
    assert WARM_ATTR not in trials[2].user_attrs  # the sampler's own
    run_study(StudyConfig.load(path), log=quiet)  # resumed: its budget is spent, nothing enqueued
    assert len(stored(config)) == 3


def _schema(config: StudyConfig):
    from autorec.study.trial import TrialRunner

    return TrialRunner(config).dataset.schema


def test_a_preset_outside_the_space_is_refused_before_anything_is_stored(tmp_path: Path):
    space = studyfiles.ROOT / "search_spaces" / "dlrm.yaml"  # dlrm layers only
    path = studyfiles.write_study(tmp_path, space=str(space), strategy="tpe", warm_start=["dlrm", "wukong"])
    config = StudyConfig.load(path)
    with pytest.raises(StudyConfigError, match=r"warm_start: preset 'wukong': .* is not in the space"):
        run_study(config, log=quiet)
    assert stored(config) == []  # dlrm, which fits, was not enqueued either


def test_a_study_that_does_not_sample_the_space_refuses_a_warm_start(tmp_path: Path):
    path = studyfiles.write_study(tmp_path, space=str(QUICKSTART), strategy="oneshot", warm_start=["dlrm"])
    with pytest.raises(StudyConfigError, match="warm_start: a oneshot study does not sample trials"):
        run_study(StudyConfig.load(path), log=quiet)


def test_an_unknown_preset_is_a_config_error(tmp_path: Path):
    path = studyfiles.write_study(tmp_path, warm_start=["resnet"])
    with pytest.raises(StudyConfigError, match="warm_start"):
        StudyConfig.load(path)
