"""Training samples/s of each preset against a torchrec.models.dlrm.DLRM reference loop.

Same data (synthetic Criteo-like: 13 dense, 26 tables x 1M rows, dim 64), same batch size, same
sharding (DistributedModelParallel, one gloo process, torchrec's planner), same optimizers
(fused row-wise Adagrad on embeddings in backward, Adam on dense parts), in the same run. The
reference and autorec's dlrm are timed in alternating rounds (so neither gains from going
second), then the other presets; ratios are against the mean of the reference rounds.

The reference and autorec's dlrm are both built before timing starts and then timed in many short
alternating rounds (``--rounds`` of ``--steps`` each), so slow drifts of the machine (other
processes, thermal state, page cache) fall on both alike; their ratio is the median of the
per-round ratios, with the spread of those ratios shown beside it.

    .venv/bin/python -m benchmarks.train_throughput [--batch-size 4096] [--steps 5] [--rounds 12]
    # -> dlrm_vs_torchrec (median of the paired rounds' ratios) and the torchrec_* figures of
    #    benchmarks/results/throughput.json
"""

from __future__ import annotations

import argparse
import gc
import logging
import os
import platform
import statistics
import time
import warnings
from collections.abc import Callable
from pathlib import Path

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
from autorec.train.records import dense_optimizer
from autorec.train.trainer import TrainConfig, Trainer
from benchmarks.results_file import RESULTS, merge_results


def reference_step(spec, lr: float, embedding_lr: float) -> Callable[[Batch], float]:
    """A plain torchrec DLRM training step with the same sizes and optimizers as ``spec`` (its
    Adam in torch's fused form where the Trainer's is: the same optimizer, at its best)."""
    torch.manual_seed(0)
    model = DLRM(embedding_bag_collection=EmbeddingBagCollection(
                     tables=embedding_configs(spec), device=torch.device("meta")),
                 dense_in_features=spec.n_dense,
                 dense_arch_layer_sizes=[*spec.dense_arch, spec.dim],
                 over_arch_layer_sizes=[*spec.over_arch, 1])
    apply_optimizer_in_backward(RowWiseAdagrad, model.sparse_arch.parameters(), {"lr": embedding_lr})
    dmp = shard(model, torch.device("cpu"))
    dense = KeyedOptimizerWrapper(dict(in_backward_optimizer_filter(dmp.named_parameters())),
                                  lambda params: dense_optimizer("adam", params, lr=lr))
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


def time_steps(step: Callable[[Batch], float], batches: list[Batch], steps: int, warmup: int = 3,
               start: int = 0) -> float:
    """Samples/s over ``steps`` steps after ``warmup`` untimed ones, cycling through ``batches``."""
    for batch in batches[:warmup]:
        step(batch)
    t0 = time.perf_counter()
    for i in range(steps):
        step(batches[(start + i) % len(batches)])
    return steps * batches[0].labels.numel() / (time.perf_counter() - t0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--batch-size", type=int, default=4096)
    parser.add_argument("--steps", type=int, default=5, help="timed steps per round")
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument("--presets", default=",".join(PRESETS))
    parser.add_argument("--rounds", type=int, default=12, help="alternating reference/dlrm rounds")
    parser.add_argument("--json", default=str(RESULTS / "throughput.json"),
                        help="merge the flat figures (dlrm_vs_torchrec, ...) into this file")
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
    spec = preset("dlrm", data.schema, dim=args.dim)
    reference = reference_step(spec, config.dense_lr, config.embedding_lr)
    ours = Trainer(spec, data, config).train_step
    pairs: list[tuple[float, float]] = []
    for r in range(args.rounds):
        # Alternate which goes first, and feed both the same batches in a round.
        order = [(reference, 0), (ours, 1)] if r % 2 == 0 else [(ours, 1), (reference, 0)]
        rates = [0.0, 0.0]
        for step, slot in order:
            rates[slot] = time_steps(step, batches, args.steps, warmup=1 if r else 3, start=r * args.steps)
        pairs.append((rates[0], rates[1]))
        print(f"  round {r + 1}: reference {rates[0]:,.0f}, autorec dlrm {rates[1]:,.0f} samples/s "
              f"({rates[1] / rates[0]:.2f}x)", flush=True)
    del reference, ours
    gc.collect()
    ratios = sorted(o / ref for ref, o in pairs)
    median = statistics.median(ratios)
    ref_rate = statistics.median(ref for ref, _ in pairs)
    our_rate = statistics.median(o for _, o in pairs)
    rows: list[tuple[str, float]] = [("reference torchrec DLRM (median of rounds)", ref_rate),
                                     ("autorec dlrm (median of rounds)", our_rate)]
    for name in args.presets.split(","):
        if name != "dlrm":
            step = Trainer(preset(name, data.schema, dim=args.dim), data, config).train_step
            rows.append((f"autorec {name}", time_steps(step, batches, max(args.steps, 10))))
            print(f"  autorec {name}: {rows[-1][1]:,.0f} samples/s", flush=True)
            del step
            gc.collect()
    print(f"\nautorec dlrm / reference: median of {args.rounds} paired rounds {median:.2f}x "
          f"(rounds range {ratios[0]:.2f}x..{ratios[-1]:.2f}x; "
          f"{sum(r >= 1.0 for r in ratios)} of {len(ratios)} rounds >= 1.0x)")
    print("\n| model | samples/s | vs reference |\n|---|---|---|")
    for name, rate in rows:
        print(f"| {name} | {rate:,.0f} | {rate / ref_rate:.2f}x |")
    figures = {"dlrm_vs_torchrec": median, "dlrm_vs_torchrec_min": ratios[0],
               "dlrm_vs_torchrec_max": ratios[-1], "torchrec_rounds": args.rounds,
               "torchrec_reference_samples_per_s": ref_rate, "torchrec_dlrm_samples_per_s": our_rate,
               "torchrec_batch_size": args.batch_size, "torchrec_dim": args.dim, "torchrec_rows": args.rows}
    figures |= {f"torchrec_{name.split()[1]}_samples_per_s": rate for name, rate in rows[2:]}
    merge_results(Path(args.json), figures, prefix="torchrec")


if __name__ == "__main__":
    main()
