"""Process groups and torchrec DistributedModelParallel wrapping, for one process or many."""

from __future__ import annotations

import os

import torch
import torch.distributed as dist
from torch import nn
from torchrec.distributed.embeddingbag import EmbeddingBagCollectionSharder
from torchrec.distributed.model_parallel import DistributedModelParallel
from torchrec.distributed.planner import EmbeddingShardingPlanner, Topology
from torchrec.distributed.types import ShardingPlan


def ensure_process_group() -> None:
    """Join the torchrun group when launched by torchrun, else start a 1-process gloo group.

    torchrec's sharded embedding kernels (fused fbgemm, optimizer applied in backward) run
    only under DistributedModelParallel, which needs a process group even for one process.
    """
    if dist.is_initialized():
        return
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:
        backend = "nccl" if torch.cuda.is_available() else "gloo"
        dist.init_process_group(backend)
    else:
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)


def default_device() -> torch.device:
    if torch.cuda.is_available():
        local_rank = int(os.environ.get("LOCAL_RANK", 0))
        torch.cuda.set_device(local_rank)
        return torch.device("cuda", local_rank)
    return torch.device("cpu")


def shard(model: nn.Module, device: torch.device,
          plan: ShardingPlan | None = None) -> DistributedModelParallel:
    """Wrap ``model`` (embeddings possibly on meta) in DistributedModelParallel.

    Without ``plan``, torchrec's planner chooses one for the current world and device kind.
    """
    ensure_process_group()
    sharders = [EmbeddingBagCollectionSharder()]
    if plan is None:
        topology = Topology(world_size=dist.get_world_size(), compute_device=device.type)
        plan = EmbeddingShardingPlanner(topology=topology).collective_plan(
            model, sharders, dist.GroupMember.WORLD)
    return DistributedModelParallel(model, device=device, plan=plan, sharders=sharders)
