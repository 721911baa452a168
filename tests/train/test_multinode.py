"""Two nodes for real, emulated on this machine: two ``autorec train --nnodes 2`` launchers (each
a torchrun elastic agent with 2 processes over gloo) meeting at a c10d rendezvous on 127.0.0.1,
exactly as ``trainers/torchrun_multi_node.sh`` runs on a cluster (one launcher per node).

The tables are placed by the project's planner (``autorec shard``: table-wise over the 4 ranks,
so two tables live on the second node) or column-wise across the two nodes; the 2 x 2 run must
train as one process does (table-wise) or as one node of 4 processes does (column-wise; and a
Wukong preset with the planner's plan). A node
lost mid-training (its launcher and workers killed with -9) re-forms the elastic job
(``--nnodes 1:2``) on the other node, which resumes from the last checkpoint. The launchers are
:mod:`benchmarks.localhost_nodes`' (``benchmarks/multinode.py`` measures the same runs).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from autorec.cli import main as autorec
from autorec.data import load_dataset
from autorec.presets import preset
from autorec.train.trainer import TrainConfig, Trainer
from benchmarks.localhost_nodes import TIMEOUT_S, finish, free_port, lose_node
from benchmarks.localhost_nodes import start_nodes as nodes_at
from tests.train.test_multiprocess import DATA, ROOT, TABLES, TRAIN, assert_same_run

SAMPLES = 30001  # the node-loss run's data


def start_nodes(tmp_path: Path, port: int, run_id: str, *args: str) -> list[subprocess.Popen]:
    """The two launchers of the tiny data and DLRM options, then ``args`` (a repeated
    ``--data-opt`` key replaces theirs)."""
    return nodes_at(tmp_path, port, run_id, [*DATA, *TRAIN, *args])


def planner_plan(tmp_path: Path, world_size: int, arch: str = "dlrm") -> Path:
    """The plan ``autorec shard`` (greedy + polish, the default planner) makes for the preset."""
    data = load_dataset("synthetic", seed=0, preset="tiny", num_samples=3001)
    preset(arch, data.schema).save(tmp_path / "arch.json")
    out = tmp_path / f"plan{world_size}-{arch}.json"
    assert autorec(["shard", "--arch", str(tmp_path / "arch.json"), "--world-size", str(world_size),
                    "--memory-per-device", "1GB", "--out", str(out), "--no-baselines"]) == 0
    return out


def one_process(tmp_path: Path, epochs: int, num_samples: int = 3001) -> object:
    """The same training in this process, every table table-wise on rank 0."""
    path = tmp_path / "plan1.json"
    path.write_text(json.dumps({"version": 1, "tables": {t: {"sharding_type": "table_wise", "ranks": [0]}
                                                         for t in TABLES}}))
    data = load_dataset("synthetic", seed=0, preset="tiny", num_samples=num_samples)
    config = TrainConfig(epochs=epochs, batch_size=200, dense_lr=3e-3, embedding_lr=0.1, progress=False,
                         plan=str(path), patience=epochs)
    return Trainer(preset("dlrm", data.schema), data, config).fit()


def test_two_nodes_train_as_one_process_with_the_planners_plan(tmp_path, capsys):
    plan = planner_plan(tmp_path, 4)
    ranks = {t["ranks"][0] for t in json.loads(plan.read_text())["tables"].values()}
    assert ranks & {2, 3}, "the planner left the second node without a table"
    capsys.readouterr()
    port = free_port()
    args = ["--epochs", "1", "--plan", str(plan), "--checkpoint-dir", str(tmp_path / "ck"),
            "--output", str(tmp_path / "out.json")]
    finish(start_nodes(tmp_path, port, "two-nodes", *args), tmp_path)
    out = json.loads((tmp_path / "out.json").read_text())
    assert out["world_size"] == 4
    assert_same_run(out, one_process(tmp_path, epochs=1))


@pytest.mark.slow
def test_a_column_wise_table_across_two_nodes_trains_as_one_node_of_four(tmp_path):
    plan = tmp_path / "cw.json"
    plan.write_text(json.dumps({"version": 1, "tables": {
        TABLES[0]: {"sharding_type": "data_parallel"},
        TABLES[1]: {"sharding_type": "column_wise", "ranks": [1, 2]},  # one column block per node
        TABLES[2]: {"sharding_type": "table_wise", "ranks": [3]},
        TABLES[3]: {"sharding_type": "table_wise", "ranks": [0]}}}))
    assert_two_nodes_train_as_one_node_of_four(tmp_path, "cw", ["--epochs", "1", "--plan", str(plan)])


def assert_two_nodes_train_as_one_node_of_four(tmp_path: Path, run_id: str, args: list[str]) -> None:
    """2 x 2 (two launchers) and 1 x 4 (one) of the same ``args``: the same curve and metrics."""
    finish(start_nodes(tmp_path, free_port(), run_id, *args, "--checkpoint-dir", str(tmp_path / "ck2"),
                       "--output", str(tmp_path / "two.json")), tmp_path)
    one_node = [sys.executable, "-m", "autorec.cli", "train", *DATA, *TRAIN, "--nproc-per-node", "4", *args,
                "--checkpoint-dir", str(tmp_path / "ck1"), "--output", str(tmp_path / "one.json")]
    one = subprocess.run(one_node, cwd=ROOT, capture_output=True, text=True, timeout=TIMEOUT_S)
    assert one.returncode == 0, one.stderr[-3000:]
    two, four = (json.loads((tmp_path / f"{n}.json").read_text()) for n in ("two", "one"))
    assert two["world_size"] == four["world_size"] == 4
    assert two["step_losses"] == pytest.approx(four["step_losses"], abs=2e-5)
    for split in ("val", "test"):
        assert two[split]["auc"] == pytest.approx(four[split]["auc"], abs=1e-4)


@pytest.mark.slow
def test_a_wukong_on_two_nodes_trains_as_one_node_of_four(tmp_path):
    plan = planner_plan(tmp_path, 4, arch="wukong")
    ranks = {r for t in json.loads(plan.read_text())["tables"].values() for r in t.get("ranks", [])}
    assert ranks & {2, 3}, "the planner left the second node without a table"
    assert_two_nodes_train_as_one_node_of_four(tmp_path, "wukong",
                                               ["--arch", "wukong", "--epochs", "1", "--plan", str(plan)])


@pytest.mark.slow
def test_a_node_lost_mid_training_the_job_reforms_on_the_other_and_resumes(tmp_path):
    """An elastic job (``--nnodes 1:2``) loses node 1 (not the rendezvous host): node 0's agent
    sees its workers fail, re-forms the job on its own node (world size 2) and resumes from the
    last checkpoint the four ranks wrote, resharded (torchrec's plan for the new world size)."""
    port, ck = free_port(), tmp_path / "ck"
    # 24k training rows: 120 steps of 200 in the one epoch, so the loss lands well before the end.
    # One epoch: over two, the best epoch (by validation logloss) was a near tie (0.4823 against
    # 0.4824) that float rounding in the update flipped, in the reference as in the resumed run.
    args = ["--data-opt", f"num_samples={SAMPLES}", "--epochs", "1", "--patience", "1", "--nnodes", "1:2",
            "--checkpoint-dir", str(ck), "--checkpoint-every", "20", "--max-restarts", "3",
            "--output", str(tmp_path / "out.json")]
    nodes = start_nodes(tmp_path, port, "node-loss", *args)
    deadline = time.monotonic() + TIMEOUT_S
    while not (ck / "LATEST").exists():  # the first resumable checkpoint (step 20)
        assert all(p.poll() is None for p in nodes), "the job ended before a node could be lost"
        assert time.monotonic() < deadline
        time.sleep(0.2)
    assert not (tmp_path / "out.json").exists()  # still training
    lose_node(nodes[1])  # its launcher and its workers
    finish(nodes[:1], tmp_path)
    out = json.loads((tmp_path / "out.json").read_text())
    assert out["world_size"] == 2 and out["resumed_from"]["world_size"] == 4
    assert out["resumed_from"]["step"] % 20 == 0
    reference = one_process(tmp_path, epochs=1, num_samples=SAMPLES)
    for split in ("val", "test"):
        assert out[split]["auc"] == pytest.approx(getattr(reference, split)["auc"], abs=2e-3)
    # what happened is in the surviving node's log: its workers were restarted and resumed
    log = (tmp_path / "node0.log").read_text()
    assert f"autorec: restart 1 of the workers: resuming from {ck}/step-" in log, log[-2000:]
    assert "written by 4 ranks) on 2 ranks" in log
