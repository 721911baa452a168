"""What every stand-alone training of a one-shot study shares: its trials by stage, and one
training of a candidate's architecture recorded as a trial of its stage (the re-rank's, tau's,
the final rung's and the final's; :mod:`autorec.oneshot.run` and :mod:`autorec.oneshot.rung`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import optuna
from optuna.distributions import CategoricalDistribution
from optuna.trial import FrozenTrial, TrialState

from autorec.arch import ArchSpec
from autorec.oneshot.search import PROXY_ATTR, STAGE_ATTR, scores_to_values

ONESHOT_ATTR = "oneshot"  # study user attr: the run's record (seconds per stage, tau)
PAUSE_ATTR = "pause_at_step"  # trial user attr: the step a paused training (the rung's) stopped at


def stage_trials(study: optuna.Study, stage: str) -> list[FrozenTrial]:
    """The study's complete trials of ``stage`` (``rerank``, ``final_rung``, ``final`` ...)."""
    return [t for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
            if t.user_attrs.get(STAGE_ATTR) == stage]


def train_stage(config: Any, study: optuna.Study, runner: Any, proxy: FrozenTrial, stage: str,
                train_config: Any, log: Callable[[str], None],
                scores: dict[str, float], keep_progress: bool = False) -> FrozenTrial:
    """Train ``proxy``'s architecture stand-alone and record it as a trial of ``stage``;
    ``scores``: the inherited-weight scores that chose it (its own, or a rescore's); with
    ``keep_progress`` its resumable checkpoint stays (a training that may go on). A training that
    pauses (``train_config.pause_at_step``) records that step (user attribute ``pause_at_step``)."""
    from autorec.train.checkpoints import drop_progress
    from autorec.train.trainer import Trainer

    spec = ArchSpec.from_dict(proxy.user_attrs["arch"]).replace(
        name=f"{config.name}-{stage}{proxy.number}")
    log(f"{stage}: training candidate {proxy.number} (proxy val AUC {scores['val_auc']:.4f})")
    result = Trainer(spec, runner.dataset, train_config).fit()
    metrics = {"val": result.val, "test": result.test, "best_epoch": result.best_epoch,
               "train_samples_per_s": result.samples_per_s, "train_samples": result.train_samples,
               "data_wait_share": result.data_wait_share,
               "seconds": result.seconds, "resumed_from": result.resumed_from}
    costs = proxy.user_attrs["costs"]
    values = scores_to_values({"val_auc": result.val["auc"], "val_loss": result.val["logloss"]}, costs,
                              config.objectives)
    trial = optuna.trial.create_trial(
        params=dict(proxy.params),
        distributions={k: CategoricalDistribution(v.choices) if isinstance(v, CategoricalDistribution) else v
                       for k, v in proxy.distributions.items()},
        values=values,
        user_attrs={STAGE_ATTR: stage, "proxy_trial": proxy.number, "arch": spec.to_dict(), "costs": costs,
                    "metrics": metrics, "train_seed": train_config.seed,
                    "checkpoint": str(train_config.checkpoint_dir) + "/best",
                    PROXY_ATTR: scores, "screen": proxy.user_attrs[PROXY_ATTR],
                    **({PAUSE_ATTR: train_config.pause_at_step} if train_config.pause_at_step else {})})
    study.add_trial(trial)
    if not keep_progress:
        drop_progress(Path(train_config.checkpoint_dir))  # a finished training keeps its best checkpoint
    return trial  # what the stages read of it (its user attributes) is what was stored
