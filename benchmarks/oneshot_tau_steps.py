"""How many supernet steps the one-shot proxy needs: Kendall's tau of the inherited-weight val
AUC against the trained val AUC of a finished one-shot study's trained candidates (its re-ranked
and calibration trials), with the supernet taken at earlier steps.

    .venv/bin/python -m benchmarks.oneshot_tau_steps \\
        --study ~/.cache/autorec-bench/oneshot/oneshot_seed0/study.yaml \\
        --snapshots ~/.cache/autorec-bench/oneshot/snapshots0

``--snapshots`` holds copies of the supernet's checkpoint folders (``step-N``, as
``oneshot/supernet`` had them; the run keeps only its latest) taken while the study ran; the
study's own last checkpoint is scored too. Each is scored on the same validation batches as the
study's candidates were. Prints one row per step and a JSON line.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import warnings
from pathlib import Path

import optuna

from autorec.oneshot.run import rank_correlation, stage_trials
from autorec.oneshot.search import CandidateSearch
from autorec.oneshot.train import OneShotTrainConfig, SupernetTraining
from autorec.study import StudyConfig, TrialRunner, open_storage
from autorec.train.checkpoints import point_latest


def score_at(runner: TrialRunner, folder: Path, trained: list[optuna.trial.FrozenTrial],
             selection_samples: int) -> list[float]:
    """The proxy val AUC of each of ``trained`` with the supernet checkpoint in ``folder``."""
    config = OneShotTrainConfig(**runner.strategy.train_options)
    training = SupernetTraining(runner.space, runner.dataset, config, folder)
    training.resume()
    search = CandidateSearch(training, selection_samples, ("val_auc",))
    return [search.evaluate(search.values_of(t.params))[1]["val_auc"] for t in trained]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--study", type=Path, required=True, help="the one-shot study file")
    parser.add_argument("--snapshots", type=Path, required=True, help="folder of step-N checkpoint copies")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    config = StudyConfig.load(args.study)
    study = optuna.load_study(study_name=config.name, storage=open_storage(config.storage_url))
    trained = stage_trials(study, "rerank")
    truth = [t.user_attrs["metrics"]["val"]["auc"] for t in trained]
    runner = TrialRunner(config)
    samples = runner.strategy.selection_samples
    folders = [*sorted(args.snapshots.glob("step-*")), config.directory / "oneshot" / "supernet"]
    rows = []
    for folder in folders:
        with tempfile.TemporaryDirectory() as tmp:
            if folder.name.startswith("step-"):  # a copy: point a LATEST at it, as the run does
                root = Path(tmp)
                (root / folder.name).symlink_to(folder.resolve())
                point_latest(root, folder.name)
            else:
                root = folder
            proxy = score_at(runner, root, trained, samples)
        last = runner.strategy.train_options["steps"]
        step = int(folder.name.split("-")[1]) if folder.name.startswith("step-") else last
        tau = rank_correlation(proxy, truth)
        rows.append({"step": step, "kendall_tau": tau, "pairs": len(proxy)})
        print(f"supernet step {step}: Kendall tau {tau} over {len(proxy)} trained candidates")
    print(json.dumps({"study": config.name, "rows": rows}))


if __name__ == "__main__":
    main()
