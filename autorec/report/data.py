"""The data of the report's figures, read from a study: plain values that tests check.

A trial's numbers come from its user attributes (``metrics``, ``costs``, ``arch_probs``), as the
study runner records them; nothing here draws.

Example:
    >>> non_dominated([(0.80, 5.0), (0.78, 1.0), (0.79, 6.0)])   # (quality, cost)
    [0, 1]
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import optuna
from optuna.trial import FrozenTrial, TrialState

from autorec.study import OBJECTIVES

QUALITY = "val_auc"
ARCH_PROBS_ATTR = "arch_probs"
# A one-shot study's trial attributes (autorec.oneshot.search: STAGE_ATTR, PROXY_ATTR) and its
# record (autorec.oneshot.run.ONESHOT_ATTR); spelled here so the report imports no torch.
STAGE_ATTR, PROXY_ATTR, ONESHOT_ATTR = "stage", "proxy", "oneshot"


# ---- trial values ------------------------------------------------------------------------
def val_auc(trial: FrozenTrial) -> float | None:
    auc = trial.user_attrs.get("metrics", {}).get("val", {}).get("auc")
    return float(auc) if auc is not None and math.isfinite(auc) else None


def test_auc(trial: FrozenTrial) -> float | None:
    auc = trial.user_attrs.get("metrics", {}).get("test", {}).get("auc")
    return float(auc) if auc is not None and math.isfinite(auc) else None


def test_metric(trial: FrozenTrial, name: str) -> float | None:
    """Test ``name`` (logloss, ne, calibration, ...) of a trained trial, if finite."""
    value = trial.user_attrs.get("metrics", {}).get("test", {}).get(name)
    return float(value) if value is not None and math.isfinite(value) else None


def data_text(study: optuna.Study) -> str | None:
    """The study's dataset and how it was split, as a sentence part (None if not recorded)."""
    data = study.user_attrs.get("data")
    if not data:
        return None
    options = data.get("options") or {}
    files = [f"{n}={options[n]}" for n in ("train", "valid", "test") if n in options]
    if files:
        split = "one file per split: " + ", ".join(files)
    else:
        kind = options.get("split", "random")
        shares = "/".join(f"{100 * float(f):g}" for f in options.get("fractions", (0.8, 0.1, 0.1)))
        split = f"{kind} {shares} split" + (f" (seed {data.get('seed', 0)})" if kind == "random" else "")
    where = f" ({data['path']})" if data.get("path") else ""
    return f"{data.get('name')}{where}, {split}"


def trial_cost(trial: FrozenTrial, name: str) -> float | None:
    value = trial.user_attrs.get("costs", {}).get(name)
    return float(value) if value is not None else None


def scored_trials(study: optuna.Study) -> list[FrozenTrial]:
    """Completed trials with a finite validation AUC, in trial order."""
    return [t for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
            if val_auc(t) is not None]


def top_trials(study: optuna.Study, k: int) -> list[FrozenTrial]:
    """The ``k`` scored trials with the highest validation AUC, best first."""
    return sorted(scored_trials(study), key=lambda t: (-val_auc(t), t.number))[:k]


def study_objectives(study: optuna.Study) -> list[str]:
    """The objective names the study optimises (``val_auc`` for a study autorec did not create)."""
    return list(study.user_attrs.get("objectives", [QUALITY]))


# ---- optimisation history ----------------------------------------------------------------
@dataclass(frozen=True)
class HistoryData:
    """Validation AUC per trial: the completed trials, the running best, the pruned ones.

    ``numbers``/``val_auc``/``best_so_far`` are aligned (completed trials in trial order);
    ``pruned`` maps a pruned trial's number to the last AUC it reported.
    """

    numbers: list[int]
    val_auc: list[float]
    best_so_far: list[float]
    pruned: dict[int, float] = field(default_factory=dict)
    failed: list[int] = field(default_factory=list)


def history_data(study: optuna.Study) -> HistoryData:
    """The data of :func:`history_figure`: validation AUC from each trial's ``metrics``."""
    numbers, values, best = [], [], []
    for t in scored_trials(study):
        numbers.append(t.number)
        values.append(val_auc(t))
        best.append(max(values))
    pruned = {t.number: t.intermediate_values[max(t.intermediate_values)]
              for t in study.get_trials(deepcopy=False, states=(TrialState.PRUNED,))
              if t.intermediate_values}
    failed = [t.number for t in study.get_trials(deepcopy=False, states=(TrialState.FAIL,))]
    return HistoryData(numbers, values, best, pruned, failed)


# ---- quality against cost ----------------------------------------------------------------
def non_dominated(points: Sequence[tuple[float, float]]) -> list[int]:
    """Indices of the points (quality to maximise, cost to minimise) no other point dominates."""
    def dominates(a: tuple[float, float], b: tuple[float, float]) -> bool:
        return a[0] >= b[0] and a[1] <= b[1] and a != b

    return [i for i, p in enumerate(points) if not any(dominates(q, p) for q in points)]


@dataclass(frozen=True)
class ParetoData:
    """Validation AUC against a cost for every scored trial; ``front`` holds the numbers of the
    non-dominated ones (``study.best_trials`` in a multi-objective study), sorted by cost."""

    cost: str
    numbers: list[int]
    costs: list[float]
    val_auc: list[float]
    front: list[int]
    baselines: dict[str, tuple[float, float]] = field(default_factory=dict)

    @property
    def on_front(self) -> list[bool]:
        front = set(self.front)
        return [n in front for n in self.numbers]


