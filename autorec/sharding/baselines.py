"""Baseline sharding planners: torchrec's EmbeddingShardingPlanner, size-greedy, lookup-greedy
and random, behind the same :class:`~autorec.sharding.base.Planner` interface as the RL one.

The greedy ones follow the heuristics the RL-sharding papers (DreamShard, NeuroShard) compare
against: tables in decreasing order of a score, each onto the device with the least score so
far that still has memory for it (size-greedy: bytes; lookup-greedy: dim x pooling, the
lookup volume). Random puts each table on a uniformly drawn device with room. All three place
tables whole; a table too large for any one device is split into the fewest even column blocks
that fit (:func:`~autorec.sharding.base.split_options`), as torchrec's planner would do.

Example:
    >>> from autorec.sharding.tables import TableSet
    >>> tables = TableSet.generate(12, seed=0, rows_range=(1e3, 1e5))
    >>> a = SizeGreedy().plan(tables, num_devices=3, memory_per_device=2**30)
    >>> sorted({r for p in a.placements for r in p.ranks})
    [0, 1, 2]
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from autorec.sharding.base import Planner, check_fits, split_options
from autorec.sharding.plans import Assignment, Placement, PlanningError, assignment_from_plan
from autorec.sharding.tables import TableInfo, TableSet


def _greedy(tables: TableSet, num_devices: int, memory_per_device: float,
            score: Callable[[TableInfo], float],
            choose: Callable[[list[int], list[float]], int]) -> Assignment:
    """Tables in decreasing ``score``, each on ``choose(devices with room, load)``; load is the
    sum of the placed shards' scores per device. A table that fits no device whole is split
    into the fewest even column blocks that fit, on distinct devices. Where memory is so tight
    that this order strands a large table, the tables are placed largest first instead (with
    the same ``choose``)."""
    check_fits(tables, num_devices, memory_per_device)
    try:
        return _greedy_in_order(tables, num_devices, memory_per_device, score, choose, score)
    except PlanningError:
        return _greedy_in_order(tables, num_devices, memory_per_device, score, choose,
                                lambda t: float(t.bytes))


def _greedy_in_order(tables: TableSet, num_devices: int, memory_per_device: float,
                     score: Callable[[TableInfo], float],
                     choose: Callable[[list[int], list[float]], int],
                     key: Callable[[TableInfo], float]) -> Assignment:
    order = sorted(range(len(tables)), key=lambda i: (-key(tables.tables[i]), i))
    load = [0.0] * num_devices
    used = [0] * num_devices
    placements: list[Placement | None] = [None] * len(tables)
    for i in order:
        table = tables.tables[i]
        for k in split_options(table, num_devices):
            block = table.column_shard(k)[0]
            ranks: list[int] = []
            for _ in range(k):
                room = [d for d in range(num_devices)
                        if d not in ranks and used[d] + block.bytes <= memory_per_device]
                if not room:
                    break
                d = choose(room, load)
                ranks.append(d)
                used[d] += block.bytes
                load[d] += score(block)
            if len(ranks) == k:
                placements[i] = Placement(tuple(ranks), (table.dim // k,) * k)
                break
            for d in ranks:  # undo the partial placement and try more blocks
                used[d] -= block.bytes
                load[d] -= score(block)
        if placements[i] is None:
            raise PlanningError(
                f"table {table.name} ({table.bytes:,} bytes) fits on none of the {num_devices} "
                f"devices, whole or in column blocks; free bytes per device: "
                f"{[int(memory_per_device - u) for u in used]}")
    return Assignment(tuple(p for p in placements if p is not None), num_devices)


def _least_loaded(room: list[int], load: list[float]) -> int:
    return min(room, key=lambda d: (load[d], d))


class SizeGreedy(Planner):
    """Largest tables first, each on the device with the fewest bytes so far."""

    name = "size-greedy"

    def plan(self, tables: TableSet, num_devices: int, memory_per_device: float, *,
             seed: int = 0) -> Assignment:
        return _greedy(tables, num_devices, memory_per_device, lambda t: float(t.bytes),
                       _least_loaded)


class LookupGreedy(Planner):
    """Most lookup work (dim x pooling) first, each on the device with the least so far."""

    name = "lookup-greedy"

    def plan(self, tables: TableSet, num_devices: int, memory_per_device: float, *,
             seed: int = 0) -> Assignment:
        return _greedy(tables, num_devices, memory_per_device, lambda t: t.dim * t.pooling,
                       _least_loaded)


class RandomPlanner(Planner):
    """Each table on a uniformly drawn device with room (deterministic in ``seed``)."""

    name = "random"

    def plan(self, tables: TableSet, num_devices: int, memory_per_device: float, *,
             seed: int = 0) -> Assignment:
        rng = np.random.default_rng(seed)
        return _greedy(tables, num_devices, memory_per_device, lambda t: float(t.bytes),
                       lambda room, _: int(room[rng.integers(len(room))]))


class TorchrecPlanner(Planner):
    """torchrec's own EmbeddingShardingPlanner, on a topology of ``num_devices`` devices with
    ``memory_per_device`` each, choosing between table_wise and column_wise (the shardings that
    run on CPU too) with the tables' pooling factors as its constraints.

    Args:
        device_type: ``"cpu"`` (memory is DDR) or ``"cuda"`` (memory is HBM); torchrec's cost
            estimates differ by device kind.
    """

    name = "torchrec"

    def __init__(self, device_type: str = "cpu") -> None:
        if device_type not in ("cpu", "cuda"):
            raise ValueError(f"device_type: expected 'cpu' or 'cuda', got {device_type!r}")
        self.device_type = device_type
        self.last_plan = None

    def plan(self, tables: TableSet, num_devices: int, memory_per_device: float, *,
             seed: int = 0) -> Assignment:
        check_fits(tables, num_devices, memory_per_device)
        # torchrec counts a table's bytes its own way (no per-row optimizer state here): where its
        # plan overfills a device by our count, plan again with a smaller cap.
        for factor in (1.0, 0.98, 0.95, 0.9, 0.85, 0.8):
            assignment = self._plan(tables, num_devices, int(memory_per_device * factor))
            used = max(assignment.memory(tables))
            if used <= memory_per_device:
                return assignment
        raise PlanningError(f"torchrec's plans overfill a device ({used:,} bytes of "
                            f"{memory_per_device:,.0f}) even with its cap at 80%")

    def _plan(self, tables: TableSet, num_devices: int, memory: int) -> Assignment:
        import torch
        from torchrec.distributed.embeddingbag import EmbeddingBagCollectionSharder
        from torchrec.distributed.planner import EmbeddingShardingPlanner, ParameterConstraints, Topology
        from torchrec.distributed.planner.storage_reservations import (
            FixedPercentageStorageReservation,
        )
        from torchrec.distributed.planner.types import PlannerError
        from torchrec.modules.embedding_configs import DataType, EmbeddingBagConfig
        from torchrec.modules.embedding_modules import EmbeddingBagCollection

        dtypes = {4.0: DataType.FP32, 2.0: DataType.FP16}
        configs = [EmbeddingBagConfig(name=t.name, embedding_dim=t.dim, num_embeddings=t.rows,
                                      feature_names=[f"f_{t.name}"],
                                      data_type=dtypes.get(float(t.bytes_per_element), DataType.FP32))
                   for t in tables.tables]
        ebc = EmbeddingBagCollection(tables=configs, device=torch.device("meta"))
        topology = Topology(world_size=num_devices, compute_device=self.device_type,
                            local_world_size=num_devices, ddr_cap=memory,
                            hbm_cap=memory if self.device_type == "cuda" else 0)
        constraints = {t.name: ParameterConstraints(sharding_types=["table_wise", "column_wise"],
                                                    pooling_factors=[float(t.pooling)])
                       for t in tables.tables}
        planner = EmbeddingShardingPlanner(
            topology=topology, constraints=constraints,
            storage_reservation=FixedPercentageStorageReservation(0.0))
        try:
            plan = planner.plan(ebc, [EmbeddingBagCollectionSharder()])
        except PlannerError as exc:
            raise PlanningError(f"torchrec's planner found no plan: {str(exc).splitlines()[0]}") from None
        self.last_plan = plan
        return assignment_from_plan(plan, tables, num_devices, module="")


BASELINES: dict[str, Callable[[], Planner]] = {
    "torchrec": TorchrecPlanner, "size-greedy": SizeGreedy, "lookup-greedy": LookupGreedy,
    "random": RandomPlanner}
