import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from autorec.study import (
    INTERRUPTED_ATTR,
    StudyConfig,
    StudyConfigError,
    create_study,
    finished_count,
    open_storage,
    run_study,
    summarize,
    trial_arch,
)
from tests.postgres import server_url
from tests.studyfiles import write_study

ROOT = Path(__file__).resolve().parents[2]




def quiet(*_: object) -> None:
    pass


def test_shipped_studies_load():
    from autorec.strategies import make_strategy

    files = sorted((ROOT / "studies").glob("*.yaml"))
    shipped = {"quickstart", "movielens", "pareto", "movielens_dnas", "movielens_dnas_soft"}
    assert shipped <= {f.stem for f in files}
    for path in files:
        config = StudyConfig.load(path)
        assert config.name == path.stem and (config.space is None or config.space.is_file())
        make_strategy(config.strategy.name, config.seed, **config.strategy.options)  # options valid
    quick = StudyConfig.load(ROOT / "studies" / "quickstart.yaml")
    assert quick.storage_url.endswith("studies/quickstart/study.db")
    assert quick.baselines == ("dlrm", "dcnv2", "wukong", "dhen")


@pytest.mark.parametrize("changes, message", [
    ({"strategy": "bayes"}, "strategy: expected one of random, tpe, nsga2"),
    ({"objectives": ["val_auc", "speed"]}, "objectives[1]: expected one of val_auc"),
    ({"objectives": ["val_auc", "val_auc"]}, "objectives: objectives repeat"),
    ({"budget": {"trials": 0}}, "budget.trials: expected an integer >= 1, got 0"),
    ({"budget": {"trails": 3}}, "budget.trails: unknown key"),
    ({"space": "nowhere.yaml"}, "space: no such file"),
    ({"data": {"name": "imagenet"}}, "data.name: expected one of movielens100k"),
    ({"pruner": "asha"}, "pruner: expected one of median, hyperband, none"),
    ({"storage": "redis"}, "storage: expected sqlite, journal or a database URL"),
    ({"baselines": ["dlrm", "bert"]}, "baselines[1]: expected one of dlrm"),
    ({"colour": "red"}, "colour: unknown key"),
])
def test_malformed_study_files_name_the_key(tmp_path, changes, message):
    path = write_study(tmp_path, **changes)
    with pytest.raises(StudyConfigError) as info:
        StudyConfig.load(path)
    assert str(info.value).startswith(f"{path}: ") and message in str(info.value)


