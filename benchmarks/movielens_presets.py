"""Test AUC of every preset on movielens100k (random 80/10/10 split by seed), one table row each.

    .venv/bin/python benchmarks/movielens_presets.py [--seed 0] [--presets dlrm,dcnv2,wukong,dhen]
    .venv/bin/python benchmarks/movielens_presets.py --autocast bf16   # trained under bf16 autocast
    .venv/bin/python benchmarks/movielens_presets.py --fp32-matmul bf16   # fp32 products at bf16 precision
"""

from __future__ import annotations

import argparse
import json
import platform
import time
import warnings

import torch

from autorec.data import load_dataset
from autorec.presets import PRESETS, preset
from autorec.train.autocast import AUTOCAST, FP32_MATMUL
from autorec.train.trainer import TrainConfig, Trainer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--presets", default=",".join(PRESETS))
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--autocast", choices=AUTOCAST, default="off", help="train.autocast of every preset")
    parser.add_argument("--fp32-matmul", choices=FP32_MATMUL, default="ieee",
                        help="train.fp32_matmul of every preset")
    parser.add_argument("--json", help="also write the rows to this file")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    dataset = load_dataset("movielens100k", seed=args.seed)
    print(f"machine: {platform.processor() or platform.machine()}, {torch.get_num_threads()} threads, "
          f"torch {torch.__version__}, autocast {args.autocast}, fp32_matmul {args.fp32_matmul}")
    print("| preset | val AUC | test AUC | test logloss | test NE | best epoch | seconds |")
    print("|---|---|---|---|---|---|---|")
    rows = []
    for name in args.presets.split(","):
        t0 = time.perf_counter()
        config = TrainConfig(epochs=args.epochs, seed=args.seed, progress=False, autocast=args.autocast,
                             fp32_matmul=args.fp32_matmul)
        result = Trainer(preset(name, dataset.schema), dataset, config).fit()
        rows.append({"preset": name, "val": result.val, "test": result.test, "best_epoch": result.best_epoch})
        print(f"| {name} | {result.val['auc']:.4f} | {result.test['auc']:.4f} | "
              f"{result.test['logloss']:.4f} | {result.test['ne']:.4f} | {result.best_epoch} | "
              f"{time.perf_counter() - t0:.0f} |", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
