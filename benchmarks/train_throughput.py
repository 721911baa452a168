"""Training samples/s of each preset against a torchrec.models.dlrm.DLRM reference loop.

Same data (synthetic Criteo-like: 13 dense, 26 tables x 1M rows, dim 64), same batch size, same
sharding (DistributedModelParallel, one gloo process, torchrec's planner), same optimizers
(fused row-wise Adagrad on embeddings in backward, Adam on dense parts), in the same run. The
reference and autorec's dlrm are timed in alternating rounds (so neither gains from going
second), then the other presets; ratios are against the mean of the reference rounds.

    .venv/bin/python benchmarks/train_throughput.py [--batch-size 4096] [--steps 20] [--rows 1000000]
"""

from __future__ import annotations

import argparse
import gc
import logging
import os
import platform
import time
import warnings
from collections.abc import Callable

import torch
from torchrec.datasets.utils import Batch
from torchrec.models.dlrm import DLRM
from torchrec.modules.embedding_modules import EmbeddingBagCollection
from torchrec.optim.apply_optimizer_in_backward import apply_optimizer_in_backward
from torchrec.optim.keyed import CombinedOptimizer, KeyedOptimizerWrapper
from torchrec.optim.optimizers import in_backward_optimizer_filter
from torchrec.optim.rowwise_adagrad import RowWiseAdagrad

from autorec.data import load_dataset
from autorec.models import embedding_configs
from autorec.presets import PRESETS, preset
from autorec.train.distributed import shard
from autorec.train.trainer import TrainConfig, Trainer


def reference_step(spec, lr: float, embedding_lr: float) -> Callable[[Batch], float]:
    """A plain torchrec DLRM training step with the same sizes and optimizers as ``spec``."""
    torch.manual_seed(0)
    model = DLRM(embedding_bag_collection=EmbeddingBagCollection(
                     tables=embedding_configs(spec), device=torch.device("meta")),
                 dense_in_features=spec.n_dense,
                 dense_arch_layer_sizes=[*spec.dense_arch, spec.dim],
                 over_arch_layer_sizes=[*spec.over_arch, 1])
    apply_optimizer_in_backward(RowWiseAdagrad, model.sparse_arch.parameters(), {"lr": embedding_lr})
    dmp = shard(model, torch.device("cpu"))
    dense = KeyedOptimizerWrapper(dict(in_backward_optimizer_filter(dmp.named_parameters())),
                                  lambda params: torch.optim.Adam(params, lr=lr))
    optimizer = CombinedOptimizer([dmp.fused_optimizer, dense])

    def step(batch: Batch) -> float:
        logits = dmp(batch.dense_features, batch.sparse_features).squeeze(-1)
        loss = torch.nn.functional.binary_cross_entropy_with_logits(logits, batch.labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss.item()

    step.model = dmp  # keep it alive while timing
    return step


def time_steps(step: Callable[[Batch], float], batches: list[Batch], steps: int) -> float:
    for batch in batches[:3]:
        step(batch)
    t0 = time.perf_counter()
    for i in range(steps):
        step(batches[i % len(batches)])
    return steps * batches[0].labels.numel() / (time.perf_counter() - t0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--batch-size", type=int, default=4096)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument("--presets", default=",".join(PRESETS))
    parser.add_argument("--rounds", type=int, default=2, help="alternating reference/dlrm rounds")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    logging.getLogger().setLevel(logging.ERROR)
    logging.getLogger("torchrec").setLevel(logging.ERROR)
    data = load_dataset("synthetic", preset="criteo_like", rows=args.rows,
                        num_samples=max(10 * args.batch_size, 10_000) * 10 // 8)
    source = data.batches("train", args.batch_size, shuffle=True)
    batches = [b for b, _ in zip(source, range(10), strict=False)]
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads; batch {args.batch_size}, {args.steps} timed steps; "
          f"26 tables x {args.rows:,} rows x dim {args.dim}")
    config = TrainConfig(batch_size=args.batch_size, progress=False)
    rows: list[tuple[str, float]] = []

    def measure(name: str, make: Callable[[], Callable[[Batch], float]]) -> None:
        step = make()
        rows.append((name, time_steps(step, batches, args.steps)))
        print(f"  {name}: {rows[-1][1]:,.0f} samples/s", flush=True)
        del step
        gc.collect()

    spec = preset("dlrm", data.schema, dim=args.dim)

    def reference() -> Callable[[Batch], float]:
        return reference_step(spec, config.dense_lr, config.embedding_lr)

    for r in range(args.rounds):
        measure(f"reference torchrec DLRM (round {r + 1})", reference)
        measure(f"autorec dlrm (round {r + 1})", lambda: Trainer(spec, data, config).train_step)
    for name in args.presets.split(","):
        if name != "dlrm":
            other = preset(name, data.schema, dim=args.dim)
            measure(f"autorec {name}", lambda other=other: Trainer(other, data, config).train_step)
    references = [rate for name, rate in rows if name.startswith("reference")]
    ours = [rate for name, rate in rows if name.startswith("autorec dlrm")]
    baseline = sum(references) / len(references)
    print(f"\nautorec dlrm / reference (means over {args.rounds} rounds): "
          f"{sum(ours) / len(ours) / baseline:.2f}x")
    print("\n| model | samples/s | vs reference |\n|---|---|---|")
    for name, rate in rows:
        print(f"| {name} | {rate:,.0f} | {rate / baseline:.2f}x |")


if __name__ == "__main__":
    main()
