"""Test AUC of a preset with every dense layer in each given precision, against fp32, on
movielens100k (random 80/10/10 split by seed, the trainer's defaults), one table row each.

    .venv/bin/python benchmarks/precision_quality.py [--preset wukong] [--precisions fp32,mxfp8_e4m3]
"""

from __future__ import annotations

import argparse
import json
import platform
import time
import warnings

import torch

from autorec.data import load_dataset
from autorec.precision.recipes import with_precision
from autorec.presets import preset
from autorec.train.trainer import TrainConfig, Trainer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--preset", default="wukong")
    parser.add_argument("--precisions", default="fp32,mxfp8_e4m3")
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--json", help="also write the rows to this file")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    dataset = load_dataset("movielens100k", seed=args.seed)
    print(f"machine: {platform.processor() or platform.machine()}, {torch.get_num_threads()} threads, "
          f"torch {torch.__version__}")
    print("| preset | precision | val AUC | test AUC | test logloss | best epoch | seconds |")
    print("|---|---|---|---|---|---|---|")
    rows = []
    for precision in args.precisions.split(","):
        spec = with_precision(preset(args.preset, dataset.schema), precision)
        t0 = time.perf_counter()
        result = Trainer(spec, dataset, TrainConfig(epochs=args.epochs, seed=args.seed, progress=False)).fit()
        rows.append({"preset": args.preset, "precision": precision, "val": result.val, "test": result.test,
                     "best_epoch": result.best_epoch, "seconds": time.perf_counter() - t0})
        print(f"| {args.preset} | {precision} | {result.val['auc']:.4f} | {result.test['auc']:.4f} | "
              f"{result.test['logloss']:.4f} | {result.best_epoch} | {time.perf_counter() - t0:.0f} |",
              flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
