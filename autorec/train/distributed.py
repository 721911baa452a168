"""Process groups, torchrec DistributedModelParallel wrapping and cross-rank gathers.

One process or many: under torchrun (or Ray Train) every rank joins the group the launcher
describes (gloo on CPU, nccl on GPU); alone, a 1-process gloo group stands in, because
torchrec's sharded embedding kernels run only under DistributedModelParallel.

Example:
    >>> import numpy as np
    >>> ensure_process_group()
    >>> rank_and_world()[1] >= 1
    True
    >>> gather_rows(np.zeros((3, 2)), [2, 1]).shape  # one rank: its own rows
    (3, 2)
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
from torch import nn
from torchrec.distributed.embedding_types import EmbeddingComputeKernel
from torchrec.distributed.embeddingbag import EmbeddingBagCollectionSharder
from torchrec.distributed.model_parallel import (
    DataParallelWrapper,
    DefaultDataParallelWrapper,
    DistributedModelParallel,
)
from torchrec.distributed.planner import EmbeddingShardingPlanner, ParameterConstraints, Topology
from torchrec.distributed.types import ParameterSharding, ShardingEnv, ShardingPlan
from torchrec.modules.embedding_configs import DataType
from torchrec.modules.embedding_modules import EmbeddingBagCollection

from autorec.train.cpu_lookup import use_own_update
from autorec.train.huge_pages import back_tables

DENSE_PARALLEL = ("ddp", "fsdp")
# The kernels that train a table inside fbgemm's TBE: row-wise Adagrad state kept in fp32 and
# the update rounded stochastically into the table's dtype. The other one, "dense" (the only
# kernel of data_parallel), hands the table to torchrec's Python RowWiseAdagrad, whose state
# takes the table's dtype: in fp16 its eps (1e-10) rounds to 0 and small squared gradients
# underflow, so a row without gradient becomes 0/0 = NaN after the first update.
FUSED_KERNELS = (EmbeddingComputeKernel.FUSED.value, EmbeddingComputeKernel.FUSED_UVM.value,
                 EmbeddingComputeKernel.FUSED_UVM_CACHING.value)


def ensure_process_group() -> None:
    """Join the launcher's group when RANK/WORLD_SIZE are set, else start a 1-process gloo group."""
    if dist.is_initialized():
        return
    backend = "nccl" if torch.cuda.is_available() else "gloo"
    if os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True":
        rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        dist.init_process_group(backend, store=_attempt_store(world), rank=rank, world_size=world)
    elif "RANK" in os.environ and "WORLD_SIZE" in os.environ:
        dist.init_process_group(backend)
    else:
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)


def leave_process_group() -> None:
    """Wait for every rank, then destroy the process group: call it once a worker's training is
    over. A worker that exits with its gloo group alive can abort in interpreter teardown
    (SIGABRT, "terminate called without an active exception": gloo's threads still hold work
    objects), which failed a finished two-node run of the test suite here; torch leaves the
    call to the training script (its atexit fix, pytorch#179291, was abandoned)."""
    if dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()


def _attempt_store(world_size: int) -> dist.Store:
    """The torchrun agent's store, under a prefix of its own for this attempt.

    Measured with torch 2.13: after a restart (``--max-restarts``) the agent hands the workers
    the same store with the previous attempt's keys still in it, and the new gloo group
    connects to the dead workers' addresses (connectFullMesh fails or hangs). Every worker
    counts itself in; attempt k's workers are arrivals k*W+1 .. (k+1)*W (all of an attempt's
    workers start after the previous attempt's are stopped), the same on every node, whereas
    TORCHELASTIC_RESTART_COUNT differs between nodes when only one node's worker failed.
    Call this first thing in a worker: a worker that dies before counting itself in would
    shift the count.
    """
    store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), world_size,
                          is_master=False, timeout=timedelta(minutes=30))
    arrival = store.add("autorec/arrivals", 1)
    return dist.PrefixStore(f"autorec/attempt-{(arrival - 1) // world_size}", store)


def rank_and_world() -> tuple[int, int]:
    """(rank, world size) of the default group; (0, 1) when there is none."""
    if not dist.is_initialized():
        return 0, 1
    return dist.get_rank(), dist.get_world_size()


def default_device() -> torch.device:
    if torch.cuda.is_available():
        local_rank = int(os.environ.get("LOCAL_RANK", 0))
        torch.cuda.set_device(local_rank)
        return torch.device("cuda", local_rank)
    return torch.device("cpu")


class FullyShardWrapper(DataParallelWrapper):
    """Dense parts under FSDP2 (``fully_shard``) instead of DDP, for dense models too large to
    replicate: each unsharded child of the model (its MLPs, interaction layers) is sharded over
    all ranks; torchrec keeps the embedding tables."""

    def wrap(self, dmp: DistributedModelParallel, env: ShardingEnv, device: torch.device) -> None:
        from torch.distributed.device_mesh import DeviceMesh
        from torch.distributed.fsdp import fully_shard

        mesh = DeviceMesh.from_group(env.process_group, device.type)
        sharded = set(DistributedModelParallel._sharded_parameter_names(dmp._dmp_wrapped_module))
        for name, child in dmp._dmp_wrapped_module.named_children():
            params = [f"{name}.{p}" for p, _ in child.named_parameters()]
            if params and not any(p in sharded for p in params):
                fully_shard(child.to(device), mesh=mesh)


