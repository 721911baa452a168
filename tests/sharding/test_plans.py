"""Assignments to plan JSON and torchrec ShardingPlans, and back."""

from __future__ import annotations

import json

import pytest

from autorec.data import Schema, SparseFeature
from autorec.presets import preset
from autorec.sharding.baselines import TorchrecPlanner
from autorec.sharding.plans import (
    Assignment,
    Placement,
    PlanningError,
    assignment_from_plan,
    load_assignment,
    plan_json,
    save_plan_json,
    sharding_plan,
)
from autorec.sharding.tables import TableSet
from autorec.train.plan import PlanError, load_plan

SCHEMA = Schema(dense=("x",), sparse=(SparseFeature("user", 500), SparseFeature("item", 300),
                                      SparseFeature("tag", 40)))
SPEC = preset("dlrm", SCHEMA, dim=16)
TABLES = TableSet.from_arch(SPEC)


def test_plan_json_becomes_a_torchrec_plan_with_those_shardings():
    a = Assignment.of([(1,), (0, 1), (2,)], TABLES, num_devices=3)
    doc = plan_json(a, TABLES)
    assert doc["world_size"] == 3
    assert doc["tables"]["t_item"] == {"sharding_type": "column_wise", "ranks": [0, 1],
                                       "compute_kernel": "fused"}
    plan = sharding_plan(a, TABLES, SPEC).plan["sparse_arch"]
    assert plan["t_user"].sharding_type == "table_wise" and plan["t_user"].ranks == [1]
    assert plan["t_item"].sharding_type == "column_wise" and plan["t_item"].ranks == [0, 1]
    shards = plan["t_item"].sharding_spec.shards
    assert [s.shard_sizes for s in shards] == [[300, 8], [300, 8]]


def test_saved_plan_is_what_autorec_train_loads(tmp_path):
    a = Assignment.of([(0,), (1, 0), (1,)], TABLES, num_devices=2)
    save_plan_json(a, TABLES, tmp_path / "plan.json")
    plan = load_plan(tmp_path / "plan.json", SPEC, world_size=2, device_type="cpu")
    assert plan.plan["sparse_arch"]["t_item"].ranks == [1, 0]
    assert load_assignment(json.loads((tmp_path / "plan.json").read_text()), TABLES) == a


def test_row_wise_only_for_cuda():
    a = Assignment.of([(0,), (1,), (0,)], TABLES, num_devices=2)
    with pytest.raises(PlanningError, match="row-wise only with CUDA"):
        plan_json(a, TABLES, row_wise=["t_user"])
    doc = plan_json(a, TABLES, device_type="cuda", row_wise=["t_user"])
    assert doc["tables"]["t_user"] == {"sharding_type": "row_wise", "compute_kernel": "fused"}
    with pytest.raises(PlanningError, match=r"\['t_nope'\] are not tables"):
        plan_json(a, TABLES, device_type="cuda", row_wise=["t_nope"])


def test_uneven_blocks_have_no_plan_file_form():
    a = Assignment((Placement((0,), (16,)), Placement((0, 1), (12, 4)), Placement((1,), (16,))), 2)
    a.check(TABLES)
    with pytest.raises(PlanningError, match=r"t_item: uneven column blocks \(12, 4\)"):
        plan_json(a, TABLES)


@pytest.mark.parametrize("placements, message", [
    ([(0,), (1,)], "places 2 tables; the table set has 3"),
    ([(0,), (1,), (5,)], r"t_tag: ranks \[5\] do not exist on 2 devices"),
])
def test_bad_assignments(placements, message):
    a = Assignment(tuple(Placement(r, (16,)) for r in placements), 2)
    with pytest.raises(PlanningError, match=message):
        a.check(TABLES)


def test_memory_limit_checked():
    a = Assignment.of([(0,), (0,), (1,)], TABLES, num_devices=2)
    used = a.memory(TABLES)
    assert used == [TABLES.tables[0].bytes + TABLES.tables[1].bytes, TABLES.tables[2].bytes]
    with pytest.raises(PlanningError, match="device 0 holds"):
        a.check(TABLES, memory_per_device=used[0] - 1)


def test_torchrec_plan_read_back_with_its_column_blocks():
    tables = TableSet.generate(6, seed=0, rows_range=(1e4, 1e5), dim_range=(256, 256))
    planner = TorchrecPlanner()
    a = planner.plan(tables, 4, tables.total_bytes)
    assert a == assignment_from_plan(planner.last_plan, tables, 4, module="")
    for table, p in zip(tables.tables, a.placements, strict=True):
        assert sum(p.columns) == table.dim


@pytest.mark.parametrize("doc, message", [
    ({"world_size": 2}, "tables: expected an object"),
    ({"world_size": 0, "tables": {}}, "world_size: expected a positive integer, got 0"),
    ({"world_size": 2, "tables": {"t_user": {"sharding_type": "data_parallel"}}},
     "tables.t_user: expected a table_wise or column_wise entry"),
])
def test_load_assignment_bad_documents(doc, message):
    with pytest.raises(PlanError, match=message):
        load_assignment(doc, TABLES, source="p.json")
