"""The worker side of the Ray Tune backend: one trial, trained where Ray placed it.

:func:`train_trial` is the Tune trainable. It never opens the study's storage: it reports each
epoch's validation AUC (ASHA stops trials on it) and, last, the objectives and records, under the
keys below, which the driver (:mod:`autorec.study.ray_runner`) writes onto the Optuna trial.

Example:
    >>> values = _objective_values({"auc": 0.8}, {"flops": 1e6})   # every objective, NaN if unmeasured
    >>> values["val_auc"], values["flops"], math.isnan(values["latency_ms"])
    (0.8, 1000000.0, True)
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from autorec.arch import ArchSpec
from autorec.study.config import OBJECTIVES, StudyConfig
from autorec.study.trial import TrialRunner, cost_summary, failure_kind

if TYPE_CHECKING:
    from autorec.train.trainer import EpochRecord

# Keys of the Tune config a proposal hands to its trainable, and of the results it reports.
ARCH_KEY, NUMBER_KEY, PROPOSAL_ERROR_KEY = "autorec_arch", "autorec_trial", "autorec_proposal_error"
TRAIN_KEY = "autorec_train_overrides"  # what the strategy changed of the budget's training (JSON)
OUTCOME_KEY, FAIL_KEY, FAIL_KIND_KEY = "autorec_outcome", "autorec_fail_reason", "autorec_fail_kind"
NODE_KEY = "autorec_node"  # the Ray node a trial runs on (its id), recorded as the trial's ``node``

_RUNNER: tuple[StudyConfig, TrialRunner] | None = None


def _runner(config: StudyConfig) -> TrialRunner:
    """The worker process's TrialRunner (dataset loaded once, reused by the trials it runs)."""
    global _RUNNER
    if _RUNNER is None or _RUNNER[0] != config:
        _RUNNER = (config, TrialRunner(config))
    return _RUNNER[1]


def _objective_values(val: Mapping[str, float], costs: Mapping[str, float]) -> dict[str, float]:
    """Every objective a study may name, NaN where not measured (yet): Tune wants each metric
    of the search in each result."""
    values = {"val_auc": val.get("auc", math.nan), "val_logloss": val.get("logloss", math.nan)}
    return {o: float(values[o] if o in values else costs.get(o, math.nan)) for o in OBJECTIVES}


def train_trial(params: dict[str, Any], study: StudyConfig) -> None:
    """The Tune trainable: train the proposed arch with the trials' budget, reporting per epoch.

    Each epoch but the last reports its validation AUC (ASHA stops trials on it); the final
    report carries the objectives (validation metrics of the best epoch, as in the local
    backend) and the records the driver writes onto the Optuna trial.
    """
    import ray
    from ray import tune

    from autorec.train.checkpoints import drop_progress
    from autorec.train.trainer import Trainer

    if PROPOSAL_ERROR_KEY in params:
        tune.report({**_objective_values({}, {}), FAIL_KEY: params[PROPOSAL_ERROR_KEY]})
        return
    runner = _runner(study)
    node = ray.get_runtime_context().get_node_id()
    spec = ArchSpec.from_json(params[ARCH_KEY], f"trial {params[NUMBER_KEY]}")
    costs = cost_summary(spec)
    last_epoch = study.budget.epochs - 1

    def epoch_result(record: EpochRecord, val: Mapping[str, float]) -> dict[str, Any]:
        return {**_objective_values(val, costs), "epoch": record.epoch, "epoch_val_auc": record.val["auc"],
                NODE_KEY: node}

    def on_epoch(record: EpochRecord) -> None:
        if record.epoch < last_epoch:  # the final report stands for the last epoch
            tune.report(epoch_result(record, record.val))

    checkpoint = study.directory / "trials" / str(params[NUMBER_KEY])
    try:
        limited = dataclasses.replace(runner.train_config(checkpoint),
                                      time_limit_s=study.budget.trial_time_limit_s,
                                      **json.loads(params.get(TRAIN_KEY, "{}")))
        trainer = Trainer(spec, runner.dataset, limited, on_epoch=on_epoch)
        result = trainer.fit()
        if "latency_ms" in study.objectives:
            costs["latency_ms"] = 1e3 * runner._latency(trainer)
    except Exception as exc:  # recorded like the local backend's failures; Tune's stop is SystemExit
        tune.report({**_objective_values({}, {}), FAIL_KEY: f"{type(exc).__name__}: {exc}",
                     FAIL_KIND_KEY: failure_kind(exc), NODE_KEY: node})
        return
    drop_progress(checkpoint)  # a finished trial keeps its best checkpoint only
    outcome = {"costs": costs, "checkpoint": str(checkpoint / "best"),
               "metrics": {"val": result.val, "test": result.test, "best_epoch": result.best_epoch,
                           "train_samples_per_s": result.samples_per_s,
                           "data_wait_share": result.data_wait_share, "train_samples": result.train_samples,
                           "resumed_from": result.resumed_from, "seconds": result.seconds}}
    tune.report({**epoch_result(result.history[-1], result.val), OUTCOME_KEY: json.dumps(outcome),
                 NODE_KEY: node})
