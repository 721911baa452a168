"""trainers/: the launch recipes work as written (what can run on one CPU machine runs)."""

import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from autorec.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
TRAINERS = ROOT / "trainers"
SCRIPTS = ["torchrun_single_node.sh", "torchrun_multi_node.sh", "slurm.sbatch", "ray_job.sh"]


@pytest.mark.parametrize("name", SCRIPTS)
def test_scripts_are_valid_bash(name):
    proc = subprocess.run(["bash", "-n", str(TRAINERS / name)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    text = (TRAINERS / name).read_text()
    runs = "trainers/torchrun_multi_node.sh" if name == "slurm.sbatch" else "autorec.cli train"
    assert runs in text and f"trainers/{name}" in text  # says how it is run


def test_slurm_runs_the_multi_node_recipe_on_every_node_with_what_it_requires():
    """Slurm's srun starts trainers/torchrun_multi_node.sh (run as two agents below) on each
    node, with every variable that recipe requires set from the allocation."""
    text = (TRAINERS / "slurm.sbatch").read_text()
    srun = text[text.index("\nsrun "):]
    assert "bash trainers/torchrun_multi_node.sh" in srun
    required = re.findall(r'\$\{(\w+):\?', (TRAINERS / "torchrun_multi_node.sh").read_text())
    assert set(required) >= {"NNODES", "RDZV_ENDPOINT", "RUN_ID", "CKPT"}
    exported = set(re.findall(r"\b(\w+)=", "".join(line for line in text.splitlines(keepends=True)
                                                   if line.startswith("export "))))
    assert set(required) <= exported, set(required) - exported


def test_readme_names_every_recipe():
    readme = (TRAINERS / "README.md").read_text()
    for name in [*SCRIPTS, "k8s/pytorchjob.yaml"]:
        assert name in readme


def test_pytorchjob_manifest_parses_and_its_arguments_are_autorecs():
    job = yaml.safe_load((TRAINERS / "k8s" / "pytorchjob.yaml").read_text())
    assert job["apiVersion"] == "kubeflow.org/v1" and job["kind"] == "PyTorchJob"
    replicas = job["spec"]["pytorchReplicaSpecs"]
    assert set(replicas) == {"Master", "Worker"}
    for spec in replicas.values():
        container = spec["template"]["spec"]["containers"][0]
        assert container["command"][-2:] == ["-m", "autorec.cli"]
        args = build_parser().parse_args(container["args"])
        assert args.command == "train" and args.checkpoint_dir.startswith("/checkpoints/")
        mounts = {m["mountPath"] for m in container["volumeMounts"]}
        assert "/checkpoints" in mounts


def _run_recipe(name: str, tmp_path: Path, **env: str) -> dict:
    out = tmp_path / "out.json"
    full_env = {**os.environ, "PYTHON": sys.executable, "NPROC": "2", "CKPT": str(tmp_path / "ck"),
                "DATA_OPTS": "preset=tiny num_samples=2000", **env}
    proc = subprocess.run(["bash", str(TRAINERS / name), "--epochs", "1", "--batch-size", "200", "--json",
                           "--output", str(out)], cwd=ROOT, env=full_env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (tmp_path / "ck" / "LATEST").exists()
    return json.loads(out.read_text())


@pytest.mark.slow
def test_single_node_recipe_runs(tmp_path):
    out = _run_recipe("torchrun_single_node.sh", tmp_path)
    assert out["world_size"] == 2 and out["test"]["n"] == 200


@pytest.mark.slow
def test_multi_node_recipe_runs_as_one_node(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = _run_recipe("torchrun_multi_node.sh", tmp_path, NNODES="1", RDZV_ENDPOINT=f"127.0.0.1:{port}",
                      RUN_ID="test")
    assert out["world_size"] == 2


@pytest.mark.slow
def test_multi_node_recipe_with_two_agents(tmp_path):
    """Two torchrun agents ("nodes") of one process each meet at a c10d rendezvous on this machine."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "PYTHON": sys.executable, "NPROC": "1", "NNODES": "2", "RUN_ID": "two-agents",
           "RDZV_ENDPOINT": f"127.0.0.1:{port}", "CKPT": str(tmp_path / "ck"),
           "DATA_OPTS": "preset=tiny num_samples=2000"}
    cmd = ["bash", str(TRAINERS / "torchrun_multi_node.sh"), "--epochs", "1", "--batch-size", "200", "--json"]
    logs = [open(tmp_path / f"node{i}.log", "w") for i in range(2)]  # files: pipes could fill up
    nodes = [subprocess.Popen([*cmd, "--output", str(tmp_path / f"out{i}.json")], cwd=ROOT, env=env,
                              stdout=log, stderr=subprocess.STDOUT) for i, log in enumerate(logs)]
    for i, node in enumerate(nodes):
        code = node.wait(timeout=600)
        logs[i].close()
        assert code == 0, (tmp_path / f"node{i}.log").read_text()[-3000:]
    outs = [json.loads(p.read_text()) for p in tmp_path.glob("out*.json")]
    assert len(outs) == 1 and outs[0]["world_size"] == 2  # rank 0 (on one of the nodes) reports


@pytest.mark.slow
def test_pytorchjob_pods_run_their_command_as_two_nodes(tmp_path):
    """The manifest's container command, run twice on this machine as the training operator
    runs it in the master and the worker pod: with the PET_* environment it sets (torchrun reads
    it as its defaults), 2 processes per pod here instead of 8 GPUs; a test's data and batch
    are appended (later flags win)."""
    job = yaml.safe_load((TRAINERS / "k8s" / "pytorchjob.yaml").read_text())
    container = job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]
    command = [sys.executable if container["command"][0] == "python" else container["command"][0],
               *container["command"][1:], *container["args"],
               "--data-opt", "preset=tiny", "--data-opt", "num_samples=2000", "--epochs", "1",
               "--batch-size", "200", "--checkpoint-dir", str(tmp_path / "ck")]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    pods = []
    for rank in range(2):
        env = {**os.environ, "PET_NNODES": "2", "PET_NPROC_PER_NODE": "2", "PET_NODE_RANK": str(rank),
               "PET_MASTER_ADDR": "127.0.0.1", "PET_MASTER_PORT": str(port), "OMP_NUM_THREADS": "1"}
        log = open(tmp_path / f"pod{rank}.log", "w")
        pods.append((subprocess.Popen([*command, "--output", str(tmp_path / f"out{rank}.json")], cwd=ROOT,
                                      env=env, stdout=log, stderr=subprocess.STDOUT), log))
    for rank, (pod, log) in enumerate(pods):
        code = pod.wait(timeout=600)
        log.close()
        assert code == 0, (tmp_path / f"pod{rank}.log").read_text()[-3000:]
    (out,) = [json.loads(p.read_text()) for p in tmp_path.glob("out*.json")]
    assert out["world_size"] == 4 and out["test"]["n"] == 200
    assert (tmp_path / "ck" / "LATEST").exists()
