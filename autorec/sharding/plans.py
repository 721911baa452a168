"""A planner's answer (:class:`Assignment`) and its torchrec forms: plan JSON and ShardingPlan.

An assignment places every table of a :class:`~autorec.sharding.tables.TableSet` on devices:
one rank (``table_wise``) or several column blocks (``column_wise``, one rank per block, the
blocks' widths summing to the table's dim). :func:`plan_json` writes it in the plan-file format
that ``autorec train --plan`` reads (:mod:`autorec.train.plan`), and :func:`sharding_plan` turns
it into the torchrec ShardingPlan that DistributedModelParallel takes, built by torchrec's
``construct_module_sharding_plan`` (through :func:`autorec.train.plan.plan_from_json`).

Example:
    >>> from autorec.sharding.tables import TableInfo, TableSet
    >>> uniform = (1.0,) + (0.0,) * 7  # access-reuse histogram: no row looked up twice
    >>> tables = TableSet((TableInfo("t_a", rows=100, dim=8, pooling=1.0, bytes_per_element=4.0,
    ...                                reuse=uniform),
    ...                    TableInfo("t_b", rows=50, dim=8, pooling=2.0, bytes_per_element=4.0,
    ...                              reuse=uniform)))
    >>> a = Assignment.of([(1,), (0, 1)], tables, num_devices=2)
    >>> plan_json(a, tables)["tables"]["t_b"]
    {'sharding_type': 'column_wise', 'ranks': [0, 1], 'compute_kernel': 'fused'}
    >>> a.memory(tables)  # bytes per device: t_a on 1, half of t_b on each
    [1000, 4600]
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from autorec.arch import ArchSpec
from autorec.sharding.tables import TableInfo, TableSet
from autorec.train.plan import FORMAT, MODULE, VERSION, PlanError, plan_from_json

# Shard kinds a planner here decides between; row_wise (CUDA only in torchrec) is written for
# the tables named in ``row_wise=`` of plan_json.
TABLE_WISE, COLUMN_WISE, ROW_WISE = "table_wise", "column_wise", "row_wise"


class PlanningError(ValueError):
    """The tables cannot be placed (e.g. they do not fit the devices' memory); says why."""


@dataclasses.dataclass(frozen=True)
class Placement:
    """Where one table lives: ``ranks[i]`` holds its ``columns[i]`` columns (block i).

    One block is ``table_wise``; several are ``column_wise``.
    """

    ranks: tuple[int, ...]
    columns: tuple[int, ...]

    @property
    def sharding_type(self) -> str:
        return TABLE_WISE if len(self.ranks) == 1 else COLUMN_WISE

    @property
    def even(self) -> bool:
        return len(set(self.columns)) == 1


@dataclasses.dataclass(frozen=True)
class Assignment:
    """Placements of a table set's tables, in the set's order, on ``num_devices`` devices."""

    placements: tuple[Placement, ...]
    num_devices: int

    @classmethod
    def of(cls, ranks: Sequence[Sequence[int]], tables: TableSet, num_devices: int) -> Assignment:
        """Even column blocks: ``ranks[t]`` are the ranks of table t's blocks (one: table_wise)."""
        if len(ranks) != len(tables):
            raise PlanningError(f"expected ranks for each of the {len(tables)} tables, got "
                                f"{len(ranks)}")
        placements = []
        for table, r in zip(tables.tables, ranks, strict=True):
            if not r:
                raise PlanningError(f"table {table.name}: no ranks given")
            placements.append(Placement(tuple(int(x) for x in r), (table.dim // len(r),) * len(r)))
        return cls(tuple(placements), num_devices)

    def shards(self, tables: TableSet) -> tuple[list[TableInfo], list[int]]:
        """The shards (a table, or its column blocks named ``<name>@c<i>``) and their devices."""
        self.check(tables)
        shards: list[TableInfo] = []
        devices: list[int] = []
        for table, placement in zip(tables.tables, self.placements, strict=True):
            if len(placement.ranks) == 1:
                shards.append(table)
            elif placement.even:
                shards.extend(table.column_shard(len(placement.ranks)))
            else:
                shards.extend(dataclasses.replace(table, name=f"{table.name}@c{i}", dim=cols)
                              for i, cols in enumerate(placement.columns))
            devices.extend(placement.ranks)
        return shards, devices

    def memory(self, tables: TableSet) -> list[int]:
        """Bytes each device holds."""
        used = [0] * self.num_devices
        for shard, device in zip(*self.shards(tables), strict=True):
            used[device] += shard.bytes
        return used

    def check(self, tables: TableSet, memory_per_device: float | None = None) -> None:
        """Raise PlanningError unless every table is placed once, in full, within memory."""
        if len(self.placements) != len(tables.tables):
            raise PlanningError(f"the assignment places {len(self.placements)} tables; the table "
                                f"set has {len(tables.tables)}")
        for table, p in zip(tables.tables, self.placements, strict=True):
            if not p.ranks or len(p.ranks) != len(p.columns):
                raise PlanningError(f"table {table.name}: expected one rank per column block, got "
                                    f"ranks {p.ranks} and columns {p.columns}")
            if sum(p.columns) != table.dim or min(p.columns) < 1:
                raise PlanningError(f"table {table.name}: column blocks {p.columns} do not cover "
                                    f"its {table.dim} columns")
            bad = [r for r in p.ranks if not 0 <= r < self.num_devices]
            if bad:
                raise PlanningError(f"table {table.name}: ranks {bad} do not exist on "
                                    f"{self.num_devices} devices")
        if memory_per_device is not None:
            for device, used in enumerate(self.memory(tables)):
                if used > memory_per_device:
                    raise PlanningError(f"device {device} holds {used:,} bytes, over its "
                                        f"{memory_per_device:,.0f}")

    def to_dict(self) -> dict[str, Any]:
        return {"num_devices": self.num_devices,
                "placements": [{"ranks": list(p.ranks), "columns": list(p.columns)}
                               for p in self.placements]}


def plan_json(assignment: Assignment, tables: TableSet, *, device_type: str = "cpu",
              row_wise: Sequence[str] = ()) -> dict[str, Any]:
    """The assignment in the plan-file format of :mod:`autorec.train.plan`.

    Args:
        assignment: placements of ``tables`` (even column blocks only: the file format and
            torchrec's ``column_wise(ranks=...)`` split a table into equal blocks).
        tables: the table set the assignment places (names as the architecture's tables).
        device_type: ``"cpu"`` or ``"cuda"``; row_wise is refused on CPU (no torchrec kernel).
        row_wise: tables to shard row-wise over every rank instead (CUDA only).
    """
    assignment.check(tables)
    if row_wise and device_type != "cuda":
        raise PlanningError(f"row_wise {list(row_wise)}: torchrec shards row-wise only with CUDA "
                            "kernels; on CPU use table_wise or column_wise")
    names = [t.name for t in tables.tables]
    unknown = sorted(set(row_wise) - set(names))
    if unknown:
        raise PlanningError(f"row_wise: {unknown} are not tables of the set; its tables are {names}")
    entries: dict[str, Any] = {}
    for table, p in zip(tables.tables, assignment.placements, strict=True):
        if table.name in row_wise:
            entries[table.name] = {"sharding_type": ROW_WISE, "compute_kernel": "fused"}
        elif not p.even:
            raise PlanningError(f"table {table.name}: uneven column blocks {p.columns} have no "
                                "plan-file form (column_wise splits a table into equal blocks)")
        else:
            entries[table.name] = {"sharding_type": p.sharding_type, "ranks": list(p.ranks),
                                   "compute_kernel": "fused"}
    return {"format": FORMAT, "version": VERSION, "world_size": assignment.num_devices,
            "tables": entries}


def save_plan_json(assignment: Assignment, tables: TableSet, path: str | Path,
                   **options: Any) -> None:
    """Write :func:`plan_json` to ``path`` (what ``autorec train --plan`` reads)."""
    Path(path).write_text(json.dumps(plan_json(assignment, tables, **options), indent=2) + "\n")


def sharding_plan(assignment: Assignment, tables: TableSet, spec: ArchSpec, *,
                  device_type: str = "cpu", row_wise: Sequence[str] = ()) -> Any:
    """The torchrec ShardingPlan of ``spec``'s model (RecModel) for the assignment."""
    doc = plan_json(assignment, tables, device_type=device_type, row_wise=row_wise)
    return plan_from_json(doc, spec, assignment.num_devices, device_type, source="assignment")


def assignment_from_plan(plan: Any, tables: TableSet, num_devices: int,
                         module: str | None = MODULE) -> Assignment:
    """A torchrec ShardingPlan (e.g. from its EmbeddingShardingPlanner) as an Assignment.

    ``module`` is the embedding module's path in the plan (``None``: the plan's only module).
    table_wise and column_wise (with its shards' widths and ranks) are taken; other sharding
    types have no Assignment form here and raise PlanningError.
    """
    if module is None:
        if len(plan.plan) != 1:
            raise PlanningError(f"the plan has modules {sorted(plan.plan)}; name the one to read")
        module = next(iter(plan.plan))
    module_plan: Mapping[str, Any] = plan.plan[module]
    placements = []
    for table in tables.tables:
        ps = module_plan.get(table.name)
        if ps is None:
            raise PlanningError(f"the plan has no sharding for table {table.name}")
        if ps.sharding_type not in (TABLE_WISE, COLUMN_WISE):
            raise PlanningError(f"table {table.name}: sharding type {ps.sharding_type} is not "
                                "table_wise or column_wise")
        shards = sorted(ps.sharding_spec.shards, key=lambda s: s.shard_offsets[1])
        ranks = tuple(int(s.placement.rank()) for s in shards)
        columns = tuple(int(s.shard_sizes[1]) for s in shards)
        placements.append(Placement(ranks, columns))
    return Assignment(tuple(placements), num_devices)


def load_assignment(doc: Mapping[str, Any], tables: TableSet, source: str = "plan") -> Assignment:
    """A plan-file document (table_wise/column_wise entries) as an Assignment of ``tables``."""
    entries = doc.get("tables")
    if not isinstance(entries, Mapping):
        raise PlanError(f"{source}: tables: expected an object of table name -> sharding")
    world = doc.get("world_size")
    if not isinstance(world, int) or world < 1:
        raise PlanError(f"{source}: world_size: expected a positive integer, got {world!r}")
    ranks = []
    for table in tables.tables:
        entry = entries.get(table.name)
        if not isinstance(entry, Mapping) or entry.get("sharding_type") not in (TABLE_WISE, COLUMN_WISE):
            raise PlanError(f"{source}: tables.{table.name}: expected a table_wise or column_wise "
                            f"entry, got {entry!r}")
        ranks.append(entry.get("ranks"))
    return Assignment.of(ranks, tables, world)
