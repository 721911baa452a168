"""No architecture trained twice: a re-proposed architecture takes the first training's result,
does not use the budget, and a study whose space is exhausted still ends (locally and on Ray)."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest

from autorec.study import (
    REUSED_ATTR,
    StudyConfig,
    finished_count,
    open_storage,
    reused_count,
    run_study,
    select_trials,
)
from autorec.study.reuse import TRAINED_KEY_ATTR
from autorec.train import trainer as trainer_module
from tests import studyfiles

# One architecture only: every proposal after the first is the same.
ONE_ARCH = "dim: [4]\ndense_arch: [[8]]\nover_arch: [[8]]\nlayers: {num: [1], kinds: [dlrm]}\n"


def quiet(*_: object) -> None:
    pass


def load(config: StudyConfig) -> optuna.Study:
    return optuna.load_study(study_name=config.name, storage=open_storage(config.storage_url))


@pytest.fixture
def fits(monkeypatch) -> list[int]:
    """Counts the trainings (Trainer.fit calls) of this process."""
    calls: list[int] = []
    real = trainer_module.Trainer.fit

    def counted(self, *args, **kwargs):
        calls.append(1)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(trainer_module.Trainer, "fit", counted)
    return calls


def test_an_exhausted_space_trains_once_then_reuses_until_the_budget_of_reuses(tmp_path: Path, fits):
    space = tmp_path / "one.yaml"
    space.write_text(ONE_ARCH)
    config = StudyConfig.load(studyfiles.write_study(tmp_path, space=str(space),
                                                     budget={"trials": 2, "epochs": 1, "batch_size": 256,
                                                             "max_steps_per_epoch": 3}))
    summary = run_study(config, log=quiet)
    study = load(config)
    trials = study.get_trials()
    assert len(fits) == 1  # one training, whatever the sampler proposed after it
    assert [t.user_attrs.get(REUSED_ATTR) for t in trials] == [None, 0, 0]
    first, *again = trials
    assert TRAINED_KEY_ATTR in first.user_attrs
    for t in again:
        assert t.state == optuna.trial.TrialState.COMPLETE and t.values == first.values
        assert t.user_attrs["metrics"] == first.user_attrs["metrics"]
        assert t.user_attrs["checkpoint"] == first.user_attrs["checkpoint"]
        assert not (config.directory / "trials" / str(t.number)).exists()
    assert finished_count(study) == 1 and reused_count(study) == 2  # reuses used none of the budget
    assert summary.best["number"] == 0 and summary.pareto == [0]
    assert [t.number for t in select_trials(study, best=3)] == [0]
    assert [row["reused_from"] for row in summary.trials] == [None, 0, 0]


def test_a_reproposed_architecture_is_not_retrained_and_the_budget_goes_to_a_new_one(tmp_path: Path, fits):
    path = studyfiles.write_study(tmp_path, budget={"trials": 2, "epochs": 1, "batch_size": 256,
                                                    "max_steps_per_epoch": 3})
    config = StudyConfig.load(path)
    run_study(config, log=quiet)
    study = load(config)
    assert len(fits) == 2
    study.enqueue_trial(study.trials[0].params)  # the sampler proposes trial 0's architecture again
    config = StudyConfig.load(studyfiles.write_study(tmp_path, budget={"trials": 3, "epochs": 1,
                                                                       "batch_size": 256,
                                                                       "max_steps_per_epoch": 3}))
    run_study(config, log=quiet)
    trials = load(config).get_trials()
    assert len(fits) == 3  # the new budget's trial trained; the re-proposal did not
    assert trials[2].user_attrs[REUSED_ATTR] == 0 and trials[2].values == trials[0].values
    assert REUSED_ATTR not in trials[3].user_attrs and TRAINED_KEY_ATTR in trials[3].user_attrs
    assert trials[3].user_attrs[TRAINED_KEY_ATTR] != trials[0].user_attrs[TRAINED_KEY_ATTR]


def test_other_training_settings_are_another_training(tmp_path: Path, fits):
    space = tmp_path / "one.yaml"
    space.write_text(ONE_ARCH)
    budget = {"trials": 1, "epochs": 1, "batch_size": 256, "max_steps_per_epoch": 3}
    run_study(StudyConfig.load(studyfiles.write_study(tmp_path, space=str(space), budget=budget)), log=quiet)
    more = {**budget, "trials": 2, "max_steps_per_epoch": 4}  # the same study, trained longer now
    config = StudyConfig.load(studyfiles.write_study(tmp_path, space=str(space), budget=more))
    run_study(config, log=quiet)
    trials = load(config).get_trials()
    assert len(fits) == 2 and REUSED_ATTR not in trials[1].user_attrs


@pytest.mark.slow  # starts a local Ray cluster
def test_on_ray_a_reproposal_is_told_at_once_without_a_tune_trial(tmp_path: Path):
    from autorec.study.ray_runner import run_study_ray

    space = tmp_path / "one.yaml"
    space.write_text(ONE_ARCH)
    config = StudyConfig.load(studyfiles.write_study(tmp_path, space=str(space),
                                                     budget={"trials": 2, "epochs": 1, "batch_size": 256,
                                                             "max_steps_per_epoch": 3}))
    lines: list[str] = []
    run_study_ray(config, workers=1, log=lines.append)
    study = load(config)
    assert [t.user_attrs.get(REUSED_ATTR) for t in study.get_trials()] == [None, 0, 0]
    assert len(list((config.directory / "trials").iterdir())) == 1  # one training's checkpoints
    assert sum("reused" in line for line in lines) == 2
