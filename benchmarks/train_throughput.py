"""Training samples/s of each preset against a torchrec.models.dlrm.DLRM reference loop.

Same data (synthetic Criteo-like: 13 dense, 26 tables x 1M rows, dim 64), same batch size, same
sharding (DistributedModelParallel, one gloo process, torchrec's planner), same optimizers
(fused row-wise Adagrad on embeddings in backward, Adam with the Trainer's weight decay on dense
parts), in the same run. The reference is torchrec as a user writes it, in fp32, and the same
loop with its forward under bf16 autocast; autorec's dlrm is timed at the Trainer's defaults
(fp32) and with ``train.autocast: bf16`` (:mod:`autorec.train.autocast`), then every other
preset both ways. ``dlrm_vs_torchrec`` and ``dlrm_bf16_vs_torchrec`` are against the fp32
reference (the issue's), ``dlrm_bf16_vs_torchrec_bf16`` like for like.

The first three are built before timing starts and then timed in many short rounds (``--rounds`` of
``--steps`` each, the order rotated every round, the same batches for all in a round), so slow
drifts of the machine (other processes, thermal state, page cache) fall on all alike; each ratio
is the median of the per-round ratios, with the spread of those ratios shown beside it. The
bf16 reference and a second bf16 dlrm are then timed the same way in rounds of their own (a
fourth model of these tables does not fit beside the three in 24 GiB).

    .venv/bin/python -m benchmarks.train_throughput [--batch-size 4096] [--steps 5] [--rounds 12]
    # -> dlrm_vs_torchrec (median of the rounds' ratios), dlrm_bf16_vs_torchrec,
    #    dlrm_bf16_vs_torchrec_bf16 and the torchrec_* figures of benchmarks/results/throughput.json
"""

from __future__ import annotations

import argparse
import dataclasses
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
from autorec.train import cpu_lookup
from autorec.train.distributed import shard
from autorec.train.records import dense_optimizer
from autorec.train.trainer import TrainConfig, Trainer
from benchmarks.results_file import RESULTS, merge_results


