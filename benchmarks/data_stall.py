"""Issue 25: the share of training time spent waiting for data, with and without prefetching.

``autorec train``'s own loop (``Trainer.fit``: DistributedModelParallel, fused row-wise Adagrad,
Adam) trains the dlrm preset, batch 4096, for ``--steps`` steps of one epoch from two sources:

- ``scale``: the one-shot benchmark's synthetic workload (13 dense, 26 tables at Criteo Kaggle's
  cardinalities capped at 10^6), held in memory: each batch is a gather and a KeyedJaggedTensor;
- ``criteo_tsv``: a generated Criteo Kaggle-layout TSV (``benchmarks/criteo_read.py``'s writer,
  kept under ``benchmarks/out/``), streamed, parsed and hashed (2^18 rows a table) as it trains.

Each source trains with the batches built on the training thread (``prefetch 0``, the baseline)
and built ahead on the prefetch thread (``prefetch 2``); the TSV also with its blocks parsed by
one and by two DataLoader worker processes (``workers 1``, ``workers 2``: outside the training
process's GIL), all in alternating rounds. ``criteo_tsv_cached`` is the same TSV through the
column cache (``load_criteo(cache=...)``, :mod:`autorec.data.criteo.cache`): parsed once before
the runs (``data_stall_cache_build_s``), then trained from the mapped columns.
``data_stall_share`` is the epoch's seconds spent in the batch iterator's ``next()`` over its
training seconds (what ``autorec train`` prints as ``data_wait_share``). Flat keys are merged
into ``benchmarks/results/throughput.json``: ``data_stall_share_<source>`` (prefetch 2),
``..._no_prefetch`` (the baseline), ``..._workers<n>``, and ``data_stall_samples_per_s_...`` alike.

    OMP_NUM_THREADS=2 .venv/bin/python -m benchmarks.data_stall [--steps 40] [--rounds 2]
"""

from __future__ import annotations

import argparse
import logging
import shutil
import statistics
import time
import warnings
from pathlib import Path
from typing import Any

from autorec.data import RecDataset, load_dataset
from autorec.data.criteo import load_criteo
from autorec.presets import preset
from autorec.train.trainer import TrainConfig, Trainer
from benchmarks.criteo_read import generate
from benchmarks.results_file import RESULTS, ROOT, merge_results

# name suffix -> (prefetch depth, DataLoader workers); workers only where the source streams
SETTINGS = {"_no_prefetch": (0, 0), "": (2, 0)}
STREAMED = {"_workers1": (0, 1), "_workers2": (0, 2)}


def sources(steps: int, batch_size: int, figures: dict[str, Any]) -> dict[str, RecDataset]:
    """The datasets, each with enough training rows for one epoch of ``steps`` batches; the
    column cache's one-time build (parse and encode of the whole TSV) is timed into ``figures``."""
    rows = int(steps * batch_size / 0.8) + 2 * batch_size
    tsv = ROOT / "benchmarks" / "out" / "criteo_stall.tsv"
    meta = generate(tsv, rows * 240)  # about 240 bytes a line
    cache = ROOT / "benchmarks" / "out" / "criteo_cache"
    shutil.rmtree(cache, ignore_errors=True)
    start = time.perf_counter()
    cached = load_criteo(path=str(tsv), seed=0, hash_size=2**18, max_rows=meta["lines"], cache=str(cache))
    figures["data_stall_cache_build_s"] = time.perf_counter() - start
    figures["data_stall_cache_rows"] = sum(cached.num_rows(s) for s in ("train", "val", "test"))
    return {"scale": load_dataset("synthetic", preset="scale", num_samples=rows),
            "criteo_tsv": load_criteo(path=str(tsv), seed=0, hash_size=2**18, max_rows=meta["lines"]),
            "criteo_tsv_cached": cached}


def train_once(data: RecDataset, steps: int, batch_size: int, depth: int,
               workers: int) -> dict[str, float]:
    """One epoch of ``steps`` steps of the dlrm preset: its data wait, seconds and samples/s."""
    config = TrainConfig(epochs=1, batch_size=batch_size, max_steps_per_epoch=steps, prefetch=depth,
                         num_workers=workers, progress=False, evaluate_test=False,
                         val_samples=batch_size)
    epoch = Trainer(preset("dlrm", data.schema), data, config).fit().history[0]
    return {"wait_s": epoch.data_wait_s, "seconds": epoch.seconds,
            "samples_per_s": epoch.samples_per_s}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=4096)
    parser.add_argument("--json", default=str(RESULTS / "throughput.json"))
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    logging.getLogger().setLevel(logging.ERROR)
    figures: dict[str, Any] = {"data_stall_steps": args.steps, "data_stall_batch_size": args.batch_size,
                               "data_stall_prefetch_depth": SETTINGS[""][0]}
    print("| source | prefetch | workers | data wait share | samples/s |\n|---|---|---|---|---|")
    for name, data in sources(args.steps, args.batch_size, figures).items():
        settings = SETTINGS | (STREAMED if name == "criteo_tsv" else {})
        runs: dict[str, list[dict[str, float]]] = {suffix: [] for suffix in settings}
        for _ in range(args.rounds):
            for suffix, (depth, workers) in settings.items():
                runs[suffix].append(train_once(data, args.steps, args.batch_size, depth, workers))
        for suffix, rows in runs.items():
            share = statistics.median(r["wait_s"] / r["seconds"] for r in rows)
            rate = statistics.median(r["samples_per_s"] for r in rows)
            figures[f"data_stall_share_{name}{suffix}"] = share
            figures[f"data_stall_samples_per_s_{name}{suffix}"] = rate
            depth, workers = settings[suffix]
            print(f"| {name} | {depth} | {workers} | {share:.3f} | {rate:,.0f} |", flush=True)
    merge_results(Path(args.json), figures, prefix="data_stall")


if __name__ == "__main__":
    main()
