"""What a one-process training skips: DDP over its dense parts and replicated tables (issue 25).

In a one-process group :func:`autorec.train.distributed.shard` wraps the dense parts in nothing
(:class:`~autorec.train.distributed.LocalDense`: DDP over one rank all-reduces nothing) and puts
every table table_wise on the fused kernel (torchrec's planner would replicate the small ones,
data_parallel, each with a DDP over its lookup and torchrec's Python row-wise Adagrad). Per
preset, four Trainers on the ``scale`` workload's schema (batch 4096) step on the same batches in
alternating rounds (:mod:`benchmarks.step_ab`):

- ``default``: as ``shard`` gives it now;
- ``ddp``: torchrec's DDP wrapper forced on the dense parts, tables as ``default``;
- ``planner``: no wrapper, the tables where torchrec's planner puts them;
- ``torchrec``: both as torchrec gives them (what autorec did before).

    OMP_NUM_THREADS=2 .venv/bin/python -m benchmarks.one_process [--presets dlrm,wukong] [--rounds 8]

Flat keys ``one_process_<preset>_<variant>_step_ms``, ``one_process_<preset>_speedup_<variant>``
(the variant's step time over ``default``'s, median over rounds) and
``one_process_<preset>_replicated_tables`` (how many tables the planner replicates), merged into
``benchmarks/results/throughput.json``.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

import torch
from torch.nn.parallel import DistributedDataParallel
from torchrec.distributed.model_parallel import DefaultDataParallelWrapper

from autorec.train import distributed
from autorec.train import embedding_optim as emb_optim
from autorec.train.trainer import Trainer
from benchmarks.results_file import merge_results
from benchmarks.step_ab import ab_parser, alternating_rounds, paired_speedup, preset_trainer, scale_data

# variant -> (DDP on the dense parts, every table fused)
VARIANTS = {"default": (False, True), "ddp": (True, True), "planner": (False, False),
            "torchrec": (True, False)}


def trainer(name: str, data: Any, batch_size: int, variant: str) -> Trainer:
    """``name``'s Trainer as ``variant`` (see the module) builds it."""
    ddp, fused = VARIANTS[variant]
    chosen, fusable = distributed.dense_wrapper, emb_optim.fusable_alone
    if ddp:
        distributed.dense_wrapper = lambda *args, **options: DefaultDataParallelWrapper(**options)
    if not fused:
        emb_optim.fusable_alone = lambda *args: False
    try:
        out = preset_trainer(name, data, batch_size)
    finally:
        distributed.dense_wrapper, emb_optim.fusable_alone = chosen, fusable
    assert isinstance(out.model._dmp_wrapped_module, DistributedDataParallel) == ddp
    return out


def replicated(run: Trainer) -> int:
    """How many of ``run``'s tables are data_parallel."""
    return sum(t == "data_parallel" for t in distributed.sharding_types(run.model.plan).values())


def measure(name: str, data: Any, batch_size: int, rounds: int, steps: int) -> dict[str, float]:
    runs = {variant: trainer(name, data, batch_size, variant) for variant in VARIANTS}
    if replicated(runs["default"]):
        raise AssertionError(f"{name}: the one-process default replicates tables")
    times = alternating_rounds(runs, rounds, steps)
    out = {f"one_process_{name}_{v}_step_ms": 1e3 * statistics.median(t) for v, t in times.items()}
    for variant in VARIANTS:
        if variant != "default":
            out[f"one_process_{name}_speedup_{variant}"] = paired_speedup(times[variant], times["default"])
    out[f"one_process_{name}_replicated_tables"] = replicated(runs["planner"])
    return out


def main() -> None:
    args = ab_parser(__doc__).parse_args()
    data = scale_data(args)
    figures: dict[str, Any] = {"one_process_threads": torch.get_num_threads(),
                               "one_process_rounds": args.rounds}
    others = [v for v in VARIANTS if v != "default"]
    print("| preset | " + " | ".join(f"{v} ms/step" for v in VARIANTS) + " | "
          + " | ".join(f"{v} / default" for v in others) + " | tables replicated by the planner |")
    print("|---|" + "---|" * (len(VARIANTS) + len(others) + 1))
    for name in args.presets.split(","):
        got = measure(name, data, args.batch_size, args.rounds, args.steps)
        figures.update(got)
        cells = [f"{got[f'one_process_{name}_{v}_step_ms']:.1f}" for v in VARIANTS]
        cells += [f"{got[f'one_process_{name}_speedup_{v}']:.3f}" for v in others]
        cells.append(str(got[f"one_process_{name}_replicated_tables"]))
        print(f"| {name} | " + " | ".join(cells) + " |", flush=True)
    merge_results(Path(args.json), figures, prefix="one_process")


if __name__ == "__main__":
    main()