def reference_step(spec, lr: float, embedding_lr: float, weight_decay: float = 0.0,
                   bf16: bool = False) -> Callable[[Batch], float]:
    """A plain torchrec DLRM training step with the same sizes and optimizers as ``spec`` (its
    Adam in torch's fused form where the Trainer's is: the same optimizer, at its best), its
    tables on fbgemm's own fused backward as torchrec gives them (not :mod:`autorec.train.cpu_lookup`'s);
    with ``bf16``, its forward under ``torch.autocast(bfloat16)`` as a user adds it (the loss
    from fp32 logits, as the Trainer's)."""
    torch.manual_seed(0)
    model = DLRM(embedding_bag_collection=EmbeddingBagCollection(
                     tables=embedding_configs(spec), device=torch.device("meta")),
                 dense_in_features=spec.n_dense,
                 dense_arch_layer_sizes=[*spec.dense_arch, spec.dim],
                 over_arch_layer_sizes=[*spec.over_arch, 1])
    apply_optimizer_in_backward(RowWiseAdagrad, model.sparse_arch.parameters(), {"lr": embedding_lr})
    dmp = shard(model, torch.device("cpu"))
    for tbe in cpu_lookup.fused_tables(dmp):  # torchrec's own kernels: fbgemm's fused backward
        cpu_lookup.restore(tbe)
    dense = KeyedOptimizerWrapper(dict(in_backward_optimizer_filter(dmp.named_parameters())),
                                  lambda params: dense_optimizer("adam", params, lr=lr,
                                                                 weight_decay=weight_decay))
    optimizer = CombinedOptimizer([dmp.fused_optimizer, dense])

    def step(batch: Batch) -> float:
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            logits = dmp(batch.dense_features, batch.sparse_features).squeeze(-1)
        loss = torch.nn.functional.binary_cross_entropy_with_logits(logits.float(), batch.labels)
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
    parser.add_argument("--rounds", type=int, default=12,
                        help="rounds of the reference and autorec's dlrm (fp32, bf16)")
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
    bf16 = dataclasses.replace(config, autocast="bf16")
    spec = preset("dlrm", data.schema, dim=args.dim)
    steps: dict[str, Callable[[Batch], float]] = {
        "reference": reference_step(spec, config.dense_lr, config.embedding_lr, config.dense_weight_decay),
        "dlrm": Trainer(spec, data, config).train_step,
        "dlrm_bf16": Trainer(spec, data, bf16).train_step}
    rates = timed_rounds(steps, batches, args.rounds, args.steps)
    del steps
    gc.collect()
    figures: dict[str, float] = {"torchrec_rounds": args.rounds, "torchrec_batch_size": args.batch_size,
                                 "torchrec_dim": args.dim, "torchrec_rows": args.rows}
    for name, key in (("dlrm", "dlrm_vs_torchrec"), ("dlrm_bf16", "dlrm_bf16_vs_torchrec")):
        figures |= ratio_figures(rates, name, key)
    # like for like, in rounds of their own: a fourth model of these tables (6.6 GiB each with
    # their optimizer state) does not fit beside the three in 24 GiB
    print("  like for like: the reference and autorec's dlrm, both under bf16 autocast", flush=True)
    pair = timed_rounds({"reference": reference_step(spec, config.dense_lr, config.embedding_lr,
                                                     config.dense_weight_decay, bf16=True),
                         "dlrm_bf16": Trainer(spec, data, bf16).train_step}, batches, args.rounds, args.steps)
    gc.collect()
    figures |= ratio_figures(pair, "dlrm_bf16", "dlrm_bf16_vs_torchrec_bf16")
    rates["reference_bf16"] = pair["reference"]
    ref_rate = statistics.median(rates["reference"])
    rows: list[tuple[str, float]] = [("reference torchrec DLRM (median of rounds)", ref_rate),
                                     ("reference torchrec DLRM, bf16 autocast (median of rounds)",
                                      statistics.median(rates["reference_bf16"])),
                                     ("autorec dlrm (median of rounds)", statistics.median(rates["dlrm"])),
                                     ("autorec dlrm, bf16 autocast (median of rounds)",
                                      statistics.median(rates["dlrm_bf16"]))]
    figures |= {"torchrec_reference_samples_per_s": ref_rate,
                "torchrec_reference_bf16_samples_per_s": rows[1][1],
                "torchrec_dlrm_samples_per_s": rows[2][1], "torchrec_dlrm_bf16_samples_per_s": rows[3][1]}
    for name in args.presets.split(","):
        if name == "dlrm":
            continue
        for suffix, cfg in (("", config), ("_bf16", bf16)):
            step = Trainer(preset(name, data.schema, dim=args.dim), data, cfg).train_step
            rate = time_steps(step, batches, max(args.steps, 10))
            rows.append((f"autorec {name}{suffix.replace('_', ', ')}", rate))
            figures[f"torchrec_{name}{suffix}_samples_per_s"] = rate
            print(f"  autorec {name}{suffix}: {rate:,.0f} samples/s", flush=True)
            del step
            gc.collect()
    for key in ("dlrm_vs_torchrec", "dlrm_bf16_vs_torchrec", "dlrm_bf16_vs_torchrec_bf16"):
        print(f"{key}: median {figures[key]:.2f}x (rounds {figures[key + '_min']:.2f}x.."
              f"{figures[key + '_max']:.2f}x)")
    print("\n| model | samples/s | vs reference |\n|---|---|---|")
    for name, rate in rows:
        print(f"| {name} | {rate:,.0f} | {rate / ref_rate:.2f}x |")
    merge_results(Path(args.json), figures, prefix="torchrec")


def timed_rounds(steps: dict[str, Callable[[Batch], float]], batches: list[Batch], rounds: int,
                 steps_per_round: int) -> dict[str, list[float]]:
    """Samples/s of every step in each of ``rounds`` rounds; the order rotates every round and
    all take the same batches in a round."""
    names = list(steps)
    rates: dict[str, list[float]] = {name: [] for name in names}
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            rates[name].append(time_steps(steps[name], batches, steps_per_round, warmup=1 if r else 3,
                                          start=r * steps_per_round))
        ref = rates["reference"][-1]
        others = ", ".join(f"{name} {rates[name][-1]:,.0f} ({rates[name][-1] / ref:.2f}x)"
                           for name in names[1:])
        print(f"  round {r + 1}: reference {ref:,.0f} samples/s; {others}", flush=True)
    return rates


def ratio_figures(rates: dict[str, list[float]], name: str, key: str,
                  base: str = "reference") -> dict[str, float]:
    """The median, least and greatest of the per-round ratios of ``name`` to ``base``."""
    ratios = sorted(o / ref for o, ref in zip(rates[name], rates[base], strict=True))
    return {key: statistics.median(ratios), f"{key}_min": ratios[0], f"{key}_max": ratios[-1]}


if __name__ == "__main__":
    main()
