"""A ladder study read back: the rungs of each family and the law fitted to them.

Training compute of a rung is its training FLOPs per sample (forward and backward, from
:mod:`autorec.costs`) times the samples it trained on. The loss is the test logloss; the floor
``E`` is the Bayes logloss its trials recorded (synthetic data), else fitted.

Example:
    >>> summary = summarize_ladder({"dlrm": [Rung(0, 1, 1e9, 1e3, 0.60, 0.70),
    ...     Rung(1, 2, 1e10, 1e4, 0.55, 0.72), Rung(2, 3, 1e11, 1e5, 0.52, 0.73),
    ...     Rung(3, 4, 1e12, 1e6, 0.505, 0.74)]}, floor=0.45, bootstrap_samples=50)
    >>> summary.families["dlrm"]["rungs"], round(summary.families["dlrm"]["flops_span_decades"], 1)
    (4, 3.0)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import optuna
from optuna.trial import TrialState

from autorec.scaling.fit import FitError, bootstrap, fit_law, holdout
from autorec.scaling.ladder import SCALE_ATTR


@dataclass(frozen=True)
class Rung:
    """One trained rung: ``compute`` in training FLOPs, ``flops`` per sample, test logloss and AUC."""

    rung: int
    trial: int
    compute: float
    flops: float
    logloss: float
    auc: float
    seconds: float = 0.0
    params: float = 0.0
    embedding_bytes: float = 0.0


@dataclass
class LadderSummary:
    """The fits of every family (``families[name]``: a flat dict) and the rungs they came from."""

    rungs: dict[str, list[Rung]]
    families: dict[str, dict[str, Any]] = field(default_factory=dict)
    floor: float | None = None

    def steepest(self) -> str | None:
        """The family whose fit gains most logloss per tenfold compute at its top rung."""
        gains = {n: f["gain_per_decade_at_top"] for n, f in self.families.items()
                 if f.get("gain_per_decade_at_top") is not None}
        return max(gains, key=lambda n: gains[n]) if gains else None

    def flat(self) -> dict[str, float | int | None]:
        """The flat numbers of the scaling benchmark: ``<family>_alpha``, ``_holdout_rel_err``,
        ``_flops_span_decades``, ``_rungs`` (and ``_alpha_lo``/``_hi``, ``_gain_per_decade_at_top``)."""
        out: dict[str, float | int | None] = {}
        for name, fit in self.families.items():
            for key in ("alpha", "alpha_lo", "alpha_hi", "holdout_rel_err", "flops_span_decades", "rungs",
                        "gain_per_decade_at_top"):
                out[f"{name}_{key}"] = fit.get(key)
        out["bayes_logloss"] = self.floor
        return out


def ladder_rungs(study: optuna.Study) -> tuple[dict[str, list[Rung]], float | None]:
    """The completed rungs of a ladder study by family (in rung order) and the recorded floor."""
    out: dict[str, list[Rung]] = {}
    floor = None
    for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
        scale, metrics = t.user_attrs.get(SCALE_ATTR), t.user_attrs.get("metrics")
        costs = t.user_attrs.get("costs")
        if not (scale and metrics and costs):
            continue
        floor = t.user_attrs.get("bayes_logloss", floor)
        samples = metrics.get("train_samples") or 0
        out.setdefault(scale["family"], []).append(Rung(
            rung=scale["rung"], trial=t.number, compute=costs["train_flops"] * samples, flops=costs["flops"],
            logloss=metrics["test"]["logloss"], auc=metrics["test"]["auc"],
            seconds=metrics.get("seconds", 0.0),
            params=costs.get("dense_params", 0.0) + costs.get("embedding_params", 0.0),
            embedding_bytes=costs.get("embedding_bytes", 0.0)))
    return {name: sorted(rungs, key=lambda r: r.rung) for name, rungs in sorted(out.items())}, floor


def is_ladder(study: optuna.Study) -> bool:
    """Whether ``study``'s trials are rungs of a ladder (strategy ``ladder``)."""
    return any(SCALE_ATTR in t.user_attrs for t in study.get_trials(deepcopy=False))


def summarize_ladder(rungs: dict[str, list[Rung]], floor: float | None = None,
                     bootstrap_samples: int = 500, seed: int = 0) -> LadderSummary:
    """Fit each family's law; a family with too few rungs for a fit (or a held-out check) gets its
    counts and the reason (``error``) instead of numbers."""
    summary = LadderSummary(rungs=rungs, floor=floor)
    for name, points in rungs.items():
        usable = [r for r in points if r.compute > 0]
        computes, losses = [r.compute for r in usable], [r.logloss for r in usable]
        fit: dict[str, Any] = {"rungs": len(points), "flops_span_decades": (
            math.log10(max(r.flops for r in points) / min(r.flops for r in points)) if points else 0.0)}
        try:
            law = fit_law(computes, losses, floor)
            interval = bootstrap(computes, losses, floor, samples=bootstrap_samples, seed=seed)
            fit.update(alpha=law.alpha, scale=law.scale, floor=law.floor, floor_fixed=law.floor_fixed,
                       alpha_lo=interval["alpha"][0], alpha_hi=interval["alpha"][1],
                       top_compute=max(computes), gain_per_decade_at_top=law.gain_per_decade(max(computes)))
        except FitError as exc:
            fit["error"] = str(exc)
        try:
            held = holdout(computes, losses, floor)
            fit.update(holdout_rel_err=held["rel_err"], holdout_predicted_excess=held["predicted_excess"],
                       holdout_measured_excess=held["measured_excess"], holdout_compute=held["compute"])
        except FitError as exc:
            fit["holdout_error"] = f"the held-out check fits all rungs but the largest: {exc}"
        summary.families[name] = fit
    return summary


def study_ladder(study: optuna.Study, bootstrap_samples: int = 500) -> LadderSummary:
    """:func:`summarize_ladder` of a ladder study's completed rungs."""
    rungs, floor = ladder_rungs(study)
    return summarize_ladder(rungs, floor, bootstrap_samples)
