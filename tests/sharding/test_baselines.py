"""The baselines do what their names say."""

from __future__ import annotations

import pytest

from autorec.sharding.baselines import BASELINES, LookupGreedy, RandomPlanner, SizeGreedy, TorchrecPlanner
from autorec.sharding.tables import TableSet
from autorec.sharding.training import memory_for

TABLES = TableSet.generate(60, seed=21, rows_range=(1e3, 1e6))


def _loads(tables, a, score):
    load = [0.0] * a.num_devices
    for t, p in zip(tables.tables, a.placements, strict=True):
        for r, cols in zip(p.ranks, p.columns, strict=True):
            load[r] += score(t) * cols / t.dim
    return load


@pytest.mark.parametrize("planner, score", [
    (SizeGreedy(), lambda t: float(t.bytes)),
    (LookupGreedy(), lambda t: t.dim * t.pooling),
])
def test_greedy_balances_its_score(planner, score):
    """Largest-first onto the least loaded device: the loads differ by at most the largest item
    (memory is ample here, so no table is split)."""
    a = planner.plan(TABLES, 5, TABLES.total_bytes)
    assert all(len(p.ranks) == 1 for p in a.placements)
    load = _loads(TABLES, a, score)
    assert max(load) - min(load) <= max(score(t) for t in TABLES.tables) + 1e-6


def test_lookup_greedy_balances_lookups_better_than_size_greedy():
    score = lambda t: t.dim * t.pooling  # noqa: E731
    lookups = _loads(TABLES, LookupGreedy().plan(TABLES, 5, TABLES.total_bytes), score)
    sizes = _loads(TABLES, SizeGreedy().plan(TABLES, 5, TABLES.total_bytes), score)
    assert max(lookups) < max(sizes)


def test_random_depends_on_the_seed():
    memory = memory_for(TABLES, 4, 1.5)
    plans = {RandomPlanner().plan(TABLES, 4, memory, seed=s) for s in range(3)}
    assert len(plans) == 3


def test_torchrec_splits_a_table_that_fits_no_device_whole():
    tables = TableSet.generate(8, seed=2, rows_range=(1e4, 1e5), dim_range=(256, 256))
    big = max(tables.tables, key=lambda t: t.bytes)
    memory = max(0.7 * big.bytes, tables.total_bytes / 4 * 1.5)
    planner = TorchrecPlanner()
    a = planner.plan(tables, 4, memory)
    a.check(tables, memory)
    i = tables.tables.index(big)
    assert len(a.placements[i].ranks) > 1
    assert planner.last_plan.plan[""][big.name].sharding_type == "column_wise"


def test_registry_and_bad_device_type():
    assert sorted(BASELINES) == ["lookup-greedy", "random", "size-greedy", "torchrec"]
    with pytest.raises(ValueError, match="device_type: expected 'cpu' or 'cuda', got 'tpu'"):
        TorchrecPlanner("tpu")
