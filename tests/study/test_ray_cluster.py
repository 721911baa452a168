"""A two-node Ray cluster for real, emulated on this machine: ``ray start --head`` and a second
``ray start --address`` (each node one CPU of its own), as a user starts them on two machines.
``autorec search --backend ray --ray-address`` spreads the trials over both nodes (each trial
records its node; the report counts them), and when the second node is lost mid-study (its raylet
and workers killed with -9) the trials it ran are retried on the other: none lost, none repeated.
Ray Train runs one training with a worker on each node (``trainers/ray_job.sh``, as a user runs
it on a cluster), and it trains as one process does.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from autorec.study import StudyConfig, open_storage
from benchmarks.localhost_nodes import TIMEOUT_S, RayCluster, wait_for_both_nodes_training
from tests.studyfiles import ROOT, write_study
from tests.train.test_multiprocess import assert_same_run, plan, single_process

pytest.importorskip("ray")


@pytest.fixture
def cluster(tmp_path_factory) -> Iterator[RayCluster]:
    made = RayCluster(tmp_path_factory.mktemp("cluster"))
    try:
        yield made
    finally:
        made.stop()


def search(cluster: RayCluster, study: Path, log: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "autorec.cli", "search", str(study), "--backend", "ray",
                             "--ray-address", cluster.address, "--workers", "2", "--json"],
                            cwd=ROOT, env=cluster.env, stdout=log.open("w"), stderr=subprocess.STDOUT)


def trials_of(study: Path) -> list[optuna.trial.FrozenTrial]:
    config = StudyConfig.load(study)
    return optuna.load_study(study_name=config.name, storage=open_storage(config.storage_url)).get_trials()


@pytest.mark.slow  # 55 s of a two-node cluster; tests/study/test_ray_runner.py runs Ray in the default suite
def test_a_search_spreads_its_trials_over_two_ray_nodes(cluster, tmp_path):
    budget = {"trials": 4, "epochs": 1, "batch_size": 256, "max_steps_per_epoch": 8}
    study = write_study(tmp_path, budget=budget)
    proc = search(cluster, study, tmp_path / "search.log")
    assert proc.wait(timeout=TIMEOUT_S) == 0, (tmp_path / "search.log").read_text()[-3000:]
    trials = trials_of(study)
    assert [t.state for t in trials] == [TrialState.COMPLETE] * 4
    assert len({t.user_attrs["node"] for t in trials}) == 2  # one CPU per node, two at a time
    assert subprocess.run([sys.executable, "-m", "autorec.cli", "report", str(study), "-o",
                           str(tmp_path / "report.html")], cwd=ROOT, capture_output=True).returncode == 0
    page = (tmp_path / "report.html").read_text()
    assert "Where the trials ran" in page and all(t.user_attrs["node"][:12] in page for t in trials)


@pytest.mark.slow
def test_a_lost_node_loses_no_trial_and_repeats_none(cluster, tmp_path):
    # trials of some seconds each (6000 samples, 3 epochs), so the loss lands while some run
    data = {"name": "synthetic", "options": {"preset": "tiny", "num_samples": 6000}, "seed": 0}
    budget = {"trials": 6, "epochs": 3, "batch_size": 128, "patience": 3}
    study = write_study(tmp_path, data=data, budget=budget)
    proc = search(cluster, study, tmp_path / "search.log")
    wait_for_both_nodes_training(tmp_path / "t" / "study.db", proc, tmp_path / "search.log")
    cluster.lose_second_node()
    assert proc.wait(timeout=TIMEOUT_S) == 0, (tmp_path / "search.log").read_text()[-3000:]
    trials = trials_of(study)
    complete = [t for t in trials if t.state == TrialState.COMPLETE]
    cut = [t for t in trials if t.state == TrialState.FAIL]
    assert len(complete) == 6  # none lost: the budget was met
    assert cut and all(t.user_attrs.get("interrupted") for t in cut), [t.user_attrs for t in cut]
    for t in cut:  # each cut trial retried once, with its parameters, and not counted twice
        (retry,) = [r for r in trials if r.user_attrs.get("retry_of") == t.number]
        assert retry.params == t.params and retry.state == TrialState.COMPLETE
    assert len({t.number for t in complete}) == 6


@pytest.mark.slow
def test_ray_train_runs_one_training_with_a_worker_on_each_node(cluster, tmp_path):
    pytest.importorskip("ray.train")
    env = {**cluster.env, "RAY_ADDRESS": cluster.address, "PYTHON": sys.executable, "WORKERS": "2",
           "PLACEMENT": "STRICT_SPREAD", "DATA_OPTS": "preset=tiny num_samples=3001",
           "STORAGE": str(tmp_path / "ray_results")}
    proc = subprocess.run(["bash", "trainers/ray_job.sh", "--batch-size", "200", "--lr", "3e-3",
                           "--embedding-lr", "0.1", "--epochs", "1",
                           "--plan", plan(tmp_path / "p2.json", [1, 0, 1]),
                           "--output", str(tmp_path / "out.json")],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads((tmp_path / "out.json").read_text())
    assert out["world_size"] == 2 and len(set(out["ray_nodes"])) == 2  # one worker per node
    _, reference = single_process(plan(tmp_path / "p1.json", [0, 0, 0]), epochs=1)
    assert_same_run(out, reference)
