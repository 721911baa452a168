"""Run by torchrun from test_sharding.py: every rank checks TowerParallel against the
single-process model on the same global batch (logits, every gradient) and measures the bytes
that cross ranks, for the tower model and its flat twin; rank 0 writes a JSON report."""

from __future__ import annotations

import json
import sys
import time

import torch
import torch.distributed as dist

from autorec.arch import DotConfig, TowerSpec
from autorec.data.synthetic import load_synthetic
from autorec.models import RecModel
from autorec.presets import preset
from autorec.towers.link import ThrottledLink
from autorec.towers.sharding import CommMeter, TowerParallel, TowerTrainer, predicted_bytes_per_sample
from autorec.train.partition import rank_batches

GLOBAL_BATCH = 30  # not a multiple of 4: uneven parts


def _check(model: RecModel, placement: TowerSpec | None, batch_global, batch_local, start: int) -> dict:
    torch.manual_seed(0)
    tp = TowerParallel(model, placement)
    trainer = TowerTrainer(tp)
    meter = CommMeter()
    with meter.active():
        trainer.backward(batch_local.dense_features, batch_local.sparse_features, batch_local.labels)
    with torch.no_grad():
        local_logits = tp(batch_local.dense_features, batch_local.sparse_features)
    # The single-process reference on the whole global batch.
    model.zero_grad()
    logits = model(batch_global.dense_features, batch_global.sparse_features)
    torch.testing.assert_close(local_logits, logits[start:start + len(local_logits)].detach(),
                               rtol=1e-5, atol=1e-5)
    torch.nn.functional.binary_cross_entropy_with_logits(logits, batch_global.labels).backward()
    checked = 0
    for part in ("dense_arch", "layers", "over_arch"):
        for (name, mine), (_, ref) in zip(getattr(tp, part).named_parameters(),
                                          getattr(model, part).named_parameters(), strict=True):
            torch.testing.assert_close(mine.grad, ref.grad, rtol=1e-4, atol=1e-6, msg=f"{part}.{name}")
            checked += 1
    for k in tp.mine:
        if tp.mode == "towers":
            for (name, mine), (_, ref) in zip(tp.towers[str(k)].named_parameters(),
                                              model.towers.towers[k].named_parameters(), strict=True):
                torch.testing.assert_close(mine.grad, ref.grad, rtol=1e-4, atol=1e-6, msg=f"tower{k}.{name}")
                checked += 1
    if tp.sparse_arch is not None:
        for name, bag in tp.sparse_arch.embedding_bags.items():
            torch.testing.assert_close(bag.weight.grad, model.sparse_arch.embedding_bags[name].weight.grad,
                                       rtol=1e-4, atol=1e-6, msg=name)
            checked += 1
    sent = torch.tensor([meter.total("all_to_all.float"), meter.total("all_to_all.int"),
                         meter.total("all_reduce")], dtype=torch.float64)
    dist.all_reduce(sent)
    return {"checked_parameters": checked, "float_all_to_all": int(sent[0]), "int_all_to_all": int(sent[1]),
            "all_reduce": int(sent[2]), "max_logit_diff_after_steps": _train_alike(tp, trainer, model, start)}


def _train_alike(tp: TowerParallel, trainer: TowerTrainer, model: RecModel, start: int) -> float:
    """A few optimizer steps sharded and in one process (same optimizers, same global batches):
    the largest logit difference afterwards on this rank's samples of a fresh batch."""
    ds = load_synthetic(seed=0, preset="groups4", num_samples=400)
    world, rank = dist.get_world_size(), dist.get_rank()
    dense_params = [p for n, p in model.named_parameters() if not n.startswith("sparse_arch")]
    reference = [torch.optim.Adam(dense_params, lr=1e-3),
                 torch.optim.Adagrad(list(model.sparse_arch.parameters()), lr=0.05)]
    for step in range(4):
        local = next(iter(rank_batches(ds, "train", GLOBAL_BATCH, shuffle=True, seed=step, epoch=0, rank=rank,
                                       world_size=world)))
        whole = next(iter(rank_batches(ds, "train", GLOBAL_BATCH, shuffle=True, seed=step, epoch=0, rank=0,
                                       world_size=1)))
        trainer.step(local.dense_features, local.sparse_features, local.labels)
        for opt in reference:
            opt.zero_grad()
        torch.nn.functional.binary_cross_entropy_with_logits(
            model(whole.dense_features, whole.sparse_features), whole.labels).backward()
        for opt in reference:
            opt.step()
    local = next(iter(rank_batches(ds, "val", GLOBAL_BATCH, shuffle=False, seed=0, epoch=0, rank=rank,
                                   world_size=world)))
    whole = next(iter(rank_batches(ds, "val", GLOBAL_BATCH, shuffle=False, seed=0, epoch=0, rank=0,
                                   world_size=1)))
    with torch.no_grad():
        mine = tp(local.dense_features, local.sparse_features)
        ref = model(whole.dense_features, whole.sparse_features)
    offset = sum(len(next(iter(rank_batches(ds, "val", GLOBAL_BATCH, shuffle=False, seed=0, epoch=0, rank=r,
                                            world_size=world))).labels) for r in range(rank))
    diff = torch.tensor([float((mine - ref[offset:offset + len(mine)]).abs().max())])
    dist.all_reduce(diff, op=dist.ReduceOp.MAX)
    return float(diff)


def main(out_path: str) -> None:
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.set_num_threads(1)
    ds = load_synthetic(seed=0, preset="groups4", num_samples=400)
    flat = preset("dlrm", ds.schema, dim=8)
    towers = TowerSpec(groups=ds.feature_groups(), module=DotConfig(n_passthrough=0), n_out=2)
    towered = flat.replace(towers=towers, layers=(DotConfig(n_passthrough=9),))
    batch_global = next(iter(rank_batches(ds, "train", GLOBAL_BATCH, shuffle=False, seed=0, epoch=0,
                                          rank=0, world_size=1)))
    batch_local = next(iter(rank_batches(ds, "train", GLOBAL_BATCH, shuffle=False, seed=0, epoch=0,
                                         rank=rank, world_size=world)))
    start = sum(len(next(iter(rank_batches(ds, "train", GLOBAL_BATCH, shuffle=False, seed=0, epoch=0, rank=r,
                                           world_size=world))).labels) for r in range(rank))
    report = {"world_size": world, "global_batch": GLOBAL_BATCH}
    for name, spec, placement in (("towers", towered, None), ("flat", flat, towers)):
        torch.manual_seed(0)
        model = RecModel(spec)
        report[name] = _check(model, placement, batch_global, batch_local, start)
        report[name]["predicted_float_all_to_all"] = 2 * GLOBAL_BATCH * predicted_bytes_per_sample(
            towered if name == "towers" else flat.replace(towers=towers), world, name)
    # One step of the flat model on a link throttled to 0.01 GB/s (autorec.towers.link).
    link = ThrottledLink(gbps=0.01)
    torch.manual_seed(0)
    trainer = TowerTrainer(TowerParallel(RecModel(flat), towers))
    dist.barrier()
    t0 = time.perf_counter()
    with link.active():
        trainer.step(batch_local.dense_features, batch_local.sparse_features, batch_local.labels)
    report["throttled"] = {"bytes": link.total(), "waited": link.waited, "wall": time.perf_counter() - t0}
    if rank == 0:
        with open(out_path, "w") as f:
            json.dump(report, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