def table_names(model: nn.Module, reduced_only: bool = False) -> list[str]:
    """The names of ``model``'s embedding tables (``reduced_only``: those stored in less than fp32)."""
    return [config.name for module in model.modules() if isinstance(module, EmbeddingBagCollection)
            for config in module.embedding_bag_configs()
            if not reduced_only or config.data_type != DataType.FP32]


def reduced_precision_tables(model: nn.Module) -> list[str]:
    """The names of ``model``'s embedding tables stored in less than fp32."""
    return table_names(model, reduced_only=True)


def planner_constraints(model: nn.Module, keep_types: dict[str, str] | None = None,
                        alone: bool = False) -> dict[str, ParameterConstraints]:
    """Planner constraints that keep reduced-precision tables on the fused kernels (never
    data_parallel/dense, which NaNs them in fp16: see :data:`FUSED_KERNELS`), and the tables of
    ``keep_types`` on their sharding type (a checkpoint resumed at another world size: its
    optimizer state is that of its sharding types, a data-parallel table's the dense one's).

    ``alone`` (a one-process group): every other table goes table_wise on a fused kernel too.
    torchrec's planner would replicate the small ones (data_parallel), which over one rank buys
    nothing and costs every step a DDP over their lookup, a dense gradient per table and
    torchrec's row-wise Adagrad in Python; fused, they join the other tables' one lookup and
    update (:mod:`autorec.train.cpu_lookup` on the CPU). Same row-wise Adagrad either way.
    """
    keep = keep_types or {}
    names = set(table_names(model)) if alone else set(reduced_precision_tables(model)) | set(keep)
    out = {}
    for name in names:
        kind = keep.get(name, "table_wise" if alone else None)
        kernels = [EmbeddingComputeKernel.DENSE.value] if kind == "data_parallel" else list(FUSED_KERNELS)
        out[name] = ParameterConstraints(compute_kernels=kernels, sharding_types=[kind] if kind else None)
    return out


def table_shardings(plan: ShardingPlan) -> dict[str, ParameterSharding]:
    """Each table's ParameterSharding in ``plan`` (sharding type, compute kernel, ranks)."""
    return {name: ps for module_plan in plan.plan.values()
            for name, ps in getattr(module_plan, "items", lambda: [])()}


def sharding_types(plan: ShardingPlan) -> dict[str, str]:
    """Each table's sharding type in ``plan``."""
    return {name: ps.sharding_type for name, ps in table_shardings(plan).items()}


class OneProcess(DataParallelWrapper):
    """No data-parallel wrapper: in a one-process group the dense parts stay as they are.

    DDP over one process only copies every gradient into its buckets, all-reduces them with
    itself and copies them back, and, with ``find_unused_parameters`` (the supernet's), walks
    the autograd graph every step: about 1 ms of a DLRM step in fp32 here, nothing measurable under
    bf16 autocast (``benchmarks/one_process``).
    The gradients, and so the training, are the same; checkpoints keep their keys (DMP's
    ``state_dict`` strips DDP's ``module.`` prefix either way)."""

    def wrap(self, dmp: DistributedModelParallel, env: ShardingEnv, device: torch.device) -> None:
        return None


