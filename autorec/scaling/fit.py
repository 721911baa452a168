"""The scaling law ``L(C) = E + A * C**(-alpha)`` of test logloss against training compute.

``E`` is the irreducible loss: on synthetic data the teacher's Bayes logloss (known, so held
fixed), otherwise fitted in ``[0, min L)``. The fit is least squares on the logs of the losses
(``scipy.optimize.least_squares``: a point whose loss is at or under ``E`` still counts, where a
straight line through ``log(L - E)`` could not take it), the intervals a bootstrap over the
rungs (resampled with replacement; a resample with fewer than three distinct computes is drawn
again), and :func:`holdout` fits all rungs but the largest and predicts it.

Example:
    >>> import numpy as np
    >>> compute = np.logspace(9, 12, 6)
    >>> loss = 0.4 + 30.0 * compute ** -0.2
    >>> round(fit_law(compute, loss, floor=0.4).alpha, 3)
    0.2
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from scipy.optimize import least_squares


class FitError(ValueError):
    """Too few or unusable points for a law; the message says which."""


@dataclass(frozen=True)
class LawFit:
    """A fitted law: ``floor`` (E), ``scale`` (A), ``alpha``; ``floor_fixed``: E was given."""

    floor: float
    scale: float
    alpha: float
    floor_fixed: bool
    points: int

    def predict(self, compute: float | np.ndarray) -> float | np.ndarray:
        """``L(compute)``."""
        return self.floor + self.scale * np.asarray(compute, dtype=float) ** -self.alpha

    def gain_per_decade(self, compute: float) -> float:
        """How much the loss falls from ``compute`` to ten times it: ``L(C) - L(10 C)``."""
        return float(self.predict(compute) - self.predict(10.0 * compute))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _checked(compute: Sequence[float], loss: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    c, y = np.asarray(compute, dtype=float), np.asarray(loss, dtype=float)
    if c.shape != y.shape or c.ndim != 1:
        raise FitError(f"compute and loss: expected two lists of one length, got {c.shape} and {y.shape}")
    if not (np.all(np.isfinite(c)) and np.all(c > 0) and np.all(np.isfinite(y)) and np.all(y > 0)):
        raise FitError("compute and loss: expected finite positive numbers")
    if len(np.unique(c)) < 3:
        raise FitError(f"a law needs at least 3 distinct computes, got {len(np.unique(c))}")
    return c, y


def fit_law(compute: Sequence[float], loss: Sequence[float], floor: float | None = None) -> LawFit:
    """Fit ``loss = E + A * compute**(-alpha)``; ``floor``: E known (else fitted)."""
    c, y = _checked(compute, loss)
    x = np.log(c / c[0])  # compute relative to the first point keeps A of order one
    if floor is not None and np.all(y <= floor):
        raise FitError(f"every loss is at or under the floor {floor:.4f}: nothing to fit")

    def unpack(p: np.ndarray) -> tuple[float, float, float]:
        e = floor if floor is not None else float(y.min() * (1 - np.exp(-np.exp(p[2]))))
        return e, float(np.exp(p[0])), float(p[1])

    def residuals(p: np.ndarray) -> np.ndarray:
        e, a, alpha = unpack(p)
        return np.log(e + a * np.exp(-alpha * x)) - np.log(y)

    e0 = floor if floor is not None else 0.9 * y.min()
    start = [np.log(max(y[0] - e0, 1e-6)), 0.1] + ([] if floor is not None else [0.0])
    best = least_squares(residuals, np.array(start), method="lm" if len(y) > len(start) else "trf")
    e, a, alpha = unpack(best.x)
    return LawFit(floor=e, scale=float(a * c[0] ** alpha), alpha=alpha, floor_fixed=floor is not None,
                  points=len(y))


def bootstrap(compute: Sequence[float], loss: Sequence[float], floor: float | None = None,
              samples: int = 500, seed: int = 0, level: float = 0.9) -> dict[str, tuple[float, float]]:
    """``level`` intervals of ``alpha`` and ``scale`` over fits to rungs resampled with replacement."""
    c, y = _checked(compute, loss)
    rng = np.random.default_rng(seed)
    alphas, scales = [], []
    while len(alphas) < samples:
        idx = rng.integers(0, len(c), len(c))
        if len(np.unique(c[idx])) < 3:
            continue
        try:
            law = fit_law(c[idx], y[idx], floor)
        except FitError:
            continue
        alphas.append(law.alpha)
        scales.append(law.scale)
    q = [(1 - level) / 2 * 100, (1 + level) / 2 * 100]
    return {"alpha": tuple(float(v) for v in np.percentile(alphas, q)),  # type: ignore[dict-item]
            "scale": tuple(float(v) for v in np.percentile(scales, q))}


def holdout(compute: Sequence[float], loss: Sequence[float], floor: float | None = None) -> dict[str, float]:
    """Fit every rung but the largest compute, predict it: the predicted and measured excess loss
    (``L - E``, E of the fit) and the relative error of the prediction."""
    c, y = _checked(compute, loss)
    order = np.argsort(c)
    top = order[-1]
    law = fit_law(c[order[:-1]], y[order[:-1]], floor)
    predicted, measured = float(law.predict(c[top]) - law.floor), float(y[top] - law.floor)
    return {"compute": float(c[top]), "predicted_excess": predicted, "measured_excess": measured,
            "rel_err": abs(predicted - measured) / abs(measured) if measured else float("inf")}
