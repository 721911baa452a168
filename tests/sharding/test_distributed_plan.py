"""The plan `autorec shard` writes for an ArchSpec trains under DistributedModelParallel:
real torchrun processes over gloo, `autorec train --plan`, 2 and 4 ranks.

Memory is set so the largest table must be split into column blocks: the plan runs table_wise
and column_wise shards."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from autorec.data import load_dataset
from autorec.presets import preset

ROOT = Path(__file__).resolve().parents[2]
DATA = ["--data", "synthetic", "--data-opt", "preset=tiny", "--data-opt", "num_samples=2000"]


def _run(*args: str) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "autorec.cli", *args], capture_output=True,
                          text=True, timeout=900, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def _shard_and_train(tmp_path: Path, world: int, memory: str) -> tuple[dict, dict]:
    spec = preset("dlrm", load_dataset("synthetic", seed=0, preset="tiny", num_samples=2000).schema)
    arch = tmp_path / "arch.json"
    spec.save(arch)
    plan = tmp_path / f"plan{world}.json"
    _run("shard", "--arch", str(arch), "--world-size", str(world), "--memory-per-device", memory,
         "--no-baselines", "--json", "--out", str(plan))
    doc = json.loads(plan.read_text())
    proc = _run("train", *DATA, "--arch", str(arch), "--plan", str(plan), "--epochs", "1",
                "--batch-size", "200", "--nproc-per-node", str(world), "--json",
                "--output", str(tmp_path / "out.json"))
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    return doc, {**summary, **json.loads((tmp_path / "out.json").read_text())}


def _check(doc: dict, out: dict, world: int) -> None:
    kinds = {e["sharding_type"] for e in doc["tables"].values()}
    assert kinds == {"table_wise", "column_wise"}, doc
    assert doc["tables"]["t_cat_3"]["sharding_type"] == "column_wise"
    assert out["world_size"] == world
    assert out["step_losses"] and all(math.isfinite(x) for x in out["step_losses"])
    assert 0.0 < out["val"]["auc"] < 1.0


def test_two_processes(tmp_path):
    # tiny's tables hold 50, 100, 200 and 1000 rows of dim 16 (68 bytes a row with the
    # optimizer state): t_cat_3 (68,000 bytes) fits no 50 kB device whole.
    doc, out = _shard_and_train(tmp_path, 2, "50kB")
    _check(doc, out, 2)


@pytest.mark.slow
def test_four_processes(tmp_path):
    doc, out = _shard_and_train(tmp_path, 4, "30kB")
    _check(doc, out, 4)
