"""Issue 25: what a one-shot supernet step costs on one sampled path, against training that
path's architecture alone.

The one-shot supernet of ``benchmarks/spaces/scale.yaml`` (per-feature widths and hash sizes,
per-layer kinds) on the ``scale`` workload, batch 4096. For each of ``--paths`` paths drawn
uniformly (the default sampling of ``strategy: oneshot``), the supernet's update on that path
(``SupernetTraining.train_paths``: forward, backward with the fused table update, Adam) is timed
against the Trainer's ``train_step`` of the derived architecture built alone (its own tables at
its own widths and hash sizes), on the same batches, in alternating rounds so a drift of the
machine falls on both alike. ``supernet_step_ratio`` is the median over paths of (median supernet
step / median stand-alone step); ``supernet_step_ratio_max`` the worst path. Flat keys merged
into ``benchmarks/results/throughput.json``.

    OMP_NUM_THREADS=2 .venv/bin/python -m benchmarks.supernet_step [--paths 6] [--rounds 5]
"""

from __future__ import annotations

import argparse
import logging
import statistics
import tempfile
import time
import warnings
from functools import partial
from pathlib import Path
from typing import Any

import torch

from autorec.data import load_dataset
from autorec.oneshot.train import OneShotTrainConfig, SupernetTraining
from autorec.space import SearchSpace
from autorec.train.trainer import TrainConfig, Trainer
from benchmarks.results_file import RESULTS, ROOT, merge_results

SPACE = ROOT / "benchmarks" / "spaces" / "scale.yaml"


def _timed(step: Any, batches: list[Any]) -> float:
    """Seconds per step over ``batches``."""
    start = time.perf_counter()
    for batch in batches:
        step(batch)
    return (time.perf_counter() - start) / len(batches)


def _path_step(training: SupernetTraining, path: dict[str, int], batch: Any) -> Any:
    """The supernet's update on ``path`` alone."""
    return training.train_paths(batch, [path])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--paths", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=3, help="steps per round")
    parser.add_argument("--batch-size", type=int, default=4096)
    parser.add_argument("--json", default=str(RESULTS / "throughput.json"))
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    logging.getLogger().setLevel(logging.ERROR)
    data = load_dataset("synthetic", preset="scale", num_samples=args.batch_size * (args.steps + 2) * 2)
    space = SearchSpace.load(SPACE)
    training = SupernetTraining(space, data, OneShotTrainConfig(batch_size=args.batch_size),
                                tempfile.mkdtemp(prefix="supernet-step-"))
    loader = data.loader("train", args.batch_size, shuffle=False)
    batches = [b for _, b in zip(range(args.steps + 1), loader, strict=False)]
    generator = torch.Generator().manual_seed(0)
    ratios, rows = [], []
    print("| path | layers | tables | supernet ms/step | alone ms/step | ratio |\n|---|---|---|---|---|---|")
    for i in range(args.paths):
        path = {c.name: int(torch.randint(len(c.values), (1,), generator=generator))
                for c in training.choices}
        values = {c.name: c.values[path[c.name]] for c in training.choices}
        spec = training.search.supernet.derive(values)
        alone = Trainer(spec, data, TrainConfig(batch_size=args.batch_size, progress=False, prefetch=0))
        supernet_step = partial(_path_step, training, path)
        for step in (supernet_step, alone.train_step):  # warm up both
            step(batches[0])
        times: dict[str, list[float]] = {"supernet": [], "alone": []}
        for _ in range(args.rounds):
            times["supernet"].append(_timed(supernet_step, batches[1:]))
            times["alone"].append(_timed(alone.train_step, batches[1:]))
        s, a = statistics.median(times["supernet"]), statistics.median(times["alone"])
        ratios.append(s / a)
        kinds = ",".join(layer.kind for layer in spec.layers)
        table_rows = sum(t.num_embeddings * t.dim for t in spec.tables)
        rows.append(f"| {i} | {kinds} | {len(spec.tables)} tables, {table_rows / 1e6:.1f}M weights "
                    f"| {s * 1e3:.1f} | {a * 1e3:.1f} | {s / a:.2f} |")
        print(rows[-1], flush=True)
        del alone
    figures = {"supernet_step_ratio": statistics.median(ratios), "supernet_step_ratio_max": max(ratios),
               "supernet_step_ratio_min": min(ratios), "supernet_step_paths": args.paths,
               "supernet_step_batch_size": args.batch_size}
    print(f"supernet_step_ratio {figures['supernet_step_ratio']:.2f} "
          f"(paths {min(ratios):.2f}-{max(ratios):.2f})")
    merge_results(Path(args.json), figures, prefix="supernet_step")


if __name__ == "__main__":
    main()
