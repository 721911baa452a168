"""`autorec train`'s distributed options: bad values get errors that name the flag."""

import json

import pytest

from autorec.cli import main
from autorec.train.launch import torchrun_args

TINY = ["train", "--data", "synthetic", "--data-opt", "preset=tiny", "--data-opt", "num_samples=500",
        "--epochs", "1", "--json"]


@pytest.mark.parametrize("args, message", [
    (["--nnodes", "2"], "--rdzv-endpoint: --nnodes 2 needs HOST:PORT"),
    (["--nproc-per-node", "2", "--rdzv-endpoint", "node0"],
     "--rdzv-endpoint: expected HOST:PORT, got 'node0'"),
    (["--nproc-per-node", "0", "--max-restarts", "1"],
     "--nproc-per-node: expected a positive integer, got 0"),
    (["--ray-workers", "2", "--nproc-per-node", "2"], "--ray-workers: Ray Train starts the workers"),
    (["--plan", "missing-plan.json"], "missing-plan.json: no such plan file"),
])
def test_bad_distributed_options(args, message, capsys):
    assert main([*TINY, *args]) == 2
    assert message in capsys.readouterr().err


def test_torchrun_arguments_for_several_nodes():
    args = torchrun_args(["train", "--json"], nproc_per_node=8, nnodes="2:4", rdzv_endpoint="node0:29400",
                         rdzv_id="run1", max_restarts=3)
    assert args == ["--nproc-per-node", "8", "--nnodes", "2:4", "--max-restarts", "3",
                    "--rdzv-backend", "c10d", "--rdzv-endpoint", "node0:29400", "--rdzv-id", "run1",
                    "-m", "autorec.cli", "train", "--json"]


def test_save_plan_writes_a_plan_that_loads_back(tmp_path, capsys):
    assert main([*TINY, "--save-plan", str(tmp_path / "plan.json")]) == 0
    doc = json.loads((tmp_path / "plan.json").read_text())
    assert doc["world_size"] == 1 and len(doc["tables"]) == 4
    capsys.readouterr()
    assert main([*TINY, "--plan", str(tmp_path / "plan.json")]) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["world_size"] == 1
