"""The planner interface: what every sharding planner answers and the rules every plan keeps.

Every planner answers ``plan(tables, num_devices, memory_per_device, seed=) -> Assignment``:
each table on one device (table_wise) or split into even column blocks on distinct devices
(column_wise), every device within its memory. The learned planner is
:class:`~autorec.sharding.planner.RLPlanner`; the baselines are in
:mod:`autorec.sharding.baselines`. This module holds only what they all share: the
:class:`Planner` base class, the column splits a table allows and the check that a problem can fit.

Example:
    >>> from autorec.sharding.tables import TableSet
    >>> tables = TableSet.generate(4, seed=0, rows_range=(1e3, 1e4))
    >>> check_fits(tables, num_devices=2, memory_per_device=0)
    Traceback (most recent call last):
    ...
    autorec.sharding.plans.PlanningError: memory_per_device: expected a positive number of bytes, got 0
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from typing import ClassVar

from autorec.sharding.plans import Assignment, PlanningError
from autorec.sharding.tables import TableInfo, TableSet

SPLITS = (1, 2, 4, 8, 16)
MIN_BLOCK_DIM = 4
# what "the cost of a plan" means: "max", the maximum device cost, or "phase" (DreamShard's),
# the sum over the phases (forward, backward, comm) of the maximum device cost
OBJECTIVES = ("max", "phase")


class Planner(ABC):
    """A sharding planner: tables -> devices under a per-device memory limit.

    Implementations must place every table exactly once (whole or as even column blocks on
    distinct devices), keep every device within ``memory_per_device`` bytes, return the same
    assignment for the same ``seed``, and raise :class:`PlanningError` when the tables cannot
    fit. ``tests/sharding/test_conformance.py`` checks every planner for this.
    """

    name: ClassVar[str] = "planner"

    @abstractmethod
    def plan(self, tables: TableSet, num_devices: int, memory_per_device: float, *,
             seed: int = 0) -> Assignment:
        """Place ``tables`` on ``num_devices`` devices of ``memory_per_device`` bytes each."""


def split_options(table: TableInfo, num_devices: int) -> list[int]:
    """The column splits k allowed for ``table``: k in :data:`SPLITS`, k <= num_devices, the dim
    divisible by k (torchrec's column_wise takes even blocks) and blocks >= 4 wide (or k = 1).

    Example:
        >>> from autorec.sharding.tables import TableInfo
        >>> split_options(TableInfo("t", 10, 24, 1.0, 4.0, (1.0,) + (0.0,) * 7), 8)
        [1, 2, 4]
    """
    return [k for k in SPLITS if k <= num_devices and table.dim % k == 0
            and (k == 1 or table.dim // k >= MIN_BLOCK_DIM)]


def check_fits(tables: TableSet, num_devices: int, memory_per_device: float) -> None:
    """Raise PlanningError when the tables clearly cannot fit: too few devices, a table whose
    smallest column block exceeds a device, or more bytes in all than all devices hold."""
    if not isinstance(num_devices, int) or num_devices < 1:
        raise PlanningError(f"num_devices: expected a positive integer, got {num_devices!r}")
    if not memory_per_device > 0:
        raise PlanningError(f"memory_per_device: expected a positive number of bytes, "
                            f"got {memory_per_device!r}")
    if len(tables) == 0:
        raise PlanningError("the table set is empty")
    for table in tables.tables:
        k = split_options(table, num_devices)[-1]
        smallest = table.column_shard(k)[0].bytes
        if smallest > memory_per_device:
            raise PlanningError(
                f"table {table.name} ({table.bytes:,} bytes) does not fit: its smallest column "
                f"block ({k} blocks of {smallest:,} bytes) exceeds the {memory_per_device:,.0f} "
                f"bytes of a device")
    if tables.total_bytes > num_devices * memory_per_device:
        raise PlanningError(
            f"the tables need {tables.total_bytes:,} bytes; {num_devices} devices of "
            f"{memory_per_device:,.0f} bytes hold {num_devices * memory_per_device:,.0f}")


def timed_plan(planner: Planner, tables: TableSet, num_devices: int,
               memory_per_device: float, seed: int = 0) -> tuple[Assignment, float]:
    """(assignment, seconds of process CPU time) of one planning call."""
    start = time.process_time()
    assignment = planner.plan(tables, num_devices, memory_per_device, seed=seed)
    return assignment, time.process_time() - start
