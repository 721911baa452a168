"""A study's results: its trials as rows, the best by validation AUC, the Pareto front, the
baselines, and the verdict of the best against the best preset trained with the same budget."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from autorec.arch import ArchSpec
from autorec.metrics import monitored_score
from autorec.study.reuse import REUSED_ATTR

if TYPE_CHECKING:
    from autorec.study.config import StudyConfig


@dataclass
class StudySummary:
    """The study's results: the best trials by validation AUC, the Pareto front, baselines."""

    name: str
    objectives: tuple[str, ...]
    trials: list[dict[str, Any]]
    pareto: list[int]
    baselines: dict[str, dict[str, Any]]
    final: dict[str, dict[str, Any]] = field(default_factory=dict)  # autorec.study.final
    monitor: str = "val_auc"  # ranks the full trainings (StudyConfig.answer_by)

    @property
    def best(self) -> dict[str, Any] | None:
        """The study's answer: of the trials retrained in full, the one of best validation (by
        :attr:`StudyConfig.answer_by`), with its full training's metrics; else the completed trial of highest
        validation AUC (the one that trained it)."""
        if self.final:
            number, full = max(self.final.items(), key=lambda kv: monitored_score(kv[1]["val"], self.monitor))
            row = next((t for t in self.trials if t["number"] == int(number)), {"number": int(number)})
            return {**row, "val_auc": full["val"]["auc"], "test_auc": full["test"]["auc"],
                    "test_logloss": full["test"].get("logloss"), "full_training": True}
        done = [t for t in self.trials if t["state"] == "COMPLETE" and t.get("val_auc") is not None
                and t.get("test_auc") is not None and t.get("reused_from") is None]
        return max(done, key=lambda t: t["val_auc"]) if done else None

    def verdict(self) -> str:
        best = self.best
        if best is None:
            return "no trial completed"
        how = " retrained in full," if best.get("full_training") else ""
        budget = "the same full budget" if best.get("full_training") else "the same budget"
        line = (f"best architecture: trial {best['number']}{how} with validation AUC {best['val_auc']:.4f}, "
                f"test AUC {best['test_auc']:.4f}")
        if not self.baselines:
            return line
        top_name, top = max(self.baselines.items(), key=lambda kv: kv[1]["test"]["auc"])
        if best["test_auc"] > top["test"]["auc"]:
            return (f"{line}: beats every preset trained with {budget} "
                    f"(best preset {top_name}: test AUC {top['test']['auc']:.4f})")
        return (f"{line}: does NOT beat the best preset trained with {budget} "
                f"({top_name}: test AUC {top['test']['auc']:.4f})")

    def to_dict(self) -> dict[str, Any]:
        baselines = {k: {"val_auc": v["val"]["auc"], "test_auc": v["test"]["auc"],
                         "test_logloss": v["test"].get("logloss")} for k, v in self.baselines.items()}
        return {"name": self.name, "objectives": list(self.objectives), "best": self.best,
                "pareto": self.pareto, "baselines": baselines, "trials": self.trials,
                "final": self.final, "verdict": self.verdict()}


def trial_row(t: FrozenTrial) -> dict[str, Any]:
    metrics = t.user_attrs.get("metrics", {})
    costs = t.user_attrs.get("costs", {})
    return {
        "number": t.number, "state": t.state.name,
        "val_auc": metrics.get("val", {}).get("auc"), "test_auc": metrics.get("test", {}).get("auc"),
        "test_logloss": metrics.get("test", {}).get("logloss"),
        "values": t.values, "costs": costs, "fail_reason": t.user_attrs.get("fail_reason"),
        "fail_kind": t.user_attrs.get("fail_kind"),
        "seconds": (t.duration.total_seconds() if t.duration else None),
        "reused_from": t.user_attrs.get(REUSED_ATTR),
    }


def summarize(study: optuna.Study, config: StudyConfig | None = None) -> StudySummary:
    objectives = tuple(study.user_attrs.get("objectives", ["val_auc"]))
    trials = [trial_row(t) for t in study.get_trials(deepcopy=False)]
    complete = [t for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))]
    # A reused trial repeats its twin's point: the front names the trial that trained it.
    pareto = [t.number for t in study.best_trials if REUSED_ATTR not in t.user_attrs] if complete else []
    return StudySummary(study.study_name, objectives, trials, pareto,
                        dict(study.user_attrs.get("baselines", {})), dict(study.user_attrs.get("final", {})),
                        study.user_attrs.get("answer_by", study.user_attrs.get("monitor", "val_auc")))


def select_trials(study: optuna.Study, trial: int | None = None, best: int = 1) -> list[FrozenTrial]:
    """Trial number ``trial``, or the ``best`` completed trials by validation AUC (each
    architecture once: a trial that reused another's training is left out)."""
    trials = study.get_trials(deepcopy=False)
    if trial is not None:
        found = [t for t in trials if t.number == trial]
        if not found:
            raise ValueError(f"--trial: study {study.study_name!r} has no trial {trial} "
                             f"(it has 0..{len(trials) - 1})")
        if found[0].state != TrialState.COMPLETE:
            raise ValueError(f"--trial: trial {trial} is {found[0].state.name}, not COMPLETE")
        return found
    done = [t for t in trials if t.state == TrialState.COMPLETE and "metrics" in t.user_attrs
            and REUSED_ATTR not in t.user_attrs]
    if not done:
        raise ValueError(f"study {study.study_name!r} has no completed trial yet")
    return sorted(done, key=lambda t: -t.user_attrs["metrics"]["val"]["auc"])[:best]

def trial_arch(trial: FrozenTrial) -> ArchSpec:
    """The ArchSpec a trial evaluated."""
    data = trial.user_attrs.get("arch")
    if data is None:
        raise KeyError(f"trial {trial.number} has no architecture recorded")
    return ArchSpec.from_dict(data, f"trial {trial.number}")


def dumps(summary: StudySummary) -> str:
    def clean(value: Any) -> Any:
        if isinstance(value, float) and not math.isfinite(value):
            return None
        if isinstance(value, dict):
            return {k: clean(v) for k, v in value.items()}
        if isinstance(value, list):
            return [clean(v) for v in value]
        return value

    return json.dumps(clean(summary.to_dict()))
