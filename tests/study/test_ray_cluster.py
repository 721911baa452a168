"""A two-node Ray cluster for real, emulated on this machine: ``ray start --head`` and a second
``ray start --address`` (each node one CPU of its own), as a user starts them on two machines.
``autorec search --backend ray --ray-address`` spreads the trials over both nodes (each trial
records its node; the report counts them), and when the second node is lost mid-study (its raylet
and workers killed with -9) the trials it ran are retried on the other: none lost, none repeated.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from autorec.study import StudyConfig, open_storage
from tests.scaling.test_run import completed_trials
from tests.studyfiles import ROOT, write_study

pytest.importorskip("ray")
RAY = Path(sys.executable).parent / "ray"
TIMEOUT_S = 600


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    """Two Ray nodes on localhost: the head (a daemon) and a second node held in the foreground
    (``--block``), so that it can be killed whole."""

    def __init__(self, tmp: Path) -> None:
        self.port, self.tmp = free_port(), tmp
        # Ray's token authentication: every process of the cluster and its clients share the token.
        self.env = {**os.environ, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(16),
                    "RAY_USAGE_STATS_ENABLED": "0", "OMP_NUM_THREADS": "1"}
        self.address = f"127.0.0.1:{self.port}"
        subprocess.run([str(RAY), "start", "--head", "--port", str(self.port), "--num-cpus", "1",
                        "--include-dashboard", "false", "--temp-dir", str(tmp / "ray")],
                       env=self.env, check=True, capture_output=True, timeout=120)
        self.second = subprocess.Popen([str(RAY), "start", "--address", self.address, "--num-cpus", "1",
                                        "--block"], env=self.env, start_new_session=True,
                                       stdout=(tmp / "node1.log").open("w"), stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 120
        while self.nodes() < 2:
            assert self.second.poll() is None, (tmp / "node1.log").read_text()[-2000:]
            assert time.monotonic() < deadline, "the second node never joined"
            time.sleep(1)

    def nodes(self) -> int:
        """Alive nodes, as ``ray status`` lists them."""
        out = subprocess.run([str(RAY), "status", "--address", self.address], env=self.env,
                             capture_output=True, text=True, timeout=60).stdout
        active = out.split("Active:")[-1].split("Pending:")[0]
        return sum(1 for line in active.splitlines() if "node_" in line)

    def lose_second_node(self) -> None:
        """kill -9 the second node's raylet and every worker process it started."""
        os.killpg(self.second.pid, signal.SIGKILL)
        self.second.wait()

    def stop(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.second.pid, signal.SIGKILL)
        subprocess.run([str(RAY), "stop", "--force"], env=self.env, capture_output=True, timeout=120)
        shutil.rmtree(self.tmp / "ray", ignore_errors=True)


@pytest.fixture
def cluster(tmp_path_factory) -> Iterator[Cluster]:
    made = Cluster(tmp_path_factory.mktemp("cluster"))
    try:
        yield made
    finally:
        made.stop()


def search(cluster: Cluster, study: Path, log: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "autorec.cli", "search", str(study), "--backend", "ray",
                             "--ray-address", cluster.address, "--workers", "2", "--json"],
                            cwd=ROOT, env=cluster.env, stdout=log.open("w"), stderr=subprocess.STDOUT)


def trials_of(study: Path) -> list[optuna.trial.FrozenTrial]:
    config = StudyConfig.load(study)
    return optuna.load_study(study_name=config.name, storage=open_storage(config.storage_url)).get_trials()


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
    deadline = time.monotonic() + TIMEOUT_S
    while completed_trials(tmp_path / "t" / "study.db") < 1:
        assert proc.poll() is None, (tmp_path / "search.log").read_text()[-3000:]
        assert time.monotonic() < deadline
        time.sleep(0.5)
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
