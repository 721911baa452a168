"""Issue 22: training defaults (learning rates, schedule, regularisation) that hold across datasets.

    .venv/bin/python -m benchmarks.train_defaults [--datasets ml100k,teacher3,scale300k] [--configs ...]
    # -> benchmarks/results/train_defaults.json

Every preset (dlrm, dcnv2, wukong, dhen) is trained on every dataset under each candidate recipe,
with the full budget a study's final training has (10 epochs, patience 2, model selection on
validation logloss). A recipe is judged on *validation* logloss only (the test split is reported
beside it, never used to choose): for each (dataset, preset) cell the recipe's regret is its
validation logloss minus the best recipe's in that cell, and the recipe of lowest mean regret
over all cells is the default that holds across datasets (the worst cell's regret is reported
too, so a recipe that wins on average by losing badly somewhere shows).

Datasets:

* ``ml100k``: MovieLens-100K, random 80/10/10 by seed 0 (small tables, few features);
* ``teacher3``: the planted 3rd-order teacher, 300k samples, sequential 80/10/10;
* ``scale300k``: the Criteo-like ``scale`` preset (26 tables up to 10^6 rows, Zipf ids),
  300k samples, sequential 80/10/10: the shape where embedding learning rates matter most.

Recipes are named changes to the trainer's base recipe (``BASE``: Adam 1e-3 on the dense parts,
row-wise Adagrad 0.05 on every table, constant rates, no weight decay); each training is cached
under ``--out`` (default ``~/.cache/autorec-bench/train_defaults``) so a cut run resumes.
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from autorec.data import RecDataset, load_dataset
from autorec.presets import PRESETS, preset
from autorec.train.trainer import TrainConfig, Trainer
from benchmarks.results_file import commit, machine

ROOT = Path(__file__).resolve().parents[1]
BASE: dict[str, Any] = {"dense_lr": 1e-3, "embedding_lr": 0.05, "lr_schedule": "constant",
                        "dense_weight_decay": 0.0, "embedding_weight_decay": 0.0}
RECIPES: dict[str, dict[str, Any]] = {
    "base": {},
    "cosine": {"lr_schedule": "cosine"},
    "dense_lr_3e-3": {"dense_lr": 3e-3},
    "dense_lr_3e-4": {"dense_lr": 3e-4},
    "emb_lr_0.02": {"embedding_lr": 0.02},
    "emb_lr_0.1": {"embedding_lr": 0.1},
    "dense_wd_1e-5": {"dense_weight_decay": 1e-5},
    "dense_wd_1e-4": {"dense_weight_decay": 1e-4},
    "dense_wd_1e-3": {"dense_weight_decay": 1e-3},
    "emb_wd_1e-6": {"embedding_weight_decay": 1e-6},
    "emb_lr_0.2": {"embedding_lr": 0.2},
}
DATASETS: dict[str, dict[str, Any]] = {
    "ml100k": {"name": "movielens100k", "seed": 0},
    "teacher3": {"name": "synthetic", "seed": 0,
                 "options": {"preset": "order3", "num_samples": 300_000, "split": "sequential"}},
    "scale300k": {"name": "synthetic", "seed": 0,
                  "options": {"preset": "scale", "num_samples": 300_000, "split": "sequential"}},
}


def recipe(name: str) -> dict[str, Any]:
    """A recipe's trainer settings: ``BASE`` with the named changes; ``a+b`` combines two."""
    settings = dict(BASE)
    for part in name.split("+"):
        if part not in RECIPES:
            raise SystemExit(f"--configs: unknown recipe {part!r}; expected one of {', '.join(RECIPES)}")
        settings.update(RECIPES[part])
    return settings


def dataset(key: str) -> RecDataset:
    d = DATASETS[key]
    return load_dataset(d["name"], seed=d["seed"], **d.get("options", {}))


def cell(data: RecDataset, name: str, settings: dict[str, Any]) -> dict[str, Any]:
    """One preset trained under one recipe: validation and test metrics of the kept epoch."""
    config = TrainConfig(epochs=10, patience=2, batch_size=1024, seed=0, progress=False,
                         monitor="val_logloss", **settings)
    start = time.perf_counter()
    result = Trainer(preset(name, data.schema), data, config).fit()
    return {"val": result.val, "test": result.test, "best_epoch": result.best_epoch,
            "seconds": round(time.perf_counter() - start, 1)}


