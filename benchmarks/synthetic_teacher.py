"""Test AUC of presets on synthetic data with a planted teacher, against the Bayes-optimal AUC.

Reports, for each preset, the share of dlrm's gap to the Bayes AUC that it closes:
(auc - auc_dlrm) / (bayes - auc_dlrm).

    .venv/bin/python benchmarks/synthetic_teacher.py [--preset order3] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
import time
import warnings

from autorec.cli import parse_options
from autorec.data import load_dataset
from autorec.presets import preset
from autorec.train.trainer import TrainConfig, Trainer


def run(data_preset: str, seed: int, presets: list[str], epochs: int, patience: int = 2,
        **data_options: object) -> dict:
    dataset = load_dataset("synthetic", preset=data_preset, seed=seed, **data_options)
    bayes = dataset.bayes_auc("test")
    rows = {}
    for name in presets:
        t0 = time.perf_counter()
        config = TrainConfig(epochs=epochs, batch_size=1024, seed=seed, patience=patience, progress=False)
        result = Trainer(preset(name, dataset.schema), dataset, config).fit()
        rows[name] = {"test_auc": result.test["auc"], "val_auc": result.val["auc"],
                      "best_epoch": result.best_epoch, "seconds": time.perf_counter() - t0}
    base = rows["dlrm"]["test_auc"]
    for row in rows.values():
        row["gap_closed"] = (row["test_auc"] - base) / (bayes - base)
    return {"data": data_preset, "options": data_options, "seed": seed, "bayes_test_auc": bayes,
            "models": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--preset", default="order3")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--epochs", type=int, default=15)
    parser.add_argument("--patience", type=int, default=2)
    parser.add_argument("--models", default="dlrm,wukong,dhen")
    parser.add_argument("--data-opt", action="append", default=[], metavar="KEY=VALUE",
                        help="a synthetic option on top of the preset, e.g. rows=[10,10,20,20,50,50]")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    out = run(args.preset, args.seed, args.models.split(","), args.epochs, args.patience,
              **parse_options(args.data_opt))
    print(f"synthetic {out['data']} {out['options']} (seed {out['seed']}): "
          f"Bayes-optimal test AUC {out['bayes_test_auc']:.4f}")
    print("| preset | test AUC | share of dlrm's gap to Bayes closed | best epoch | seconds |")
    print("|---|---|---|---|---|")
    for name, row in out["models"].items():
        print(f"| {name} | {row['test_auc']:.4f} | {row['gap_closed']:.2f} | {row['best_epoch']} | "
              f"{row['seconds']:.0f} |")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