def shard(model: nn.Module, device: torch.device, plan: ShardingPlan | None = None,
          dense_parallel: str = "ddp", wrapper: DataParallelWrapper | None = None,
          keep_types: dict[str, str] | None = None,
          check: Callable[[ShardingPlan], None] | None = None,
          fuse_alone: bool = True, huge_pages: bool = True) -> DistributedModelParallel:
    """Wrap ``model`` (embeddings possibly on meta) in DistributedModelParallel.

    Args:
        model: a RecModel (its tables under ``sparse_arch``).
        device: this rank's device.
        plan: the tables' placement; without it torchrec's planner chooses one for the current
            world and device kind (collectively, so every rank gets the same plan), with
            reduced-precision tables on fused kernels (:func:`planner_constraints`).
        dense_parallel: ``"ddp"`` (DistributedDataParallel, torchrec's default) or ``"fsdp"``.
            In a one-process group ``"ddp"`` wraps nothing (:class:`OneProcess`).
        wrapper: a data-parallel wrapper for the dense parts that replaces the one
            ``dense_parallel`` names (the supernet's must find unused parameters).
        keep_types: table -> sharding type the planner must keep (see :func:`planner_constraints`).
        check: called with the plan before any table is allocated; raises to refuse it.
        fuse_alone: in a one-process group (and without ``plan``), every table table_wise on a
            fused kernel (:func:`planner_constraints`); False leaves the choice to the planner.
        huge_pages: on the CPU, the fused tables and their state on 2 MiB transparent huge pages
            (:func:`autorec.train.huge_pages.back_tables`).

    On the CPU, the fused tables' row-wise Adagrad runs in autorec's own update
    (:func:`autorec.train.cpu_lookup.use_own_update`): the same update as fbgemm's fused
    backward, which is several times slower there.
    """
    if dense_parallel not in DENSE_PARALLEL:
        raise ValueError(f"dense_parallel: expected one of {', '.join(DENSE_PARALLEL)}, "
                         f"got {dense_parallel!r}")
    ensure_process_group()
    sharders = [EmbeddingBagCollectionSharder()]
    if plan is None:
        topology = Topology(world_size=dist.get_world_size(), compute_device=device.type,
                            local_world_size=int(os.environ.get("LOCAL_WORLD_SIZE",
                                                                dist.get_world_size())))
        constraints = planner_constraints(model, keep_types, alone=fuse_alone and dist.get_world_size() == 1)
        planner = EmbeddingShardingPlanner(topology=topology, constraints=constraints)
        plan = planner.collective_plan(
            model, sharders, dist.GroupMember.WORLD)
    _check_fused(plan, reduced_precision_tables(model))
    if check is not None:
        check(plan)
    if wrapper is None and dense_parallel == "fsdp":
        wrapper = FullyShardWrapper()
    elif wrapper is None:
        wrapper = OneProcess() if dist.get_world_size() == 1 else DefaultDataParallelWrapper()
    sharded = DistributedModelParallel(model, device=device, plan=plan, sharders=sharders,
                                       data_parallel_wrapper=wrapper)
    if device.type == "cpu":
        use_own_update(sharded)  # fbgemm's CPU fused backward, same update, faster
        if huge_pages:
            back_tables(sharded)  # fewer TLB misses on the rows' random reads and writes
    return sharded


def _check_fused(plan: ShardingPlan, tables: list[str]) -> None:
    for module, module_plan in plan.plan.items():
        for name in tables:
            ps = getattr(module_plan, "get", lambda _: None)(name)
            if ps is not None and ps.compute_kernel not in FUSED_KERNELS:
                raise ValueError(
                    f"table {name} ({module}): a reduced-precision (fp16) table trains only on a "
                    f"fused kernel ({', '.join(FUSED_KERNELS)}), whose optimizer state is fp32; "
                    f"the plan gives it {ps.sharding_type}/{ps.compute_kernel} (on the dense "
                    f"kernel, torchrec's row-wise Adagrad keeps fp16 state and the table turns "
                    f"NaN). Use table_wise or column_wise (fused), or make the table fp32")


def gather_rows(local: np.ndarray, part_sizes: list[int]) -> np.ndarray:
    """Every rank's rows of ``local`` [n, ...], in the order of the global batches they came from.

    ``part_sizes`` are this rank's rows per global batch (every rank has as many batches). Rank
    r's part of batch b follows rank r - 1's, so the result is the order a single process sees.
    The result is on every rank.
    """
    world = rank_and_world()[1]
    if world == 1:
        return local
    # nccl gathers CUDA tensors only; gloo CPU ones.
    device = (torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl"
              else torch.device("cpu"))
    sizes = torch.tensor(part_sizes, dtype=torch.int64, device=device)
    all_sizes = [torch.empty_like(sizes) for _ in range(world)]
    dist.all_gather(all_sizes, sizes)
    all_sizes = [s.cpu() for s in all_sizes]
    longest = max(int(s.sum()) for s in all_sizes)
    flat = torch.from_numpy(np.ascontiguousarray(local)).reshape(local.shape[0], -1)
    padded = torch.zeros(longest, flat.shape[1], dtype=flat.dtype)
    padded[:flat.shape[0]] = flat
    padded = padded.to(device)
    gathered = [torch.empty_like(padded) for _ in range(world)]
    dist.all_gather(gathered, padded)
    pieces = [list(torch.split(g.cpu()[:int(s.sum())], s.tolist()))
              for g, s in zip(gathered, all_sizes, strict=True)]
    ordered = [pieces[r][b] for b in range(len(part_sizes)) for r in range(world)]
    out = torch.cat(ordered) if ordered else flat[:0]
    return out.numpy().reshape(-1, *local.shape[1:])


def checkpoint_root(checkpoint_dir: str | None, rank: int, world_size: int) -> tuple[Path, str | None]:
    """(a training's checkpoint folder, the scratch folder to delete after it or None): the
    configured one, else a temporary folder that rank 0 makes, the same path on every rank (a
    multi-node run needs one on shared storage, so it must be configured)."""
    if checkpoint_dir:
        return Path(checkpoint_dir), None
    if world_size > int(os.environ.get("LOCAL_WORLD_SIZE", world_size)):
        raise ValueError("checkpoint_dir: a multi-node run needs a checkpoint folder on storage "
                         "that every node sees (the best model is kept there)")
    holder = [tempfile.mkdtemp(prefix="autorec-ckpt-") if rank == 0 else None]
    if world_size > 1:
        dist.broadcast_object_list(holder, src=0)
    return Path(holder[0]), holder[0]
