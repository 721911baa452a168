"""Does structured pruning cut the training step time in proportion to the FLOPs it removes?

For each block kind (dlrm, dcnv2, wukong, dhen) a full-size model is built at sizes where the
dense part dominates the step (wide MLPs and interaction layers, batch 1024, D = 64, eight small
embedding tables: the lookups are a small, fixed share of the step), then pruned with
:func:`autorec.growth.ops.prune` to ``shrink(spec, ratio)`` at each ratio. Every model trains on
the same fixed real batch (the synthetic dataset), one step = forward + backward + Adagrad step
over all parameters. All models of a kind are built first and timed in alternating rounds
(``--rounds`` of ``--steps`` steps each, the order reversed every other round), so a drift of
the (shared) machine falls on all of them alike; per model the minimum and the median of the
per-step times (process CPU time on the CPU: wall time would count the other tenants'
work; wall time on CUDA) are kept. Printed per pruned model: the FLOPs ratio (training FLOPs
of the dense part per sample, :func:`autorec.costs.arch_cost`), the step-time ratio (of the
minima; of the medians), and saved = (1 - time ratio) / (1 - FLOPs ratio), 1.0 when the time
saved is exactly in proportion to the FLOPs removed (target: within 0.7 .. 1.3).

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/growth_step_time.py [--kinds dlrm,dcnv2,wukong,dhen]
        [--ratios 0.75,0.5,0.25] [--batch-size 1024] [--steps 5] [--rounds 6] [--threads 1]
        [--device cpu|cuda]

The CUDA path (``--device cuda``, CUDA-synchronised wall time) is written but untested here.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time
from collections.abc import Callable

import torch
from torch import nn
from torchrec.datasets.utils import Batch

from autorec.arch import ArchSpec, CrossConfig, DhenConfig, DotConfig, TableSpec, WukongConfig
from autorec.costs import arch_cost
from autorec.data import load_dataset
from autorec.growth import prune, shrink
from autorec.models import build_model

DIM = 64
NUM_TABLES = 8
OVER_ARCH = (1024, 1024, 512)


def full_specs() -> dict[str, ArchSpec]:
    """Full-size models whose dense part dominates a step."""
    tables = tuple(TableSpec(name=f"t_cat_{i}", features=(f"cat_{i}",), num_embeddings=1000, dim=DIM)
                   for i in range(NUM_TABLES))

    def spec(name: str, *layers: object, over_arch: tuple[int, ...] = OVER_ARCH) -> ArchSpec:
        return ArchSpec(name=name, dim=DIM, n_dense=13, dense_arch=(512, 256), tables=tables,
                        layers=layers, over_arch=over_arch)  # type: ignore[arg-type]

    wukong = WukongConfig(n_fm=16, n_lcb=16, rank=16, mlp=(1024,))
    dhen = DhenConfig(modules=("dot", "attention", "dcn"), ensemble="concat", n_out=8)
    return {"dlrm": spec("dlrm", DotConfig()),
            "dcnv2": spec("dcnv2", CrossConfig(num_layers=3, rank=0)),
            "wukong": spec("wukong", wukong, wukong, over_arch=(1024, 512)),
            "dhen": spec("dhen", dhen, dhen, over_arch=(1024, 512))}


def training_step(model: nn.Module, batch: Batch, device: torch.device) -> Callable[[], None]:
    optimizer = torch.optim.Adagrad(model.parameters(), lr=0.01)
    loss_fn = nn.BCEWithLogitsLoss()
    model.train()

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(model(batch.dense_features, batch.sparse_features), batch.labels)
        loss.backward()
        optimizer.step()
        if device.type == "cuda":
            torch.cuda.synchronize()

    return step


def clock(device: torch.device) -> Callable[[], float]:
    return time.perf_counter if device.type == "cuda" else time.process_time


def time_alternating(steps: dict[str, Callable[[], None]], rounds: int, per_round: int,
                     device: torch.device) -> dict[str, list[float]]:
    """Per model, the per-step times of all rounds (models alternate; order flips each round)."""
    now = clock(device)
    times: dict[str, list[float]] = {name: [] for name in steps}
    for step in steps.values():  # warm-up: allocator, lazy init
        step()
        step()
    names = list(steps)
    for r in range(rounds):
        for name in names if r % 2 == 0 else reversed(names):
            for _ in range(per_round):
                t0 = now()
                steps[name]()
                times[name].append(now() - t0)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kinds", default="dlrm,dcnv2,wukong,dhen")
    parser.add_argument("--ratios", default="0.75,0.5,0.25")
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    specs = full_specs()
    kinds = args.kinds.split(",")
    unknown = [k for k in kinds if k not in specs]
    if unknown:
        parser.error(f"--kinds: unknown kind {unknown[0]!r}; expected some of {', '.join(specs)}")
    ratios = [float(r) for r in args.ratios.split(",")]
    data = load_dataset("synthetic", num_samples=4 * args.batch_size, num_dense=13,
                        num_tables=NUM_TABLES, rows=1000, seed=0)
    batch = next(iter(data.batches("train", args.batch_size, shuffle=False))).to(device)
    print(f"# {platform.machine()} {platform.processor() or ''}, torch {torch.__version__}, "
          f"{args.threads} thread(s), device {device}, batch {args.batch_size}, "
          f"{args.rounds} rounds x {args.steps} steps; "
          f"{'process CPU' if device.type == 'cpu' else 'wall'} time per step")
    print(f"{'kind':8} {'ratio':>5} {'GFLOP/step':>10} {'min ms':>8} {'med ms':>8} "
          f"{'FLOPs ratio':>11} {'time ratio min':>14} {'time ratio med':>14} {'saved':>6}")
    for kind in kinds:
        full = specs[kind]
        torch.manual_seed(0)
        model = build_model(full).to(device)
        models = {"1.0": (full, model)}
        for ratio in ratios:
            small = shrink(full, ratio)
            models[f"{ratio:g}"] = (small, prune(model, full, small).to(device))
        steps = {name: training_step(m, batch, device) for name, (_, m) in models.items()}
        times = time_alternating(steps, args.rounds, args.steps, device)
        base_flops = arch_cost(full).train_flops
        base_min, base_med = min(times["1.0"]), statistics.median(times["1.0"])
        for name, (spec, _) in models.items():
            flops = arch_cost(spec).train_flops
            t_min, t_med = min(times[name]), statistics.median(times[name])
            f_ratio, r_min, r_med = flops / base_flops, t_min / base_min, t_med / base_med
            saved = (1 - r_min) / (1 - f_ratio) if f_ratio < 1 else float("nan")
            print(f"{kind:8} {name:>5} {flops * args.batch_size / 1e9:10.2f} {t_min * 1e3:8.1f} "
                  f"{t_med * 1e3:8.1f} {f_ratio:11.3f} {r_min:14.3f} {r_med:14.3f} {saved:6.2f}",
                  flush=True)


if __name__ == "__main__":
    main()
