"""The Ray Tune backend on a local Ray: same storage, trial records and parameter names as the
local backend."""

import json
import os
import subprocess
import sys
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from autorec.study import (
    StudyConfig,
    TrialRunner,
    create_study,
    finished_count,
    open_storage,
    summarize,
    trial_arch,
)
from autorec.study.ray_runner import RayNotInstalledError, run_study_ray
from tests import studyfiles

ROOT = Path(__file__).resolve().parents[2]


def write_study(tmp_path: Path, **changes) -> Path:
    """The shared tiny study, with 2 epochs so ASHA (Ray's pruner) has a rung to act on."""
    changes = {"budget": {"trials": 3, "epochs": 2, "batch_size": 256, "max_steps_per_epoch": 3},
               "pruner": "median", **changes}
    return studyfiles.write_study(tmp_path, **changes)


def quiet(*_: object) -> None:
    pass


def local_proposals(config: StudyConfig, n: int) -> list[dict]:
    """The parameters the local backend's first ``n`` trials get (same sampler and seed)."""
    runner = TrialRunner(config)
    study = create_study(config, optuna.storages.InMemoryStorage())  # the study's sampler, seeded per trial
    params = []
    for _ in range(n):
        trial = study.ask()
        runner.strategy.propose(trial, runner.space, runner.dataset.schema)
        params.append(trial.params)
        study.tell(trial, 0.5)
    return params


def test_without_ray_the_error_says_what_to_install(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # as if it were not installed
    config = StudyConfig.load(write_study(tmp_path))
    with pytest.raises(ImportError, match=r'pip install "ray\[tune\]==2.60.0"') as info:
        run_study_ray(config, log=quiet)
    assert isinstance(info.value, RayNotInstalledError)
    assert not config.directory.exists()  # failed before touching the study


def test_ray_search_records_trials_like_the_local_backend(tmp_path):
    pytest.importorskip("ray")
    config = StudyConfig.load(write_study(tmp_path))
    summary = run_study_ray(config, workers=2, log=quiet)

    storage = open_storage(config.storage_url)
    study = optuna.load_study(study_name="t", storage=storage)
    trials = study.get_trials()
    assert len(trials) == 3 == finished_count(study)
    assert {t.state for t in trials} <= {TrialState.COMPLETE, TrialState.PRUNED}
    complete = [t for t in trials if t.state == TrialState.COMPLETE]
    assert complete  # the first trial to report has no rival to be stopped by

    runner = TrialRunner(config)
    store = optuna.artifacts.FileSystemArtifactStore(str(config.directory / "artifacts"))
    expected = local_proposals(config, len(trials))
    for t in trials:
        # Parameter names and values are the local backend's, and describe the recorded arch.
        assert t.params == expected[t.number]
        assert "num_layers" in t.params and "layer0.kind" in t.params
        spec = trial_arch(t)
        assert spec.name == f"t-trial{t.number}"
        assert runner.space.from_params(t.params, runner.dataset.schema).replace(name=spec.name) == spec
        assert t.user_attrs["costs"]["flops"] > 0
        (meta,) = optuna.artifacts.get_all_artifact_meta(t, storage=storage)
        with store.open_reader(meta.artifact_id) as f:
            assert f.read().decode().strip() == spec.to_json()
        assert 0 in t.intermediate_values  # validation AUC per epoch, as Optuna intermediate values
    for t in complete:
        assert t.value == t.user_attrs["metrics"]["val"]["auc"]
        assert 0 < t.user_attrs["metrics"]["test"]["auc"] < 1
        assert 0 <= t.user_attrs["metrics"]["data_wait_share"] < 1
        assert t.user_attrs["checkpoint"] == str(config.directory / "trials" / str(t.number) / "best")
        assert Path(t.user_attrs["checkpoint"]).exists()
        # A finished trial keeps its best checkpoint only: no resumable progress checkpoint.
        assert sorted(p.name for p in Path(t.user_attrs["checkpoint"]).parent.iterdir()) == ["best"]
    for t in trials:
        if t.state == TrialState.PRUNED:
            assert t.user_attrs["pruned_at_epoch"] == 0 and "metrics" not in t.user_attrs

    assert summary.best is not None and summary.best["number"] in {t.number for t in complete}
    assert summarize(study).trials == summary.trials
    # The study is done: a rerun adds no trials (and starts no Ray).
    assert len(run_study_ray(config, log=quiet).trials) == 3


@pytest.mark.slow  # 36 s; a Ray search's records stay in make test (the test above)
def test_cli_search_on_ray_prints_a_json_summary(tmp_path):
    pytest.importorskip("ray")
    path = write_study(tmp_path, name="cli", budget={"trials": 2, "epochs": 1, "batch_size": 256,
                                                      "max_steps_per_epoch": 2})
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    done = subprocess.run([sys.executable, "-m", "autorec.cli", "search", str(path), "--backend", "ray",
                           "--workers", "2", "--json"], env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout)  # Ray's own output went to stderr
    assert summary["name"] == "cli" and len(summary["trials"]) == 2
    assert summary["best"] is not None and summary["best"]["state"] == "COMPLETE"


def test_a_ray_trial_past_its_time_limit_fails_with_its_kind(tmp_path):
    """budget.trial_time_limit_s holds on Ray as locally: the trial fails as `time_limit`."""
    pytest.importorskip("ray")
    # (patience as long as the epochs: early stopping must not end the training before the limit does)
    budget = {"trials": 1, "epochs": 1000, "patience": 1000, "batch_size": 256, "trial_time_limit_s": 0.5}
    config = StudyConfig.load(write_study(tmp_path, budget=budget, pruner="none"))
    run_study_ray(config, workers=1, log=quiet)
    (trial,) = optuna.load_study(study_name="t", storage=open_storage(config.storage_url)).get_trials()
    assert trial.state == TrialState.FAIL
    assert trial.user_attrs["fail_kind"] == "time_limit"
    assert "time limit of 0.5 s" in trial.user_attrs["fail_reason"]


@pytest.mark.parametrize(("changes", "key"), [
    ({"budget": {"trials": 1, "memory_gb": 4}}, "budget.memory_gb"),
    ({"warm_start": ["dlrm"]}, "warm_start"),
])
def test_what_the_ray_backend_cannot_honour_is_refused_before_it_starts(tmp_path, changes, key):
    from autorec.study import StudyConfigError

    config = StudyConfig.load(write_study(tmp_path, **changes))
    with pytest.raises(StudyConfigError, match=f"{key}: the Ray backend does not"):
        run_study_ray(config, log=quiet)
    assert not (config.directory / "study.db").exists()
