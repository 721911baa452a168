"""A learned accuracy predictor over the inherited-weight parts of the proxy.

The supernet's proxy of an architecture mixes a reading of its layers with a reading of its
embeddings (:mod:`autorec.oneshot.parts`), and on issue 20's ``scale`` workload the first ranks
trained architectures at chance while the second ranks them well. How much each reading is worth
is learned from architectures that were trained stand-alone (another study's trials, on the same
workload and budget): a least-squares fit of their validation AUC on the parts' scores, with an
intercept. The fit's weights say how far the search can trust each part (a weight near 0: the part
says nothing that training confirms); the predictor ranks new architectures from the same
inherited-weight scores, with no further training. ``nonnegative=True`` bounds the weights at 0
(:func:`scipy.optimize.lsq_linear`; the intercept stays free): a part whose unbounded weight
would come out negative gets none, so no part is read upside down, which an unbounded fit on a
few dozen labels does to a part that ranks at chance.

Example:
    >>> fit = fit_predictor({"layers": [0.1, 0.3, 0.2, 0.4], "features": [1.0, 2.0, 3.0, 4.0]},
    ...                     [0.6, 0.7, 0.8, 0.9])
    >>> round(fit.weights["features"], 3), round(abs(fit.weights["layers"]), 3)
    (0.1, 0.0)
    >>> [round(v, 2) for v in fit.predict({"layers": [0.0], "features": [5.0]})]
    [1.0]
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from scipy.optimize import lsq_linear
from scipy.stats import kendalltau

INPUTS = ("layers", "features")  # the parts a predictor reads by default (the two that add up)


@dataclasses.dataclass(frozen=True)
class PartsPredictor:
    """Predicted AUC = ``intercept`` + sum over parts of ``weights[part]`` x the part's score."""

    intercept: float
    weights: dict[str, float]

    def predict(self, parts: Mapping[str, Sequence[float]]) -> list[float]:
        """The predicted AUC of each architecture whose part scores are ``parts`` (part ->
        one score per architecture, in order; every part of ``weights`` present)."""
        missing = [p for p in self.weights if p not in parts]
        if missing:
            raise KeyError(f"predictor: no scores for part(s) {', '.join(missing)} "
                           f"(given {', '.join(parts) or 'none'})")
        rows = np.column_stack([np.asarray(parts[p], dtype=float) for p in self.weights])
        return [float(v) for v in self.intercept + rows @ np.asarray(list(self.weights.values()))]


def fit_predictor(parts: Mapping[str, Sequence[float]], trained: Sequence[float],
                  inputs: Sequence[str] = INPUTS, nonnegative: bool = False) -> PartsPredictor:
    """Least squares of ``trained`` (stand-alone validation AUCs) on the ``inputs`` parts' scores of
    the same architectures, with an intercept (:func:`numpy.linalg.lstsq`; with ``nonnegative``,
    every part's weight bounded at 0 by :func:`scipy.optimize.lsq_linear`). Needs more
    architectures than inputs + 1, and each input's scores must vary; a ValueError naming what is
    short otherwise."""
    if not inputs:
        raise ValueError("fit_predictor: no inputs given (expected part names, as 'layers', 'features')")
    missing = [p for p in inputs if p not in parts]
    if missing:
        raise ValueError(f"fit_predictor: no scores for part(s) {', '.join(missing)} "
                         f"(given {', '.join(parts)})")
    n = len(trained)
    for part in inputs:
        if len(parts[part]) != n:
            raise ValueError(f"fit_predictor: part {part!r} has {len(parts[part])} scores "
                             f"for {n} trained AUCs")
        if n and float(np.ptp(np.asarray(parts[part], dtype=float))) == 0.0:
            raise ValueError(f"fit_predictor: part {part!r} scores every architecture alike; "
                             f"nothing to learn its weight from")
    if n <= len(inputs) + 1:
        raise ValueError(f"fit_predictor: {n} trained architectures for {len(inputs)} weights and an "
                         f"intercept; expected at least {len(inputs) + 2}")
    design = np.column_stack([np.ones(n), *(np.asarray(parts[p], dtype=float) for p in inputs)])
    target = np.asarray(trained, dtype=float)
    if nonnegative:
        lower = np.array([-np.inf] + [0.0] * len(inputs))
        coefficients = lsq_linear(design, target, bounds=(lower, np.inf), method="bvls").x
    else:
        coefficients = np.linalg.lstsq(design, target, rcond=None)[0]
    return PartsPredictor(float(coefficients[0]),
                          {p: float(w) for p, w in zip(inputs, coefficients[1:], strict=True)})


def predictor_sources(value: Any) -> tuple[dict[str, str], ...]:
    """The ``tau_predictor_from`` option checked: a list of ``{storage: <Optuna storage URL>,
    study: <name>}``, the multi-trial studies whose trained trials a predictor learns from; a
    ValueError naming the entry and key at fault otherwise.

    Example:
        >>> predictor_sources([{"storage": "sqlite:///tpe.db", "study": "tpe"}])
        ({'storage': 'sqlite:///tpe.db', 'study': 'tpe'},)
    """
    if value is None:
        return ()
    if not isinstance(value, list) or not value:
        raise ValueError(f"tau_predictor_from: expected a list of {{storage, study}} mappings, "
                         f"got {value!r}")
    for i, entry in enumerate(value):
        if not isinstance(entry, dict) or set(entry) != {"storage", "study"}:
            raise ValueError(f"tau_predictor_from[{i}]: expected a mapping with keys storage and study, "
                             f"got {entry!r}")
        for key in ("storage", "study"):
            if not isinstance(entry[key], str) or not entry[key]:
                raise ValueError(f"tau_predictor_from[{i}].{key}: expected a non-empty string, "
                                 f"got {entry[key]!r}")
    return tuple({"storage": e["storage"], "study": e["study"]} for e in value)


def predictor_figures(learned: Mapping[str, Sequence[float]], labels: Sequence[float],
                      parts: Mapping[str, Sequence[float]],
                      trained: Sequence[float]) -> dict[str, float | int]:
    """A predictor fitted on the architectures whose part scores are ``learned`` and stand-alone
    AUCs ``labels`` (:func:`fit_predictor`), judged on others (``parts``, ``trained``) it never
    saw: ``tau_predicted`` (Kendall's tau of its predictions against ``trained``),
    ``predictor_fit_tau`` (the same on what it learned from), ``predictor_pairs`` and
    ``predictor_weight_<part>``; and the same figures of the fit with its weights bounded at 0
    (``nonnegative``), under keys that end in ``_nonnegative``."""
    out: dict[str, float | int] = {"predictor_pairs": len(labels)}
    for suffix, nonnegative in (("", False), ("_nonnegative", True)):
        predictor = fit_predictor(learned, labels, nonnegative=nonnegative)
        for key, scores, truth in (("tau_predicted", parts, trained), ("predictor_fit_tau", learned, labels)):
            out[key + suffix] = float(kendalltau(predictor.predict(scores), truth).statistic)
        out |= {f"predictor_weight_{part}{suffix}": weight for part, weight in predictor.weights.items()}
    return out