def test_yaml_syntax_error_names_the_line(tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text("name: x\ndata:\n  name: [movielens100k\nspace: a.yaml\n")
    with pytest.raises(StudyConfigError, match=r"broken.yaml:\d+:\d+: invalid YAML"):
        StudyConfig.load(path)
    path.write_text("name: x\nname: y\n")
    with pytest.raises(StudyConfigError, match=r"broken.yaml:2:1: invalid YAML: found duplicate key 'name'"):
        StudyConfig.load(path)


def test_search_records_arch_metrics_costs_and_baselines(tmp_path):
    config = StudyConfig.load(write_study(tmp_path, baselines=["dlrm"]))
    summary = run_study(config, log=quiet)
    storage = open_storage(config.storage_url)
    study = optuna.load_study(study_name="t", storage=storage)
    trials = study.get_trials(states=(TrialState.COMPLETE,))
    assert len(trials) == 3 == finished_count(study)
    store = optuna.artifacts.FileSystemArtifactStore(str(config.directory / "artifacts"))
    for t in trials:
        spec = trial_arch(t)
        assert spec.feature_names and t.user_attrs["costs"]["flops"] > 0
        assert 0 < t.user_attrs["metrics"]["test"]["auc"] < 1
        assert 0 <= t.user_attrs["metrics"]["data_wait_share"] < 1  # recorded with every trial
        assert t.value == t.user_attrs["metrics"]["val"]["auc"]
        (meta,) = optuna.artifacts.get_all_artifact_meta(t, storage=storage)
        with store.open_reader(meta.artifact_id) as f:
            assert f.read().decode().strip() == spec.to_json()
        # A finished trial keeps its best checkpoint only, not the resumable one beside it.
        folder = config.directory / "trials" / str(t.number)
        assert t.user_attrs["checkpoint"] == str(folder / "best")
        assert sorted(p.name for p in folder.iterdir()) == ["best"]
    assert set(summary.baselines) == {"dlrm"}
    assert summary.best["number"] in {t.number for t in trials}
    # the verdict names the preset it compared with, whichever won
    assert re.search(r"preset (trained with the same budget \()?dlrm", summary.verdict()), summary.verdict()
    # Rerunning the finished study does no more trials and keeps the baselines.
    again = run_study(config, log=quiet)
    assert len(again.trials) == 3 and again.baselines == summary.baselines


def test_failing_trials_are_recorded_with_their_reason_and_the_study_goes_on(tmp_path, monkeypatch):
    from autorec.train import trainer as trainer_module

    real_fit, calls = trainer_module.Trainer.fit, []

    def flaky_fit(self):
        calls.append(1)
        if len(calls) == 1:
            raise trainer_module.TrainingDiverged("loss is nan at epoch 0 step 2")
        if len(calls) == 2:
            raise MemoryError("out of memory allocating the tables")
        return real_fit(self)

    monkeypatch.setattr(trainer_module.Trainer, "fit", flaky_fit)
    config = StudyConfig.load(write_study(tmp_path, budget={"trials": 3, "epochs": 1, "batch_size": 256,
                                                             "max_steps_per_epoch": 2}))
    summary = run_study(config, log=quiet)
    states = [t["state"] for t in summary.trials]
    assert states == ["FAIL", "FAIL", "COMPLETE"]
    assert summary.trials[0]["fail_reason"] == "TrainingDiverged: loss is nan at epoch 0 step 2"
    assert summary.trials[1]["fail_reason"].startswith("MemoryError: out of memory")


def test_kill_minus_nine_and_resume(tmp_path):
    path = write_study(tmp_path, budget={"trials": 3, "epochs": 2, "batch_size": 64})
    config = StudyConfig.load(path)
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    proc = subprocess.Popen([sys.executable, "-m", "autorec.cli", "search", str(path), "--json"],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    storage = open_storage(config.storage_url)
    deadline = time.monotonic() + 300
    # Kill once one trial has finished and the next one is running.
    while time.monotonic() < deadline:
        try:
            study = optuna.load_study(study_name="t", storage=storage)
            trials = study.get_trials(deepcopy=False)
        except KeyError:
            trials = []
        states = [t.state for t in trials]
        # Kill during training: once the running trial has recorded its whole architecture.
        if (states.count(TrialState.COMPLETE) >= 1 and states[-1] == TrialState.RUNNING
                and "arch" in trials[-1].user_attrs):
            break
        assert proc.poll() is None, "the search ended before it could be killed"
        time.sleep(0.2)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    before = {t.number: t for t in study.get_trials() if t.state == TrialState.COMPLETE}
    interrupted = study.get_trials(states=(TrialState.RUNNING,))[0]

    summary = run_study(config, log=quiet)
    study = optuna.load_study(study_name="t", storage=storage)
    trials = study.get_trials()
    failed = trials[interrupted.number]
    assert failed.state == TrialState.FAIL and failed.user_attrs[INTERRUPTED_ATTR]
    assert "interrupted" in failed.user_attrs["fail_reason"]
    retry = [t for t in trials if t.user_attrs.get("retry_of") == interrupted.number]
    assert len(retry) == 1 and retry[0].state == TrialState.COMPLETE
    assert retry[0].params == interrupted.params
    for number, t in before.items():  # nothing finished was lost or redone
        assert trials[number].state == TrialState.COMPLETE and trials[number].values == t.values
    complete = [t for t in trials if t.state == TrialState.COMPLETE]
    assert len(complete) == 3 == finished_count(study)
    assert summary.best is not None


def test_two_workers_share_one_journal_storage(tmp_path):
    """Both spawned workers run trials into one journal file. The budget is in seconds, counted
    from each worker's own start, so a worker that imports torch slowly still runs its trials
    (with a budget of a few trials, the first worker could run them all before the second is up:
    CI saw that). The exact trial count of several workers is tests/faults/test_workers.py's."""
    config = StudyConfig.load(write_study(tmp_path, storage="journal",
                                          budget={"trials": 40, "timeout_s": 2, "epochs": 1,
                                                  "batch_size": 256, "max_steps_per_epoch": 2}))
    run_study(config, workers=2, log=quiet)
    study = optuna.load_study(study_name="t", storage=open_storage(config.storage_url))
    trials = study.get_trials()
    assert 2 <= [t.state for t in trials].count(TrialState.COMPLETE) == len(trials) <= 40
    assert sorted(t.number for t in trials) == list(range(len(trials)))
    workers = {t.user_attrs["worker"]["pid"] for t in trials}
    assert len(workers) == 2  # both processes ran trials
    assert all("metrics" in t.user_attrs for t in trials)


@pytest.fixture
def postgres_url() -> str:
    return server_url()


def test_postgresql_storage(tmp_path, postgres_url):
    name = f"pg{os.getpid()}_{int(time.time() * 1000)}"
    config = StudyConfig.load(write_study(tmp_path, name=name, storage=postgres_url))
    summary = run_study(config, log=quiet)
    study = optuna.load_study(study_name=name, storage=open_storage(postgres_url))
    assert [t.state for t in study.get_trials()].count(TrialState.COMPLETE) == 3
    assert summary.best is not None
    optuna.delete_study(study_name=name, storage=open_storage(postgres_url))


def test_changing_objectives_of_a_stored_study_is_refused(tmp_path):
    config = StudyConfig.load(write_study(tmp_path))
    create_study(config)
    other = StudyConfig.load(write_study(tmp_path, objectives=["val_auc", "flops"]))
    with pytest.raises(StudyConfigError, match="objectives: the stored study 't' has"):
        create_study(other)
    assert summarize(create_study(config)).trials == []


@pytest.fixture(scope="module")
def finished_study(tmp_path_factory):
    budget = {"trials": 3, "epochs": 1, "batch_size": 256, "max_steps_per_epoch": 4}
    path = write_study(tmp_path_factory.mktemp("done"), budget=budget)
    run_study(StudyConfig.load(path), log=quiet)
    return path


def test_export_best_trials_and_retrain_from_the_model_card(finished_study, tmp_path):
    import shlex

    from autorec.cli import main
    from autorec.export import load_arch, load_model

    assert main(["export", str(finished_study), "--best", "2", "-o", str(tmp_path / "out")]) == 0
    dirs = sorted((tmp_path / "out").iterdir())
    assert len(dirs) == 2 and all(d.name.startswith("trial-") for d in dirs)
    for d in dirs:
        for name in ("arch.json", "weights.safetensors", "model.pt2", "MODEL_CARD.md"):
            assert (d / name).is_file(), name
        load_model(d)
    storage = open_storage(StudyConfig.load(finished_study).storage_url)
    study = optuna.load_study(study_name="t", storage=storage)
    best = max((t for t in study.get_trials() if t.state == TrialState.COMPLETE),
               key=lambda t: t.user_attrs["metrics"]["val"]["auc"])
    assert load_arch(tmp_path / "out" / f"trial-{best.number}") == trial_arch(best)
    card = (dirs[0] / "MODEL_CARD.md").read_text()
    command = next(line for line in card.splitlines() if "autorec train" in line).strip().strip("`")
    args = shlex.split(command[command.index("autorec train"):])[1:]
    proc = subprocess.run([sys.executable, "-m", "autorec.cli", *args, "--epochs", "1",
                           "--max-steps-per-epoch", "2", "--json"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.strip().splitlines()[-1])["data"] == "synthetic"


@pytest.mark.parametrize("args, message", [
    (["--trial", "99"], "--trial: study 't' has no trial 99"),
    (["--trial", "0", "--best", "2"], "--trial and --best exclude each other"),
])
def test_export_bad_requests(finished_study, tmp_path, capsys, args, message):
    from autorec.cli import main

    assert main(["export", str(finished_study), *args, "-o", str(tmp_path / "x")]) == 2
    assert message in capsys.readouterr().err


def test_export_before_search_says_to_run_it(tmp_path, capsys):
    from autorec.cli import main

    path = write_study(tmp_path, name="never")
    assert main(["export", str(path), "-o", str(tmp_path / "x")]) == 2
    assert "no study 'never'" in capsys.readouterr().err


def test_multi_objective_study_traces_a_pareto_front(tmp_path):
    nsga2 = {"name": "nsga2", "options": {"population_size": 4}}
    config = StudyConfig.load(write_study(tmp_path, strategy=nsga2, objectives=["val_auc", "flops"]))
    summary = run_study(config, log=quiet)
    assert [t["state"] for t in summary.trials] == ["COMPLETE"] * 3
    for t in summary.trials:
        assert t["values"] == [t["val_auc"], t["costs"]["flops"]]
    front = [t for t in summary.trials if t["number"] in summary.pareto]
    for t in front:  # nobody dominates a front member
        assert not any(o["val_auc"] > t["val_auc"] and o["costs"]["flops"] < t["costs"]["flops"]
                       for o in summary.trials)


def test_measured_latency_objective(tmp_path):
    config = StudyConfig.load(write_study(tmp_path, strategy="random", objectives=["val_auc", "latency_ms"],
                                          budget={"trials": 2, "epochs": 1, "batch_size": 256,
                                                  "max_steps_per_epoch": 2}))
    summary = run_study(config, log=quiet)
    for t in summary.trials:
        assert t["state"] == "COMPLETE", t["fail_reason"]
        assert 0 < t["costs"]["latency_ms"] < 10_000 and t["values"][1] == t["costs"]["latency_ms"]


@pytest.mark.parametrize("pruner", ["median", "hyperband"])
def test_single_objective_pruners_run_and_record_intermediate_aucs(tmp_path, pruner):
    config = StudyConfig.load(write_study(tmp_path, pruner=pruner,
                                          budget={"trials": 4, "epochs": 2, "batch_size": 256,
                                                  "max_steps_per_epoch": 2}))
    run_study(config, log=quiet)
    study = optuna.load_study(study_name="t", storage=open_storage(config.storage_url))
    expected = optuna.pruners.HyperbandPruner if pruner == "hyperband" else optuna.pruners.MedianPruner
    assert isinstance(create_study(config).pruner, expected)
    for t in study.get_trials():
        assert t.state in (TrialState.COMPLETE, TrialState.PRUNED)
        assert 0 in t.intermediate_values  # validation AUC reported after the first epoch
        if t.state == TrialState.PRUNED:
            assert t.user_attrs["pruned_at_epoch"] in t.intermediate_values


def test_ctrl_c_during_a_trial_and_resume(tmp_path, monkeypatch):
    from autorec.train import trainer as trainer_module

    real_fit, calls = trainer_module.Trainer.fit, []

    def interrupted_fit(self):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real_fit(self)

    monkeypatch.setattr(trainer_module.Trainer, "fit", interrupted_fit)
    config = StudyConfig.load(write_study(tmp_path))
    with pytest.raises(KeyboardInterrupt):
        run_study(config, log=quiet)
    run_study(config, log=quiet)
    study = optuna.load_study(study_name="t", storage=open_storage(config.storage_url))
    trials = study.get_trials()
    assert trials[1].state == TrialState.FAIL and trials[1].user_attrs[INTERRUPTED_ATTR]
    assert trials[1].user_attrs["fail_reason"] == "interrupted: Ctrl-C"
    retry = [t for t in trials if t.user_attrs.get("retry_of") == 1]
    assert len(retry) == 1 and retry[0].state == TrialState.COMPLETE and retry[0].params == trials[1].params
    assert [t.state for t in trials].count(TrialState.COMPLETE) == 3 == finished_count(study)


def test_a_trial_cut_before_its_worker_marked_it_is_failed_and_not_counted(tmp_path):
    from autorec.study.recovery import UNMARKED_CLAIMED_S, recover_interrupted
    from autorec.study.storage import create_study

    config = StudyConfig.load(write_study(tmp_path))
    storage = open_storage(config.storage_url)
    study = create_study(config, storage)
    begun = time.monotonic()
    cut = study.ask()  # created, never marked: its worker was killed right there
    assert recover_interrupted(study, storage) == []  # no claim: a minute's grace (workers elsewhere)
    # Under the claim a moment-old unmarked trial is waited out (a live worker would mark it by
    # then), not skipped: a rerun right after the kill must not leave it RUNNING.
    assert recover_interrupted(study, storage, claimed=True) == [cut.number]
    assert time.monotonic() - begun >= UNMARKED_CLAIMED_S
    failed = study.get_trials()[cut.number]
    assert failed.state == TrialState.FAIL and failed.user_attrs[INTERRUPTED_ATTR]
    summary = run_study(config, log=quiet)  # the budget is met without it, and nothing retries it
    assert finished_count(optuna.load_study(study_name="t", storage=storage)) == 3 == len(summary.trials) - 1


def test_a_retry_goes_on_from_the_cut_trials_last_checkpoint(tmp_path, monkeypatch):
    """Ctrl-C after a trial's first epoch (its progress checkpoint written): the retry takes the
    cut trial's checkpoint folder and trains the second epoch only."""
    from autorec.train import trainer as trainer_module

    real_fit, calls = trainer_module.Trainer.fit, []

    def cut_after_the_first_epoch(self):
        calls.append(1)
        if len(calls) == 2:
            def interrupt(record):
                raise KeyboardInterrupt

            self.on_epoch = interrupt
        return real_fit(self)

    monkeypatch.setattr(trainer_module.Trainer, "fit", cut_after_the_first_epoch)
    config = StudyConfig.load(write_study(tmp_path, budget={"trials": 2, "epochs": 2, "batch_size": 256,
                                                            "max_steps_per_epoch": 3, "patience": 2}))
    with pytest.raises(KeyboardInterrupt):
        run_study(config, log=quiet)
    assert (config.directory / "trials" / "1" / "LATEST").exists()
    run_study(config, log=quiet)
    trials = optuna.load_study(study_name="t", storage=open_storage(config.storage_url)).get_trials()
    (retry,) = [t for t in trials if t.user_attrs.get("retry_of") == 1]
    assert retry.state == TrialState.COMPLETE and retry.params == trials[1].params
    assert retry.user_attrs["metrics"]["resumed_from"] == {"epoch": 1, "step": 0, "world_size": 1}
    assert trials[0].user_attrs["metrics"]["resumed_from"] is None
    assert not (config.directory / "trials" / "1").exists()  # adopted by the retry
    assert sorted(p.name for p in (config.directory / "trials" / str(retry.number)).iterdir()) == ["best"]


@pytest.mark.parametrize(("url", "message"), [
    ("mysql://u@localhost/db", r"the database driver is not installed \(No module named 'MySQLdb'\); "
                               r"pip install mysqlclient .*autorec-nas\[mysql\]"),
    ("postgresql+psycopg://u:secret@127.0.0.1:1/x",
     r"postgresql\+psycopg://u:\*\*\*@127.0.0.1:1/x: the database driver is not installed "
     r".*psycopg\[binary\]"),
    ("oracle2://x", "unknown database 'oracle2'; expected sqlite, postgresql or mysql"),
    ("nonsense", "'nonsense' is not a storage URL; expected sqlite:///PATH, journal:PATH"),
])
def test_a_storage_url_without_its_driver_says_what_to_install(url, message):
    import importlib.util

    if importlib.util.find_spec("MySQLdb") or importlib.util.find_spec("psycopg"):
        pytest.skip("a driver these URLs rely on being absent is installed here")
    with pytest.raises(StudyConfigError, match=message) as caught:
        open_storage(url)
    assert "secret" not in str(caught.value)  # the password is not echoed