def run(datasets: list[str], recipes: list[str], out: Path,
        presets: list[str] | None = None) -> dict[str, dict[str, dict[str, Any]]]:
    """Every (dataset, preset, recipe) training, cached in ``out/<dataset>.json``."""
    out.mkdir(parents=True, exist_ok=True)
    runs: dict[str, dict[str, dict[str, Any]]] = {}
    for key in datasets:
        cache = out / f"{key}.json"
        done: dict[str, dict[str, Any]] = json.loads(cache.read_text()) if cache.exists() else {}
        data = None
        for name in presets or PRESETS:
            for rec in recipes:
                tag = f"{name}/{rec}"
                if tag in done:
                    continue
                data = data or dataset(key)
                try:
                    done[tag] = cell(data, name, recipe(rec))
                except ValueError as err:  # a setting this machine refuses (embedding WD on CPU)
                    done[tag] = {"refused": str(err)}
                    print(f"{key} {tag}: refused: {err}", flush=True)
                else:
                    print(f"{key} {tag}: val logloss {done[tag]['val']['logloss']:.4f}, test AUC "
                          f"{done[tag]['test']['auc']:.4f} ({done[tag]['seconds']:.0f} s)", flush=True)
                cache.write_text(json.dumps(done, indent=1))
        runs[key] = done
    return runs


def summarise(runs: dict[str, dict[str, dict[str, Any]]], recipes: list[str]) -> dict[str, Any]:
    """Per recipe: mean and worst validation-logloss regret over the cells, mean test figures,
    and each cell's figures (``<dataset>_<preset>_<recipe>_val_logloss``, ``..._test_auc``).

    A recipe that the machine refused in any cell (``{"refused": reason}``, e.g. an embedding
    weight decay on fbgemm's CPU kernels) is left out of the comparison and named under
    ``refused_recipes``, so the others are still ranked on complete cells."""
    refused = sorted({r for done in runs.values() for r in recipes
                      if any("refused" in done.get(f"{n}/{r}", {}) for n in PRESETS)})
    recipes = [r for r in recipes if r not in refused]
    regrets: dict[str, list[float]] = {r: [] for r in recipes}
    tests: dict[str, list[tuple[float, float]]] = {r: [] for r in recipes}
    row: dict[str, Any] = {"refused_recipes": ",".join(refused)} if refused else {}
    for key, done in runs.items():
        for name in PRESETS:
            cells = {r: done[f"{name}/{r}"] for r in recipes if f"{name}/{r}" in done}
            if not recipes or len(cells) < len(recipes):
                continue
            best = min(c["val"]["logloss"] for c in cells.values())
            for r, c in cells.items():
                regrets[r].append(c["val"]["logloss"] - best)
                tests[r].append((c["test"]["logloss"], c["test"]["auc"]))
                row[f"{key}_{name}_{r}_val_logloss"] = round(c["val"]["logloss"], 5)
                row[f"{key}_{name}_{r}_test_auc"] = round(c["test"]["auc"], 5)
    for r in recipes:
        if not regrets[r]:
            continue
        row[f"{r}_mean_val_regret"] = round(float(np.mean(regrets[r])), 5)
        row[f"{r}_worst_val_regret"] = round(float(np.max(regrets[r])), 5)
        row[f"{r}_mean_test_logloss"] = round(float(np.mean([t[0] for t in tests[r]])), 5)
        row[f"{r}_mean_test_auc"] = round(float(np.mean([t[1] for t in tests[r]])), 5)
    scored = [r for r in recipes if regrets[r]]
    if scored:
        row["best_recipe"] = min(scored, key=lambda r: np.mean(regrets[r]))
        row["cells"] = len(regrets[scored[0]])
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", default=",".join(DATASETS))
    parser.add_argument("--configs", default=",".join(RECIPES),
                        help="recipes to train (names from RECIPES, a+b for a combination)")
    parser.add_argument("--presets", default=",".join(PRESETS), help="presets to train (a cell needs all "
                        "recipes of one preset; the summary takes whatever cells are complete)")
    parser.add_argument("--out", type=Path,
                        default=Path.home() / ".cache" / "autorec-bench" / "train_defaults")
    parser.add_argument("--json", type=Path, default=ROOT / "benchmarks" / "results" / "train_defaults.json")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    datasets, recipes = args.datasets.split(","), args.configs.split(",")
    for key in datasets:
        if key not in DATASETS:
            raise SystemExit(f"--datasets: unknown dataset {key!r}; expected one of {', '.join(DATASETS)}")
    for r in recipes:
        recipe(r)
    row = summarise(run(datasets, recipes, args.out, args.presets.split(",")), recipes)
    row.update(datasets=",".join(datasets), machine=machine(), commit=commit())
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(row, indent=1, sort_keys=True) + "\n")
    print(json.dumps(row, indent=1, sort_keys=True))


if __name__ == "__main__":
    main()
