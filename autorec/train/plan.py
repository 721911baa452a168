"""Sharding plan files: which rank holds which embedding table, as JSON, to a torchrec ShardingPlan.

The format (version 1), one entry per embedding table of the architecture::

    {
      "format": "autorec-sharding-plan",
      "version": 1,
      "world_size": 2,
      "tables": {
        "t_user": {"sharding_type": "table_wise", "ranks": [1]},
        "t_item": {"sharding_type": "column_wise", "ranks": [0, 1]},
        "t_tags": {"sharding_type": "data_parallel"},
        "t_big":  {"sharding_type": "row_wise", "compute_kernel": "fused"}
      }
    }

``sharding_type`` is one of :data:`SHARDING_TYPES`. ``ranks`` is required for table_wise (one
rank) and column_wise (one rank per equal column block; a rank may repeat); row_wise and
data_parallel use every rank; table_row_wise takes ``"host"`` and grid_shard ``"hosts"`` (node
indices). ``compute_kernel`` is optional (``fused`` on the embedding kernels, ``dense`` for
data_parallel). ``world_size`` is optional; when present it must equal the running world size.
The sharding planner of issue #7 (``autorec shard``) writes these files; :func:`plan_to_json`
writes the plan torchrec's own planner chose, in the same format.

Example:
    >>> from autorec.data import Schema, SparseFeature
    >>> from autorec.presets import preset
    >>> spec = preset("dlrm", Schema(dense=("a",), sparse=(SparseFeature("user", 50),)), dim=8)
    >>> doc = {"version": 1, "tables": {"t_user": {"sharding_type": "table_wise", "ranks": [0]}}}
    >>> plan = plan_from_json(doc, spec, world_size=1, device_type="cpu")
    >>> plan.plan["sparse_arch"]["t_user"].sharding_type
    'table_wise'
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from torchrec.distributed import sharding_plan as sp
from torchrec.distributed.embeddingbag import EmbeddingBagCollectionSharder
from torchrec.distributed.types import ShardingPlan
from torchrec.modules.embedding_modules import EmbeddingBagCollection

from autorec.arch import ArchSpec
from autorec.models import embedding_configs

FORMAT, VERSION = "autorec-sharding-plan", 1
# The embedding module's path inside RecModel (RecModel.sparse_arch).
MODULE = "sparse_arch"
SHARDING_TYPES = ("data_parallel", "table_wise", "column_wise", "row_wise", "table_row_wise",
                  "grid_shard")
# torchrec implements these only with CUDA kernels (measured: see DESIGN.md).
CUDA_ONLY = ("row_wise", "table_row_wise", "grid_shard")
_KEYS = {"sharding_type", "ranks", "host", "hosts", "compute_kernel"}


class PlanError(ValueError):
    """A plan file is malformed or does not fit the architecture; names the file and key."""


def load_plan(path: str | Path, spec: ArchSpec, world_size: int, device_type: str) -> ShardingPlan:
    """Read a plan file (see the module doc) into a torchrec ShardingPlan for ``spec``."""
    path = Path(path)
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        raise PlanError(f"{path}: no such plan file") from None
    except json.JSONDecodeError as exc:
        raise PlanError(f"{path}:{exc.lineno}:{exc.colno}: not valid JSON: {exc.msg}") from None
    return plan_from_json(doc, spec, world_size, device_type, source=str(path))


def plan_from_json(doc: Any, spec: ArchSpec, world_size: int, device_type: str,
                   source: str = "plan") -> ShardingPlan:
    """A parsed plan document into a torchrec ShardingPlan (built by construct_module_sharding_plan)."""
    if not isinstance(doc, Mapping):
        raise PlanError(f"{source}: expected a JSON object, got {type(doc).__name__}")
    if doc.get("format", FORMAT) != FORMAT:
        raise PlanError(f"{source}: format: expected {FORMAT!r}, got {doc['format']!r}")
    if doc.get("version") != VERSION:
        raise PlanError(f"{source}: version: expected {VERSION}, got {doc.get('version')!r}")
    if "world_size" in doc and doc["world_size"] != world_size:
        raise PlanError(f"{source}: world_size: the plan is for {doc['world_size']} ranks, "
                        f"this run has {world_size}")
    tables = doc.get("tables")
    if not isinstance(tables, Mapping):
        raise PlanError(f"{source}: tables: expected an object of table name -> sharding")
    names = [t.name for t in spec.tables]
    unknown, missing = sorted(set(tables) - set(names)), [n for n in names if n not in tables]
    if unknown:
        raise PlanError(f"{source}: tables: {unknown} are not tables of architecture "
                        f"{spec.name!r}; its tables are {names}")
    if missing:
        raise PlanError(f"{source}: tables: no sharding given for {missing}")
    generators = {name: _generator(tables[name], f"{source}: tables.{name}", world_size, device_type)
                  for name in names}
    ebc = EmbeddingBagCollection(tables=embedding_configs(spec), device=torch.device("meta"))
    try:
        module_plan = sp.construct_module_sharding_plan(
            ebc, generators, sharder=EmbeddingBagCollectionSharder(), local_size=world_size,
            world_size=world_size, device_type=device_type)
    except (ValueError, AssertionError) as exc:
        raise PlanError(f"{source}: torchrec rejects the plan: {exc}") from None
    return ShardingPlan({MODULE: module_plan})


def _generator(entry: Any, where: str, world_size: int, device_type: str) -> Any:
    if not isinstance(entry, Mapping):
        raise PlanError(f"{where}: expected an object with sharding_type, got {entry!r}")
    extra = sorted(set(entry) - _KEYS)
    if extra:
        raise PlanError(f"{where}: unknown keys {extra}; expected some of {sorted(_KEYS)}")
    kind = entry.get("sharding_type")
    if kind not in SHARDING_TYPES:
        raise PlanError(f"{where}.sharding_type: expected one of {', '.join(SHARDING_TYPES)}, "
                        f"got {kind!r}")
    if kind in CUDA_ONLY and device_type != "cuda":
        raise PlanError(f"{where}.sharding_type: {kind} needs CUDA (torchrec has no CPU kernel "
                        "for it); use table_wise, column_wise or data_parallel on CPU")
    kernel = entry.get("compute_kernel")
    if kernel is not None and not isinstance(kernel, str):
        raise PlanError(f"{where}.compute_kernel: expected a string, got {kernel!r}")
    if kind == "data_parallel":
        return sp.data_parallel()
    if kind == "row_wise":
        return sp.row_wise(compute_kernel=kernel)
    if kind == "table_row_wise":
        return sp.table_row_wise(host_index=_index(entry.get("host"), f"{where}.host"))
    if kind == "grid_shard":
        hosts = entry.get("hosts")
        if not isinstance(hosts, list) or not hosts:
            raise PlanError(f"{where}.hosts: expected a non-empty list of node indices, got {hosts!r}")
        return sp.grid_shard(host_indexes=[_index(h, f"{where}.hosts") for h in hosts])
    ranks = entry.get("ranks")
    if not isinstance(ranks, list) or not ranks:
        raise PlanError(f"{where}.ranks: expected a non-empty list of ranks, got {ranks!r}")
    for r in ranks:
        if _index(r, f"{where}.ranks") >= world_size:
            raise PlanError(f"{where}.ranks: rank {r} does not exist in a world of {world_size}")
    if kind == "table_wise":
        if len(ranks) != 1:
            raise PlanError(f"{where}.ranks: table_wise places a table on one rank, got {ranks}")
        return sp.table_wise(rank=ranks[0], compute_kernel=kernel or "fused")
    return sp.column_wise(ranks=ranks, compute_kernel=kernel or "fused")


def _index(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise PlanError(f"{where}: expected a non-negative integer, got {value!r}")
    return value


def plan_to_json(plan: ShardingPlan, world_size: int) -> dict[str, Any]:
    """A torchrec ShardingPlan of a RecModel (e.g. the one its planner chose) in the file format."""
    module_plan = plan.plan.get(MODULE)
    if module_plan is None:
        raise PlanError(f"the plan has no entry for module {MODULE!r}; it has {sorted(plan.plan)}")
    tables: dict[str, Any] = {}
    for name, ps in module_plan.items():
        entry: dict[str, Any] = {"sharding_type": ps.sharding_type, "compute_kernel": ps.compute_kernel}
        if ps.sharding_type in ("table_wise", "column_wise"):
            entry["ranks"] = list(ps.ranks or [])
        elif ps.sharding_type not in ("data_parallel", "row_wise"):
            raise PlanError(f"table {name}: sharding type {ps.sharding_type} has no plan-file form; "
                            f"expected one of {', '.join(SHARDING_TYPES)}")
        tables[name] = entry
    return {"format": FORMAT, "version": VERSION, "world_size": world_size, "tables": tables}


def save_plan(plan: ShardingPlan, world_size: int, path: str | Path) -> None:
    Path(path).write_text(json.dumps(plan_to_json(plan, world_size), indent=2) + "\n")
