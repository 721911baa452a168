"""Every sharding planner (the RL one and the four baselines) keeps the Planner contract: every
table placed exactly once and in full, every device within its memory, the same plan for the
same seed, and a PlanningError that says why when the tables cannot fit."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from autorec.sharding.base import Planner
from autorec.sharding.baselines import LookupGreedy, RandomPlanner, SizeGreedy, TorchrecPlanner
from autorec.sharding.cost_model import ShardCostModel
from autorec.sharding.planner import RLPlanner
from autorec.sharding.plans import PlanningError
from autorec.sharding.policy import ShardingPolicy
from autorec.sharding.polished import GreedyPolish
from autorec.sharding.tables import TableSet
from autorec.sharding.training import memory_for


def _rl() -> Planner:
    torch.manual_seed(0)
    return RLPlanner(ShardCostModel(hidden=16), ShardingPolicy(hidden=16), samples=3)


def _rl_shard_mlp() -> Planner:
    """The RL planner over a non-additive (shard-mlp) cost model with a non-zero correction."""
    torch.manual_seed(0)
    model = ShardCostModel(hidden=16, kind="shard-mlp")
    with torch.no_grad():
        model.shard_mlp[-1].weight.normal_(0, 1.0)
    return RLPlanner(model, ShardingPolicy(hidden=16), samples=3)


def _greedy_polish() -> GreedyPolish:
    return GreedyPolish(ShardCostModel(hidden=16), polish_steps=10)


PLANNERS = {"greedy-polish": _greedy_polish, "rl": _rl, "rl-shard-mlp": _rl_shard_mlp,
            "torchrec": TorchrecPlanner, "size-greedy": SizeGreedy, "lookup-greedy": LookupGreedy,
            "random": RandomPlanner}


@pytest.fixture(params=sorted(PLANNERS))
def planner(request: pytest.FixtureRequest) -> Planner:
    return PLANNERS[request.param]()


TABLES = TableSet.generate(40, seed=3, rows_range=(1e3, 1e6))


@pytest.mark.parametrize("num_devices, slack", [(2, 1.5), (4, 1.2), (7, 2.0)])
def test_places_every_table_once_within_memory(planner: Planner, num_devices: int, slack: float) -> None:
    memory = memory_for(TABLES, num_devices, slack)
    a = planner.plan(TABLES, num_devices, memory, seed=0)
    a.check(TABLES, memory)  # every table, all its columns, ranks that exist, memory
    assert len(a.placements) == len(TABLES)
    for table, p in zip(TABLES.tables, a.placements, strict=True):
        assert len(set(p.ranks)) == len(p.ranks), table.name   # blocks on distinct devices
        assert (p.even and table.dim % len(p.ranks) == 0) or planner.name == "torchrec"
    assert max(a.memory(TABLES)) <= memory


def test_same_seed_same_plan(planner: Planner) -> None:
    memory = memory_for(TABLES, 4, 1.3)
    assert planner.plan(TABLES, 4, memory, seed=5) == planner.plan(TABLES, 4, memory, seed=5)


def test_more_bytes_than_the_devices_hold(planner: Planner) -> None:
    with pytest.raises(PlanningError, match=r"need .* bytes; 4 devices of"):
        planner.plan(TABLES, 4, TABLES.total_bytes / 4 * 0.9)


def test_a_table_too_large_for_any_device(planner: Planner) -> None:
    big = dataclasses.replace(TABLES.tables[0], rows=10**9, dim=12)  # 3 blocks: not a split we take
    tables = TableSet((big, *TABLES.tables[1:]))
    with pytest.raises(PlanningError, match=f"table {big.name} .* does not fit"):
        planner.plan(tables, 4, 0.4 * big.bytes)


def test_bad_device_count(planner: Planner) -> None:
    with pytest.raises(PlanningError, match="num_devices: expected a positive integer, got 0"):
        planner.plan(TABLES, 0, 2**40)


def test_tables_needing_a_column_split_get_one(planner: Planner) -> None:
    """A table larger than a device is split into column blocks on distinct devices."""
    big = dataclasses.replace(TABLES.tables[0], rows=500_000, dim=256)  # torchrec splits in >= 128 columns
    tables = TableSet((big, *TABLES.tables[1:8]))
    memory = max(big.bytes * 0.6, tables.total_bytes / 4 * 1.5)
    a = planner.plan(tables, 4, memory)
    a.check(tables, memory)
    assert len(a.placements[0].ranks) >= 2
