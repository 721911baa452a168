"""Multi-trial architecture studies on Optuna storages.

A study file (YAML, :mod:`autorec.study.config`) names the dataset, the search space, the
strategy, the objectives, the budget and the storage. Every trial trains its candidate on the
short budget, reports validation AUC per epoch (single-objective studies prune on it), and
stores its ArchSpec (as an Optuna artifact and a user attribute), metrics and costs in the study.

The package, by responsibility: ``config`` (the study file's pydantic models), ``storage``
(Optuna storages and the study in one), ``seeding`` (the sampler seeded per trial, so a rerun
after a kill draws what the uncut run drew), ``recovery`` (trials of dead workers retried, the
budget count and claim), ``reuse`` (an architecture already trained is not trained again),
``trial`` (one trial: propose, cost, train, record), ``local`` (worker processes on this machine),
``ray_runner`` (Ray Tune scheduling the trials on a cluster), ``results`` (summary, Pareto
front, verdict), ``handoff`` (export of trials and their retrain command).

Example:
    >>> config = StudyConfig.load("studies/quickstart.yaml")
    >>> summary = run_study(config)                               # doctest: +SKIP
"""

from autorec.study.config import (
    OBJECTIVES,
    PRUNERS,
    Budget,
    DataConfig,
    StrategyConfig,
    StudyConfig,
    StudyConfigError,
    study_json_schema,
)
from autorec.study.handoff import export_trials, retrain_command
from autorec.study.local import run_study, train_baselines
from autorec.study.recovery import (
    INTERRUPTED_ATTR,
    WORKER_ATTR,
    finished_count,
    mark_interrupted,
    recover_interrupted,
)
from autorec.study.results import StudySummary, dumps, select_trials, summarize, trial_arch, trial_row
from autorec.study.reuse import REUSED_ATTR, reused_count, training_key
from autorec.study.storage import create_study, load_study, open_storage
from autorec.study.trial import TrialRunner, cost_summary

__all__ = [
    "INTERRUPTED_ATTR", "OBJECTIVES", "PRUNERS", "REUSED_ATTR", "WORKER_ATTR", "Budget", "DataConfig",
    "StrategyConfig", "StudyConfig", "StudyConfigError", "StudySummary", "TrialRunner", "cost_summary",
    "create_study", "dumps", "export_trials", "finished_count", "load_study", "mark_interrupted",
    "open_storage", "recover_interrupted", "retrain_command", "reused_count", "run_study", "select_trials",
    "study_json_schema", "summarize", "train_baselines", "training_key", "trial_arch", "trial_row",
]
