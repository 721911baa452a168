"""Bytes crossing ranks per training step and step time: the tower model against the flat model,
both under the same table placement, in W real gloo processes.

    OMP_NUM_THREADS=1 .venv/bin/torchrun --standalone --nproc-per-node 4 benchmarks/towers_comm.py
    OMP_NUM_THREADS=1 .venv/bin/torchrun --standalone --nproc-per-node 4 benchmarks/towers_comm.py --n-out 2

Data: synthetic ``groups4`` (16 tables, 4 planted groups); towers = the planted groups (the
partitioner's quality is benchmarks/towers_quality.py), each a DLRM dot block compressed to
``n_out`` vectors. Per step every rank trains on its B/W samples of a global batch of B
(:class:`autorec.towers.sharding.TowerTrainer`). The bytes are counted by
:class:`~autorec.towers.sharding.CommMeter` from the tensors handed to torch.distributed's
collectives (all ranks summed, per step): float all-to-all (pooled embeddings or tower outputs,
forward and backward), int all-to-all (ids), all-reduce (dense gradients). Flat and tower steps
alternate in one run (timings paired); each step is timed between barriers on rank 0, and the
process CPU time is summed over ranks. As a reference, torchrec's own DistributedModelParallel
with a table_wise plan runs the flat model for a few steps under the same meter (its dense
gradients go through DDP's C++ reducer, which the meter does not see). Rank 0 prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

import torch
import torch.distributed as dist

from autorec.arch import DotConfig, TowerSpec
from autorec.data.synthetic import load_synthetic
from autorec.models import RecModel
from autorec.presets import preset
from autorec.towers.sharding import CommMeter, TowerParallel, TowerTrainer, predicted_bytes_per_sample
from autorec.train.partition import rank_batches


def _torchrec_flat_bytes(spec: Any, batches: list[Any], device: torch.device) -> dict[str, float]:
    """Per-step bytes of torchrec's table_wise DistributedModelParallel on the flat model."""
    from torchrec.distributed.embeddingbag import EmbeddingBagCollectionSharder
    from torchrec.distributed.planner import EmbeddingShardingPlanner, ParameterConstraints, Topology

    from autorec.train.distributed import shard

    model = RecModel(spec, device=torch.device("meta"))
    world = dist.get_world_size()
    planner = EmbeddingShardingPlanner(
        topology=Topology(world_size=world, compute_device="cpu", local_world_size=world),
        constraints={t.name: ParameterConstraints(sharding_types=["table_wise"]) for t in spec.tables})
    plan = planner.collective_plan(model, [EmbeddingBagCollectionSharder()], dist.GroupMember.WORLD)
    dmp = shard(model, device, plan=plan)
    meter = CommMeter()
    for i, batch in enumerate(batches):
        if i == 1:  # the first step also sets up torchrec's comms
            meter.reset()
        with meter.active():
            logits = dmp(batch.dense_features, batch.sparse_features)
            torch.nn.functional.binary_cross_entropy_with_logits(logits, batch.labels).backward()
    return _summed(meter, len(batches) - 1)


def _summed(meter: CommMeter, steps: int) -> dict[str, float]:
    keys = ("all_to_all.float", "all_to_all.int", "all_reduce")
    sent = torch.tensor([float(meter.total(k)) for k in keys], dtype=torch.float64)
    dist.all_reduce(sent)
    return {k: float(v) / steps for k, v in zip(keys, sent.tolist(), strict=True)}


def build_trainers(ds: Any, dim: int, n_out: int, seed: int) -> dict[str, TowerTrainer]:
    """The flat dlrm preset and its tower twin (the planted groups, a dot module compressed to
    ``n_out`` vectors), both placed by the towers, each in a :class:`TowerTrainer`."""
    flat = preset("dlrm", ds.schema, dim=dim)
    towers = TowerSpec(groups=ds.feature_groups(), module=DotConfig(n_passthrough=0), n_out=n_out)
    towered = flat.replace(towers=towers)
    towered = towered.replace(layers=(DotConfig(n_passthrough=towered.num_inputs),))
    torch.manual_seed(seed)
    return {"flat": TowerTrainer(TowerParallel(RecModel(flat), towers)),
            "towers": TowerTrainer(TowerParallel(RecModel(towered)))}


