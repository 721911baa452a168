"""Issue 24, "bad trials": a trial whose loss turns NaN, one that raises, one that runs out of
memory and one past its time limit are each recorded as failed with the reason, and the study
goes on to its budget.

The default suite runs the NaN and time-limit studies in this process (real trainer, real
SQLite storage); the slow test runs all four classes through the real ``autorec search``
process and reads them back through the real optuna-dashboard (benchmarks/faults_trials.py).
"""

import optuna
import pytest
import yaml

from autorec.study import StudyConfig, StudyConfigError, finished_count, open_storage, run_study
from autorec.study.local import memory_cap
from benchmarks.faults_trials import (
    BLOCKED_TRIAL,
    KINDS,
    STUDIES,
    bad_trials,
    judge,
    run_bad_trials,
    write_study,
)


def quiet(*_: object) -> None:
    pass


@pytest.mark.parametrize("name", ["nan", "time_limit"])
def test_a_diverging_or_overlong_trial_fails_with_its_reason_and_the_study_goes_on(tmp_path, name):
    (study,) = [s for s in STUDIES if s.name == name]
    config = StudyConfig.load(write_study(tmp_path, study))
    summary = run_study(config, log=quiet)
    verdict = judge(study, 0, summary.to_dict())[name]
    assert verdict["failed"] and verdict["completed"], verdict
    expected = {"nan": "TrainingDiverged: loss is nan at epoch 0 step ",
                "time_limit": "TrainingTimeLimit: training exceeded its time limit of 1 s ("}[name]
    assert all(t["fail_reason"].startswith(expected) for t in summary.trials), summary.trials
    stored = optuna.load_study(study_name=name, storage=open_storage(config.storage_url))
    assert finished_count(stored) == 2  # failed trials use the budget; nothing is retried


def test_the_study_file_validates_the_new_limits(tmp_path):
    (study,) = [s for s in STUDIES if s.name == "nan"]
    path = write_study(tmp_path, study)
    for changes, message in (({"budget": {"trial_time_limit_s": 0}}, "budget.trial_time_limit_s: expected"),
                             ({"budget": {"memory_gb": -1}}, "budget.memory_gb: expected"),
                             ({"train": {"dense_lr": "fast"}}, "train.dense_lr: expected a number"),
                             ({"train": {"lr": 1}}, "train.lr: unknown key")):
        raw = yaml.safe_load(path.read_text())
        for key, value in changes.items():
            raw[key] = {**raw.get(key, {}), **value}
        path.write_text(yaml.safe_dump(raw))
        with pytest.raises(StudyConfigError, match=message.replace(".", r"\.")):
            StudyConfig.load(path)
        path = write_study(tmp_path, study)


def test_a_memory_cap_below_what_the_worker_maps_says_so():
    with pytest.raises(StudyConfigError, match=r"budget.memory_gb: 0.001 GiB is below what this worker"):
        with memory_cap(0.001):
            pass


@pytest.mark.slow
def test_every_bad_trial_class_through_the_real_search_and_dashboard(tmp_path):
    results = run_bad_trials(tmp_path)
    assert set(results) == set(KINDS)
    for fault, verdict in results.items():
        assert verdict["failed"], (fault, verdict["why"], verdict["stderr"])
        assert verdict["completed"], (fault, verdict)
        assert verdict["shown"], (fault, "the dashboard does not show the failure")
    oom = results["oom"]["trials"]
    assert oom and all("can't allocate memory" in t["fail_reason"] for t in oom)
    assert results["raises"]["trials"][0]["fail_reason"].startswith("NotADirectoryError: ")


def test_bad_trials_are_told_apart_from_good_ones():
    """The judge's own check: a bad trial that completed is not counted as failed."""
    (study,) = [s for s in STUDIES if s.name == "mixed"]
    small = {"state": "COMPLETE", "fail_kind": None, "fail_reason": None, "reused_from": None,
             "costs": {"dense_params": 10}}
    huge = {**small, "state": "FAIL", "fail_kind": "out_of_memory",
            "fail_reason": "RuntimeError: can't allocate memory", "costs": {"dense_params": 2e9}}
    trials = [{**(huge if n == 0 else small), "number": n} for n in range(6)]
    verdict = judge(study, 0, {"trials": trials})
    assert verdict["oom"]["failed"] and verdict["oom"]["completed"]
    assert not verdict["raises"]["failed"]  # the blocked trial completed: no failure recorded
    assert bad_trials({"trials": trials}, "raises") == [trials[BLOCKED_TRIAL]]