def default_cost(study: optuna.Study) -> str:
    """The first cost among the study's objectives, else per-sample FLOPs."""
    costs = [o for o in study_objectives(study) if o in OBJECTIVES and OBJECTIVES[o] == "minimize"
             and o != "val_logloss"]
    return costs[0] if costs else "flops"


def pareto_data(study: optuna.Study, cost: str | None = None) -> ParetoData:
    """The data of :func:`pareto_figure` against ``cost`` (a ``costs`` key; by default
    :func:`default_cost`), with the baselines' points when the study trained any."""
    cost = cost or default_cost(study)
    trials = [t for t in scored_trials(study) if trial_cost(t, cost) is not None]
    numbers = [t.number for t in trials]
    costs = [trial_cost(t, cost) for t in trials]
    aucs = [val_auc(t) for t in trials]
    if len(study.directions) > 1:
        best = {t.number for t in study.best_trials}
        front = [n for n in numbers if n in best]
    else:
        front = [numbers[i] for i in non_dominated(list(zip(aucs, costs, strict=True)))]
    by_number = dict(zip(numbers, costs, strict=True))
    front.sort(key=lambda n: (by_number[n], n))
    baselines = {name: (float(b["costs"][cost]), float(b["val"]["auc"]))
                 for name, b in study.user_attrs.get("baselines", {}).items()
                 if cost in b.get("costs", {}) and b.get("val", {}).get("auc") is not None}
    return ParetoData(cost, numbers, costs, aucs, front, baselines)


# ---- parameter importance ----------------------------------------------------------------
def importance_data(study: optuna.Study, seed: int = 0) -> dict[str, float]:
    """fANOVA importance of each searched parameter for validation AUC, most important first;
    empty below two completed trials (importance is undefined there)."""
    if len(scored_trials(study)) < 2:
        return {}
    target = None
    if len(study.directions) > 1:
        objectives = study_objectives(study)
        index = objectives.index(QUALITY) if QUALITY in objectives else 0
        target = lambda t: t.values[index]  # noqa: E731
    evaluator = optuna.importance.FanovaImportanceEvaluator(seed=seed)
    try:
        importances = optuna.importance.get_param_importances(study, evaluator=evaluator, target=target)
    except RuntimeError as exc:  # every scored trial the same value or the same parameters
        if "zero total variance" not in str(exc):
            raise
        return {}
    return {name: float(value) for name, value in importances.items()}



# ---- DNAS architecture probabilities -----------------------------------------------------
@dataclass(frozen=True)
class ArchProbsData:
    """Per interaction layer, the probability of each block kind at each recorded step:
    ``probs[layer][kind_index][step]`` (0 where a layer does not offer that kind)."""

    trial: int
    kinds: list[str]
    steps: list[int]
    probs: list[list[list[float]]]


def arch_probs_data(trial: FrozenTrial) -> ArchProbsData | None:
    """The trial's ``arch_probs`` user attribute (``[layer][step] -> {kind: probability}``; a
    layer given as one mapping is one step), or None when the trial has none."""
    raw = trial.user_attrs.get(ARCH_PROBS_ATTR)
    if not raw:
        return None
    layers = [[entry] if isinstance(entry, Mapping) else list(entry) for entry in raw]
    kinds = sorted({kind for layer in layers for step in layer for kind in step})
    n_steps = max(len(layer) for layer in layers)
    probs = [[[float(layer[s].get(kind, 0.0)) if s < len(layer) else math.nan for s in range(n_steps)]
              for kind in kinds] for layer in layers]
    return ArchProbsData(trial.number, kinds, list(range(n_steps)), probs)


@dataclass(frozen=True)
class ProxyData:
    """A one-shot study's trained candidates: proxy (inherited-weight) and trained val AUC."""

    trials: list[int]
    proxy: list[float]
    trained: list[float]
    tau: float | None
    parts: dict[str, float | None] | None = None  # tau split (autorec.oneshot.parts), where recorded


def proxy_data(study: optuna.Study) -> ProxyData | None:
    """The trainings of a one-shot study that Kendall's tau is taken on (None for other studies)."""
    trained = [t for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
               if t.user_attrs.get(STAGE_ATTR) in ("rerank", "calibrate") and "metrics" in t.user_attrs]
    record = study.user_attrs.get(ONESHOT_ATTR, {})
    wanted = {*record.get("rerank_numbers", []), *record.get("calibration_numbers", [])}
    if wanted:  # the pairs tau was taken on (a re-measured study keeps older trainings too)
        trained = [t for t in trained if t.user_attrs.get("proxy_trial") in wanted]
    # Tau's trainings: the calibration stage when re-ranks were shorter than the trial budget.
    stage = "calibrate" if any(t.user_attrs[STAGE_ATTR] == "calibrate" for t in trained) else "rerank"
    rows = [(t.number, t.user_attrs[PROXY_ATTR]["val_auc"], t.user_attrs["metrics"]["val"]["auc"])
            for t in trained if t.user_attrs[STAGE_ATTR] == stage]
    if not rows:
        return None
    tau = record.get("kendall_tau")
    return ProxyData([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows], tau,
                     record.get("tau_parts"))
