"""Random, TPE and NSGA-II on the same space, data and budget, in one run.

For each strategy, a fresh study (objectives: validation AUC, and FLOPs per sample for the
Pareto front) runs the same number of trials with the same per-trial budget. The script prints
the best validation AUC (and its test AUC) against wall time and trials, and the size of the
AUC-FLOPs Pareto front.

    .venv/bin/python benchmarks/search_strategies.py --data movielens100k --trials 10
    .venv/bin/python benchmarks/search_strategies.py --data synthetic --data-opt preset=order3 \
        --data-opt num_samples=1000000 --trials 10
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
import warnings
from pathlib import Path

import yaml

from autorec.cli import parse_options
from autorec.study import StudyConfig, run_study

ROOT = Path(__file__).resolve().parents[1]


def pareto(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Non-dominated (AUC up, FLOPs down) points."""
    return [p for p in points if not any(q[0] >= p[0] and q[1] <= p[1] and q != p for q in points)]


def run_strategy(strategy: str, args: argparse.Namespace, out: Path) -> dict:
    folder = out / strategy
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    study = {
        "name": strategy,
        "data": {"name": args.data, "options": parse_options(args.data_opt), "seed": 0},
        "space": str(ROOT / "search_spaces" / f"{args.space}.yaml"),
        "strategy": strategy if strategy != "nsga2" else {"name": "nsga2", "options": {"population_size": 4}},
        "objectives": ["val_auc", "flops"],
        "budget": {"trials": args.trials, "epochs": args.epochs, "batch_size": args.batch_size,
                   "patience": 1},
        "seed": args.seed,
    }
    (folder / "study.yaml").write_text(yaml.safe_dump(study))
    start = time.perf_counter()
    timeline: list[dict] = []

    def on_trial(_study, trial) -> None:
        metrics = trial.user_attrs.get("metrics")
        if metrics:
            timeline.append({"trial": trial.number, "seconds": time.perf_counter() - start,
                             "val_auc": metrics["val"]["auc"], "test_auc": metrics["test"]["auc"],
                             "flops": trial.user_attrs["costs"]["flops"]})

    run_study(StudyConfig.load(folder / "study.yaml"), on_trial=on_trial, log=lambda *_: None)
    best = max(timeline, key=lambda r: r["val_auc"])
    front = pareto(sorted({(r["val_auc"], r["flops"]) for r in timeline}))
    return {"strategy": strategy, "timeline": timeline, "best": best, "front": sorted(front),
            "seconds": time.perf_counter() - start}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", default="movielens100k")
    parser.add_argument("--data-opt", action="append", default=[])
    parser.add_argument("--space", default="zoo")
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--strategies", default="random,tpe,nsga2")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "out" / "strategies"))
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    out = Path(args.out) / args.data
    results = [run_strategy(s, args, out) for s in args.strategies.split(",")]
    print(f"{args.data} {args.data_opt}: {args.trials} trials x {args.epochs} epochs per strategy, "
          f"space {args.space}, seed {args.seed}")
    print("| strategy | best val AUC | its test AUC | found at trial | found after s | total s | "
          "Pareto front (AUC, MFLOPs) |")
    print("|---|---|---|---|---|---|---|")
    for r in results:
        b = r["best"]
        front = ", ".join(f"({auc:.4f}, {flops / 1e6:.2f})" for auc, flops in r["front"])
        print(f"| {r['strategy']} | {b['val_auc']:.4f} | {b['test_auc']:.4f} | {b['trial']} | "
              f"{b['seconds']:.0f} | {r['seconds']:.0f} | {front} |")
    (out / "results.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
