"""The machine a sharding plan runs on, and the step time the cost model predicts on it.

The shard cost model (:mod:`~autorec.sharding.cost_model`) prices one device's shards as if the
device ran alone, over the link it was profiled on. A :class:`Topology` (a JSON file) says what
the plan really runs on: ``ranks_per_node`` ranks per node sharing ``cores_per_node`` cores (CPU
cores, or GPUs: one each), links of ``intra_node_gbps`` within a node and ``inter_node_gbps``
between nodes, and ``profiled_gbps``, the link the comm head was measured on. Then
:func:`step_cost` predicts a synchronous step (ms):

* compute (forward + backward heads) per node under processor sharing: the node's ranks run
  at most one core each and share its cores, so the node finishes its compute after
  ``max(largest rank's compute, sum of its ranks' compute / cores_per_node)`` (the makespan
  bound of ``ranks`` jobs on ``cores`` processors, exact when work can be shared freely);
* comm (the all-to-all head) scaled by the links it crosses: the fraction of each rank's peers
  on its own node at ``profiled / intra`` and the rest at ``profiled / inter``;
* the step: the slowest node's compute plus the slowest rank's comm.

With one core per rank on one node and the profiled link, it is the cost model's own maximum of
compute plus the maximum comm (the "phase" objective with forward and backward together).

Example:
    >>> topo = Topology(ranks_per_node=4, cores_per_node=2, intra_node_gbps=10.0,
    ...                 inter_node_gbps=10.0, profiled_gbps=10.0)
    >>> compute_makespan([3.0, 1.0, 1.0, 1.0], cores=2)   # one rank holds half the work
    3.0
    >>> compute_makespan([1.5, 1.5, 1.5, 1.5], cores=2)   # balanced: four ranks on two cores
    3.0
    >>> topo.comm_scale(world_size=8)  # 3 of 7 peers on the same node, 4 on the other
    1.0
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from autorec.sharding.cost_model import ShardCostModel
from autorec.sharding.plans import Assignment
from autorec.sharding.tables import TableSet

TOPOLOGY_FILE = "topology.json"


class TopologyError(ValueError):
    """A topology file is missing a key or holds a bad value; the message names both."""


@dataclass(frozen=True)
class Topology:
    """Ranks, cores and links of the machine (see the module docstring)."""

    ranks_per_node: int
    cores_per_node: float
    intra_node_gbps: float
    inter_node_gbps: float
    profiled_gbps: float

    def __post_init__(self) -> None:
        if not isinstance(self.ranks_per_node, int) or self.ranks_per_node < 1:
            raise TopologyError(f"ranks_per_node: expected a positive integer, got {self.ranks_per_node!r}")
        for key in ("cores_per_node", "intra_node_gbps", "inter_node_gbps", "profiled_gbps"):
            value = getattr(self, key)
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not value > 0:
                raise TopologyError(f"{key}: expected a positive number, got {value!r}")

    def comm_scale(self, world_size: int) -> float:
        """How much longer than profiled the all-to-all takes: peers on the node over the
        intra-node link, the others over the inter-node link."""
        peers = world_size - 1
        if peers < 1:
            return 0.0
        local = min(self.ranks_per_node, world_size) - 1
        remote = peers - local
        return (local * self.profiled_gbps / self.intra_node_gbps
                + remote * self.profiled_gbps / self.inter_node_gbps) / peers

    @classmethod
    def load(cls, path: str | Path) -> Topology:
        """Read a topology JSON file; a missing file, key or bad value names the file and key."""
        path = Path(path)
        try:
            doc = json.loads(path.read_text())
        except FileNotFoundError:
            raise TopologyError(f"{path}: no such topology file") from None
        except json.JSONDecodeError as exc:
            raise TopologyError(f"{path}: not JSON (line {exc.lineno}: {exc.msg})") from None
        if not isinstance(doc, dict):
            raise TopologyError(f"{path}: expected a JSON object of {', '.join(cls.__dataclass_fields__)}")
        fields = list(cls.__dataclass_fields__)
        unknown = sorted(set(doc) - set(fields) - {"comment"})
        missing = [k for k in fields if k not in doc]
        if unknown or missing:
            raise TopologyError(f"{path}: " + "; ".join(
                ([f"unknown key(s) {', '.join(unknown)}"] if unknown else [])
                + ([f"missing key(s) {', '.join(missing)}"] if missing else []))
                + f"; expected {', '.join(fields)}")
        try:
            return cls(**{k: doc[k] for k in fields})
        except TopologyError as exc:
            raise TopologyError(f"{path}: {exc}") from None

    def save(self, path: str | Path, comment: str = "") -> None:
        doc = {**({"comment": comment} if comment else {}), **asdict(self)}
        Path(path).write_text(json.dumps(doc, indent=1) + "\n")


def compute_makespan(work: Sequence[float], cores: float) -> float:
    """When the last of ``work`` (one entry per rank, each on at most one core) finishes on
    ``cores`` shared cores: ``max(max(work), sum(work) / cores)``."""
    if not work:
        return 0.0
    return max(max(work), math.fsum(work) / cores)


def step_cost(model: ShardCostModel, tables: TableSet, assignment: Assignment, topology: Topology) -> float:
    """The predicted synchronous step (ms) of ``assignment`` on ``topology`` (module docstring)."""
    shards, devices = assignment.shards(tables)
    heads = model.device_head_costs(TableSet(tuple(shards)), devices, assignment.num_devices)  # [D, 3]
    compute = (heads[:, 0] + heads[:, 1]).tolist()
    per_node = topology.ranks_per_node
    nodes = [compute[i:i + per_node] for i in range(0, len(compute), per_node)]
    slowest = max(compute_makespan(node, min(topology.cores_per_node, len(node))) for node in nodes)
    return slowest + float(heads[:, 2].max()) * topology.comm_scale(assignment.num_devices)
