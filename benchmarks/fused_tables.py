"""A one-process training's tables all fused against the planner's replicas (issue 25).

In a one-process group :func:`autorec.train.distributed.shard` puts every table table_wise on
the fused kernel, where torchrec's planner replicates the small ones (data_parallel: each step a
DDP over their lookup, a dense gradient per table and torchrec's row-wise Adagrad in Python).
Per preset, two Trainers on the ``scale`` workload's schema (batch 4096) step on the same
batches in alternating rounds (:mod:`benchmarks.step_ab`):

- ``fused``: as ``shard`` gives it (every table on the fused kernel);
- ``planner``: the tables where torchrec's planner puts them (what autorec did before).

    OMP_NUM_THREADS=2 .venv/bin/python -m benchmarks.fused_tables [--presets dlrm,wukong] [--rounds 8]

Flat keys ``fused_tables_<preset>_<variant>_step_ms``, ``fused_tables_<preset>_speedup`` (the
planner's step time over the fused one's, median over rounds) and
``fused_tables_<preset>_replicated`` (how many tables the planner replicates), merged into
``benchmarks/results/throughput.json``.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

import torch

from autorec.train import distributed
from autorec.train import embedding_optim as emb_optim
from autorec.train.trainer import Trainer
from benchmarks.results_file import merge_results
from benchmarks.step_ab import ab_parser, alternating_rounds, paired_speedup, preset_trainer, scale_data

VARIANTS = ("fused", "planner")


def trainer(name: str, data: Any, batch_size: int, variant: str) -> Trainer:
    """``name``'s Trainer with its tables as ``variant`` (see the module) places them."""
    fusable = emb_optim.fusable_alone
    if variant == "planner":
        emb_optim.fusable_alone = lambda *args: False
    try:
        return preset_trainer(name, data, batch_size)
    finally:
        emb_optim.fusable_alone = fusable


def replicated(run: Trainer) -> int:
    """How many of ``run``'s tables are data_parallel."""
    return sum(t == "data_parallel" for t in distributed.sharding_types(run.model.plan).values())


def measure(name: str, data: Any, batch_size: int, rounds: int, steps: int) -> dict[str, float]:
    runs = {variant: trainer(name, data, batch_size, variant) for variant in VARIANTS}
    if replicated(runs["fused"]):
        raise AssertionError(f"{name}: the one-process default replicates tables")
    times = alternating_rounds(runs, rounds, steps)
    out = {f"fused_tables_{name}_{v}_step_ms": 1e3 * statistics.median(t) for v, t in times.items()}
    out[f"fused_tables_{name}_speedup"] = paired_speedup(times["planner"], times["fused"])
    out[f"fused_tables_{name}_replicated"] = replicated(runs["planner"])
    return out


def main() -> None:
    args = ab_parser(__doc__).parse_args()
    data = scale_data(args)
    figures: dict[str, Any] = {"fused_tables_threads": torch.get_num_threads(),
                               "fused_tables_rounds": args.rounds}
    print("| preset | fused ms/step | planner's ms/step | speedup (rounds' median) | replicated tables |")
    print("|---|---|---|---|---|")
    for name in args.presets.split(","):
        got = measure(name, data, args.batch_size, args.rounds, args.steps)
        figures.update(got)
        cells = [f"{got[f'fused_tables_{name}_{v}_step_ms']:.1f}" for v in VARIANTS]
        cells += [f"{got[f'fused_tables_{name}_speedup']:.3f}", str(got[f"fused_tables_{name}_replicated"])]
        print(f"| {name} | " + " | ".join(cells) + " |", flush=True)
    merge_results(Path(args.json), figures, prefix="fused_tables")


if __name__ == "__main__":
    main()
