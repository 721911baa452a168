"""Does torchrec's own EmbeddingTowerCollection shard on CPU over gloo? (A short experiment.)

    OMP_NUM_THREADS=1 .venv/bin/torchrun --standalone --nproc-per-node 4 benchmarks/towers_torchrec_etc.py
    ETC_SHARDING=table_row_wise OMP_NUM_THREADS=1 .venv/bin/torchrun --standalone --nproc-per-node 4 \
        benchmarks/towers_torchrec_etc.py

Two towers of two tables each (dim 4), each tower's interaction a Linear; torchrec's planner with
the tables constrained to ``ETC_SHARDING`` (table_column_wise by default: the one of the two
tower sharding types whose intra-host part, column_wise, runs on CPU), then
DistributedModelParallel and one forward. Every rank prints OK or FAILED with the error
(BENCHMARKS.md records what torchrec 1.8.0 does).
"""

from __future__ import annotations

import os

import torch
import torch.distributed as dist
from torch import nn
from torchrec.distributed.embedding_tower_sharding import EmbeddingTowerCollectionSharder
from torchrec.distributed.model_parallel import DistributedModelParallel
from torchrec.distributed.planner import EmbeddingShardingPlanner, ParameterConstraints, Topology
from torchrec.modules.embedding_configs import EmbeddingBagConfig
from torchrec.modules.embedding_modules import EmbeddingBagCollection
from torchrec.modules.embedding_tower import EmbeddingTower, EmbeddingTowerCollection
from torchrec.sparse.jagged_tensor import KeyedJaggedTensor, KeyedTensor


class _Interaction(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(8, 4)

    def forward(self, pooled: KeyedTensor) -> torch.Tensor:
        return self.linear(pooled.values())


def _tower(names: list[str]) -> EmbeddingTower:
    tables = [EmbeddingBagConfig(name=f"t_{n}", embedding_dim=4, num_embeddings=10, feature_names=[n])
              for n in names]
    return EmbeddingTower(embedding_module=EmbeddingBagCollection(tables=tables, device=torch.device("meta")),
                          interaction_module=_Interaction())


class _Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.towers = EmbeddingTowerCollection(towers=[_tower(["a", "b"]), _tower(["c", "d"])])

    def forward(self, kjt: KeyedJaggedTensor) -> torch.Tensor:
        return self.towers(kjt)


def main() -> None:
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    sharding = os.environ.get("ETC_SHARDING", "table_column_wise")
    try:
        model = _Model()
        topology = Topology(world_size=world, compute_device="cpu",
                            local_world_size=int(os.environ.get("LOCAL_WORLD_SIZE", world)))
        constraints = {f"t_{n}": ParameterConstraints(sharding_types=[sharding]) for n in "abcd"}
        sharders = [EmbeddingTowerCollectionSharder()]
        plan = EmbeddingShardingPlanner(topology=topology, constraints=constraints).collective_plan(
            model, sharders, dist.GroupMember.WORLD)
        dmp = DistributedModelParallel(model, device=torch.device("cpu"), plan=plan, sharders=sharders)
        kjt = KeyedJaggedTensor.from_lengths_sync(list("abcd"), torch.arange(8) % 10,
                                                  torch.ones(8, dtype=torch.long))
        print(rank, "OK", tuple(dmp(kjt).shape))
    except Exception as exc:  # the experiment's answer is the error itself
        print(rank, "FAILED", type(exc).__name__, str(exc)[:400])
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
