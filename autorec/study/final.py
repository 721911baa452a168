"""After the search: the best few trials retrained in full, and the presets with the same budget.

A trial trains on the short budget that ranks architectures (``budget.epochs``, cut early by the
pruner: successive halving or Hyperband over epochs with ``pruner: hyperband``); that budget
must not decide how good the winner ends up. With ``budget.final_top: k`` the k trials of best
validation (the monitored metric: logloss by default) are trained again for
``budget.final_epochs`` epochs (early stopping and the kept checkpoint as in every training),
and the study's answer is the one of best validation after that. The presets the study compares
with (``baselines``) are then trained with that same full budget, so the verdict compares like
with like.

Each full training is recorded in the study's ``final`` user attribute (trial number -> val,
test, best epoch, seconds, checkpoint) as soon as it ends; its checkpoints are under
``<study>/final/<trial>``, so a rerun after a kill resumes the one it was in and skips the rest.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from autorec.metrics import monitored_score
from autorec.study.config import StudyConfig, StudyConfigError
from autorec.study.results import trial_arch
from autorec.study.reuse import REUSED_ATTR

FINAL_ATTR = "final"  # study user attr: trial number (str) -> its full training's record


def check_final(config: StudyConfig) -> None:
    """A oneshot or ladder study trains what it answers with itself: no final stage on top."""
    if config.budget.final_top and config.strategy.name in ("oneshot", "ladder"):
        raise StudyConfigError(f"{config.source}: budget.final_top: a {config.strategy.name} study "
                               "trains what it answers with itself; drop final_top")


def full_budget(config: StudyConfig, train_config: Any) -> Any:
    """``train_config`` (a trial's) stretched to the full budget: ``final_epochs``, every step of
    every epoch, patience of at least 2, resumable from its checkpoints."""
    b = config.budget
    return dataclasses.replace(train_config, epochs=b.final_epochs, max_steps_per_epoch=None,
                               patience=max(b.patience, 2), resume=train_config.checkpoint_dir is not None)


def validation_key(config: StudyConfig) -> Callable[[dict[str, Any]], float]:
    """Sort key of a metrics record (``{"val": ..}``) by :attr:`StudyConfig.answer_by`, best first."""
    return lambda record: -monitored_score(record["val"], config.answer_by)


def ranked_trials(study: optuna.Study, config: StudyConfig) -> list[FrozenTrial]:
    """Completed trials that trained (not reused), best validation first."""
    key = validation_key(config)
    done = [t for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
            if "metrics" in t.user_attrs and REUSED_ATTR not in t.user_attrs]
    return sorted(done, key=lambda t: (key(t.user_attrs["metrics"]), t.number))


def train_finals(config: StudyConfig, study: optuna.Study, runner: Any,
                 log: Callable[[str], None] = print) -> dict[str, dict[str, Any]]:
    """Train the ``final_top`` best trials in full (those not recorded yet); returns the record."""
    from autorec.train.trainer import Trainer

    done: dict[str, dict[str, Any]] = dict(study.user_attrs.get(FINAL_ATTR, {}))
    for trial in ranked_trials(study, config)[:config.budget.final_top]:
        if str(trial.number) in done:
            continue
        log(f"final: training trial {trial.number} in full ({config.budget.final_epochs} epochs)")
        folder = config.directory / "final" / str(trial.number)
        spec = trial_arch(trial)
        result = Trainer(spec, runner.dataset, full_budget(config, runner.train_config(folder))).fit()
        done[str(trial.number)] = {"val": result.val, "test": result.test, "best_epoch": result.best_epoch,
                                   "epochs": len(result.history), "seconds": result.seconds,
                                   "checkpoint": str(folder / "best")}
        study.set_user_attr(FINAL_ATTR, done)
    return done
