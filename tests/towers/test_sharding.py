"""Tower-wise sharding in real gloo processes (torchrun): the sharded model computes the
single-process model's logits and gradients, trains along the same path over several optimizer
steps, and the float bytes crossing ranks are exactly the predicted ones, F / (K * n_out) times
fewer with towers than flat."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torchrec.sparse.jagged_tensor import KeyedJaggedTensor

from autorec.arch import ArchSpec, MLPConfig, TableSpec, TowerSpec
from autorec.models import RecModel
from autorec.towers.sharding import (
    CommMeter,
    TowerParallel,
    predicted_bytes_per_sample,
    tower_owners,
    tower_plan,
)
from autorec.train.distributed import ensure_process_group
from tests.doctests import assert_examples_run

WORKER = Path(__file__).with_name("sharding_worker.py")
ROOT = Path(__file__).resolve().parents[2]


def _torchrun(nproc: int, out: Path) -> dict:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node",
                           str(nproc), str(WORKER), str(out)], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(out.read_text())


def _assert_report(report: dict, world: int) -> None:
    assert report["world_size"] == world
    for mode in ("towers", "flat"):
        got = report[mode]
        assert got["checked_parameters"] > 0
        assert got["float_all_to_all"] == got["predicted_float_all_to_all"] > 0
        # After 4 Adam/Adagrad steps the sharded model still computes the single-process one's logits.
        assert got["max_logit_diff_after_steps"] < 1e-4
    # Same ids travel either way; the pooled side shrinks by F / (K * n_out) = 16 / (4 * 2).
    assert report["towers"]["int_all_to_all"] == report["flat"]["int_all_to_all"] > 0
    assert report["flat"]["float_all_to_all"] == 2 * report["towers"]["float_all_to_all"]
    # The throttled link waited exactly its bytes over 0.01 GB/s, inside the step's wall time.
    throttled = report["throttled"]
    assert throttled["bytes"] > 0
    assert throttled["waited"] == pytest.approx(throttled["bytes"] / 1e7, rel=1e-9)
    assert throttled["wall"] >= throttled["waited"]


def test_two_processes_match_one_and_send_what_is_predicted(tmp_path: Path) -> None:
    _assert_report(_torchrun(2, tmp_path / "report.json"), 2)


@pytest.mark.slow
def test_four_processes_match_one_and_send_what_is_predicted(tmp_path: Path) -> None:
    _assert_report(_torchrun(4, tmp_path / "report.json"), 4)


def _spec() -> ArchSpec:
    tables = tuple(TableSpec(name=f"t{i}", features=(f"f{i}",), num_embeddings=10, dim=4) for i in range(6))
    return ArchSpec(dim=4, n_dense=2, dense_arch=(4,), tables=tables, over_arch=(8,),
                    towers=TowerSpec(groups=(("f0", "f3"), ("f1", "f4", "f5"), ("f2",)),
                                     module=MLPConfig(hidden=(), n_out=1), n_out=2))


def test_one_process_is_the_model_itself_in_both_modes() -> None:
    ensure_process_group()
    spec = _spec()
    kjt = KeyedJaggedTensor.from_lengths_sync([f"f{i}" for i in range(6)], torch.arange(30) % 10,
                                              torch.ones(30, dtype=torch.long))
    dense = torch.randn(5, 2)
    torch.manual_seed(0)
    model = RecModel(spec)
    meter = CommMeter()
    with meter.active():
        torch.testing.assert_close(TowerParallel(model)(dense, kjt), model(dense, kjt))
    assert meter.total("all_to_all.float") == 0  # one rank: nothing crosses
    flat = RecModel(spec.replace(towers=None))
    torch.testing.assert_close(TowerParallel(flat, spec.towers)(dense, kjt), flat(dense, kjt))


def test_bad_use_is_refused() -> None:
    ensure_process_group()
    spec = _spec()
    with pytest.raises(ValueError, match="give a model with towers"):
        TowerParallel(RecModel(spec.replace(towers=None)))
    with pytest.raises(ValueError, match="give a model with towers"):
        TowerParallel(RecModel(spec), spec.towers)


def test_predicted_bytes_and_owners() -> None:
    spec = _spec()
    assert predicted_bytes_per_sample(spec, 4, "flat") == 3 / 4 * 6 * 4 * 4
    assert predicted_bytes_per_sample(spec, 4, "towers") == 3 / 4 * 3 * 2 * 4 * 4
    assert tower_owners(5, 2) == [0, 1, 0, 1, 0]


def test_doctests() -> None:
    assert_examples_run("autorec.towers.sharding")


def test_tower_plan_keeps_each_tower_in_one_host_and_loads_as_a_torchrec_plan() -> None:
    from autorec.train.plan import plan_from_json

    spec = _spec()
    doc = tower_plan(spec, world_size=4, local_world_size=2)
    host_of = {t: e["ranks"][0] // 2 for t, e in doc["tables"].items()}
    for k, group in enumerate(spec.towers.groups):
        assert {host_of[f"t{f[1:]}"] for f in group} == {k % 2}
    # Tower 1 has 3 tables on a 2-rank host: round robin over the host's ranks.
    assert [doc["tables"][t]["ranks"][0] for t in ("t1", "t4", "t5")] == [2, 3, 2]
    plan = plan_from_json(doc, spec, world_size=4, device_type="cpu")
    assert plan.plan["sparse_arch"]["t1"].sharding_type == "table_wise"
    assert {t: e["ranks"] for t, e in tower_plan(spec, 3)["tables"].items()} == {
        "t0": [0], "t3": [0], "t1": [1], "t4": [1], "t5": [1], "t2": [2]}
    with pytest.raises(ValueError, match="must be a positive multiple"):
        tower_plan(spec, 4, local_world_size=3)
    with pytest.raises(ValueError, match="has no towers"):
        tower_plan(spec.replace(towers=None), 2)
