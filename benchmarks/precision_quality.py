"""Test AUC of a preset with every dense layer in each given precision, and its embedding tables
in each given table precision, against fp32, on movielens100k (random 80/10/10 split by seed,
the trainer's defaults), one table row each.

    .venv/bin/python benchmarks/precision_quality.py [--preset wukong] [--precisions fp32,mxfp8_e4m3]
        [--tables fp32,fp16] [--fused-tables]

``--fused-tables`` places every table table_wise on the fused kernel, as the trainer does with
fp16 tables anyway, so that fp32 and fp16 tables differ only in precision.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import tempfile
import time
import warnings
from pathlib import Path

import torch

from autorec.arch import ArchSpec
from autorec.data import load_dataset
from autorec.precision.recipes import with_precision
from autorec.presets import preset
from autorec.train.trainer import TrainConfig, Trainer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--preset", default="wukong")
    parser.add_argument("--precisions", default="fp32,mxfp8_e4m3")
    parser.add_argument("--tables", default="fp32", help="embedding-table precisions")
    parser.add_argument("--fused-tables", action="store_true")
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--json", help="also write the rows to this file")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    dataset = load_dataset("movielens100k", seed=args.seed)
    print(f"machine: {platform.processor() or platform.machine()}, {torch.get_num_threads()} threads, "
          f"torch {torch.__version__}")
    print("| preset | precision | tables | val AUC | test AUC | test logloss | best epoch | seconds |")
    print("|---|---|---|---|---|---|---|---|")
    rows = []
    base = preset(args.preset, dataset.schema)
    plan = _fused_plan(base) if args.fused_tables else None
    for precision in args.precisions.split(","):
        for tables in args.tables.split(","):
            spec = with_precision(base, precision)
            spec = dataclasses.replace(spec, tables=tuple(dataclasses.replace(t, precision=tables)
                                                          for t in spec.tables))
            t0 = time.perf_counter()
            config = TrainConfig(epochs=args.epochs, seed=args.seed, progress=False, plan=plan)
            result = Trainer(spec, dataset, config).fit()
            rows.append({"preset": args.preset, "precision": precision, "tables": tables,
                         "fused_tables": args.fused_tables, "val": result.val, "test": result.test,
                         "best_epoch": result.best_epoch, "seconds": time.perf_counter() - t0})
            print(f"| {args.preset} | {precision} | {tables} | {result.val['auc']:.4f} | "
                  f"{result.test['auc']:.4f} | {result.test['logloss']:.4f} | {result.best_epoch} | "
                  f"{time.perf_counter() - t0:.0f} |", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


def _fused_plan(spec: ArchSpec) -> str:
    """A plan file with every table of ``spec`` table_wise on rank 0 (the fused kernel)."""
    path = Path(tempfile.mkdtemp(prefix="autorec-plan-")) / "plan.json"
    path.write_text(json.dumps({"version": 1, "tables": {
        t.name: {"sharding_type": "table_wise", "ranks": [0]} for t in spec.tables}}))
    return str(path)


if __name__ == "__main__":
    main()
