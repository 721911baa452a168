"""Issue 22's quality figures: the searched model against the presets, each trained in full.

    .venv/bin/python -m benchmarks.quality [--datasets ml100k,teacher3]   # -> benchmarks/results/quality.json

For each dataset the presets (dlrm, dcnv2, wukong, dhen) are trained with the full budget of the
dataset's study (``budget.final_epochs``, model selection on validation logloss, the test split
also evaluated after every epoch to measure the selection), and the study runs: a short search,
then its best trials retrained in full with that same budget (``budget.final_top``,
:mod:`autorec.study.final`). The searched model is the study's answer (its full training of best
validation logloss).

* ``ml100k``: MovieLens-100K, random 80/10/10 split by seed 0; ``studies/movielens.yaml``.
* ``teacher3``: the planted 3rd-order teacher, 300k samples, sequential 80/10/10;
  ``studies/teacher3.yaml``.

The studies live under ``~/.cache/autorec-bench/quality`` (a rerun resumes them) and the preset
trainings are cached there too. Keys of the JSON (flat numbers): ``ml100k_search_auc``,
``ml100k_search_logloss``, ``ml100k_best_preset_auc``, ``ml100k_best_preset_logloss``,
``teacher3_search_auc``, ``teacher3_best_preset_auc``, ``teacher3_bayes_auc`` and
``max_logloss_regret`` (over every preset training of every dataset: the selected epoch's test
logloss minus the lowest test logloss of its epochs), with the machine and the commit.
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path
from typing import Any

import yaml

from autorec.data import load_dataset
from autorec.presets import PRESETS, preset
from autorec.study import StudyConfig, run_study
from autorec.train.trainer import TrainConfig, Trainer
from benchmarks.results_file import merge_results

ROOT = Path(__file__).resolve().parents[1]
STUDIES = {"ml100k": ROOT / "studies" / "movielens.yaml", "teacher3": ROOT / "studies" / "teacher3.yaml"}


def study_copy(dataset: str, out: Path) -> StudyConfig:
    """The dataset's study file, written under ``out`` (its storage there), without baselines
    (the presets are trained here, with the per-epoch test pass the regret needs)."""
    source = STUDIES[dataset]
    raw = yaml.safe_load(source.read_text())
    raw["space"] = str((source.parent / raw["space"]).resolve())
    raw["baselines"] = []
    folder = out / raw["name"]
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "study.yaml"
    path.write_text(yaml.safe_dump(raw))
    return StudyConfig.load(path)


def preset_runs(config: StudyConfig, out: Path) -> dict[str, dict[str, Any]]:
    """Each preset trained with the study's full budget (cached in ``out``)."""
    cache = out / f"{config.name}-presets.json"
    done: dict[str, dict[str, Any]] = json.loads(cache.read_text()) if cache.exists() else {}
    data = load_dataset(config.data.name, path=config.data.path, seed=config.data.seed, **config.data.options)
    b = config.budget
    train = TrainConfig(epochs=b.final_epochs, batch_size=b.batch_size, seed=config.seed,
                        patience=max(b.patience, 2), monitor=b.monitor, track_test=True, progress=False)
    for name in PRESETS:
        if name in done:
            continue
        start = time.perf_counter()
        result = Trainer(preset(name, data.schema), data, train).fit()
        done[name] = {"val": result.val, "test": result.test, "best_epoch": result.best_epoch,
                      "epoch_test_logloss": [r.test["logloss"] for r in result.history],
                      "seconds": time.perf_counter() - start}
        print(f"{config.name}: preset {name}: test AUC {result.test['auc']:.4f}, "
              f"logloss {result.test['logloss']:.4f}", flush=True)
        cache.write_text(json.dumps(done, indent=1))
    if config.data.name == "synthetic":
        done["_bayes_auc"] = {"test": {"auc": data.bayes_auc("test")}}
    return done


def figures(dataset: str, out: Path) -> dict[str, float]:
    config = study_copy(dataset, out)
    presets = preset_runs(config, out)
    summary = run_study(config, log=print)
    best = summary.best
    if best is None or not best.get("full_training"):
        raise RuntimeError(f"{config.name}: the study has no full training to answer with")
    named = {k: v for k, v in presets.items() if not k.startswith("_")}
    top = max(named.values(), key=lambda p: p["test"]["auc"])
    regret = max(p["test"]["logloss"] - min(p["epoch_test_logloss"]) for p in named.values())
    row = {f"{dataset}_search_auc": best["test_auc"], f"{dataset}_search_logloss": best["test_logloss"],
           f"{dataset}_best_preset_auc": top["test"]["auc"],
           f"{dataset}_best_preset_logloss": min(p["test"]["logloss"] for p in named.values()),
           f"{dataset}_logloss_regret": regret}
    if "_bayes_auc" in presets:
        row[f"{dataset}_bayes_auc"] = presets["_bayes_auc"]["test"]["auc"]
    for name, p in named.items():
        row[f"{dataset}_{name}_auc"] = p["test"]["auc"]
        row[f"{dataset}_{name}_logloss"] = p["test"]["logloss"]
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", default="ml100k,teacher3")
    parser.add_argument("--out", type=Path, default=Path.home() / ".cache" / "autorec-bench" / "quality")
    parser.add_argument("--json", type=Path, default=ROOT / "benchmarks" / "results" / "quality.json")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    measured: dict[str, Any] = {}
    for dataset in args.datasets.split(","):
        measured.update(figures(dataset, args.out))
    record = merge_results(args.json, measured)
    regrets = [v for k, v in record.items() if k.endswith("_logloss_regret")]
    record = merge_results(args.json, {"max_logloss_regret": max(regrets)})  # over every dataset's
    print(json.dumps(record, indent=1, sort_keys=True))


if __name__ == "__main__":
    main()