def run(steps: int, batch_size: int, n_out: int, dim: int, num_samples: int, seed: int) -> dict[str, Any]:
    torch.set_num_threads(1)
    rank, world = dist.get_rank(), dist.get_world_size()
    ds = load_synthetic(seed=seed, preset="groups4", num_samples=num_samples)
    trainers = build_trainers(ds, dim, n_out, seed)
    flat, towered = trainers["flat"].model.spec, trainers["towers"].model.spec
    towers = towered.towers
    batches = list(rank_batches(ds, "train", batch_size, shuffle=True, seed=seed, epoch=0, rank=rank,
                                world_size=world))
    meters = {m: CommMeter() for m in trainers}
    wall: dict[str, list[float]] = {m: [] for m in trainers}
    cpu = {m: 0.0 for m in trainers}
    losses: dict[str, list[float]] = {m: [] for m in trainers}
    samples = 0  # global samples over the counted steps (the epoch's last batch is smaller)
    for step in range(steps + 1):
        batch = batches[step % len(batches)]
        order = ("flat", "towers") if step % 2 == 0 else ("towers", "flat")
        for mode in order:
            dist.barrier()
            t0, c0 = time.perf_counter(), time.process_time()
            with meters[mode].active():
                loss = trainers[mode].step(batch.dense_features, batch.sparse_features, batch.labels)
            dist.barrier()
            if step == 0:  # warm-up, not counted
                meters[mode].reset()
                continue
            wall[mode].append(time.perf_counter() - t0)
            samples += len(batch.labels) if mode == "flat" else 0
            cpu[mode] += time.process_time() - c0
            losses[mode].append(loss)
    sent = {m: _summed(meters[m], steps) for m in trainers}
    cpu_total = torch.tensor([cpu["flat"], cpu["towers"]], dtype=torch.float64)
    dist.all_reduce(cpu_total)
    reference = _torchrec_flat_bytes(flat, batches[:4], torch.device("cpu"))
    global_samples = torch.tensor([float(samples)], dtype=torch.float64)
    dist.all_reduce(global_samples)
    per_step = float(global_samples) / steps
    predicted = {m: per_step * 2 * predicted_bytes_per_sample(towered, world, m) for m in trainers}
    return {
        "world_size": world, "global_batch": batch_size, "mean_global_batch": per_step, "steps": steps,
        "dim": dim, "n_out": n_out,
        "features": len(flat.feature_names), "towers": towers.num_towers,
        "bytes_per_step": sent, "predicted_float_all_to_all_per_step": predicted,
        "float_all_to_all_ratio_flat_over_towers": sent["flat"]["all_to_all.float"]
        / sent["towers"]["all_to_all.float"],
        "predicted_ratio": predicted["flat"] / predicted["towers"],
        "total_ratio_flat_over_towers": sum(sent["flat"].values()) / sum(sent["towers"].values()),
        "torchrec_table_wise_flat_bytes_per_step": reference,
        "step_s": {m: {"median": statistics.median(w), "min": min(w)} for m, w in wall.items()},
        "step_time_ratio_towers_over_flat_median": statistics.median(
            [t / f for t, f in zip(wall["towers"], wall["flat"], strict=True)]),
        "cpu_s_per_step_all_ranks": {m: float(v) / steps for m, v in zip(trainers, cpu_total.tolist(),
                                                                           strict=True)},
        "mean_loss_last_20": {m: statistics.mean(v[-20:]) for m, v in losses.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--batch-size", type=int, default=4096, help="global batch")
    parser.add_argument("--n-out", type=int, default=1)
    parser.add_argument("--dim", type=int, default=16)
    parser.add_argument("--num-samples", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    dist.init_process_group("gloo")
    result = run(args.steps, args.batch_size, args.n_out, args.dim, args.num_samples, args.seed)
    if dist.get_rank() == 0:
        print(json.dumps(result))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
