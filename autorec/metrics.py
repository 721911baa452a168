"""Binary CTR metrics: AUC, logloss, normalized entropy (NE) and calibration.

A room of its own at the bottom: the trainer, the precision probe and growth all score models
with it, and it imports nothing of autorec. AUC is scikit-learn's; logloss and NE are two lines of
numpy each (clipped as the trainer's loss sees them), simpler than adapting a library's API.
"""

from __future__ import annotations

import math

import numpy as np
from sklearn.metrics import roc_auc_score

_EPS = 1e-7
# What model selection may watch: validation metric -> (key in binary_metrics, +1 higher is better)
MONITORS = {"val_logloss": ("logloss", -1), "val_auc": ("auc", 1)}


def monitored_score(metrics: dict[str, float], monitor: str) -> float:
    """``metrics``' value of ``monitor``, signed so that higher is better (NaN stays NaN).

    Example:
        >>> monitored_score({"auc": 0.7, "logloss": 0.5}, "val_logloss")
        -0.5
    """
    key, sign = MONITORS[monitor]
    return sign * float(metrics[key])


def logloss(labels: np.ndarray, probs: np.ndarray) -> float:
    """Mean binary cross-entropy of ``probs`` [N] against ``labels`` [N] in {0, 1}."""
    p = np.clip(probs.astype(np.float64), _EPS, 1 - _EPS)
    y = labels.astype(np.float64)
    return float(-np.mean(y * np.log(p) + (1 - y) * np.log1p(-p)))


def normalized_entropy(labels: np.ndarray, probs: np.ndarray) -> float:
    """Logloss divided by the entropy of always predicting the base rate (He et al., 2014).

    Below 1.0 means better than knowing only the average click rate.
    """
    ctr = float(np.clip(labels.mean(), _EPS, 1 - _EPS))
    base = -(ctr * math.log(ctr) + (1 - ctr) * math.log(1 - ctr))
    return logloss(labels, probs) / base


def binary_metrics(labels: np.ndarray, probs: np.ndarray) -> dict[str, float]:
    """``{"auc", "logloss", "ne", "calibration", "ctr", "n"}`` for one split; AUC is NaN with one
    class only. ``calibration`` is the mean predicted CTR over the observed one (1.0: calibrated;
    NaN without a positive).

    Example:
        >>> m = binary_metrics(np.array([0, 1, 0, 1]), np.array([0.2, 0.6, 0.4, 0.8]))
        >>> m["auc"], round(m["calibration"], 3)
        (1.0, 1.0)
    """
    labels, probs = np.asarray(labels), np.asarray(probs)
    if labels.shape != probs.shape or labels.ndim != 1:
        raise ValueError(f"labels {labels.shape} and probs {probs.shape} must be equal 1-d shapes")
    both = 0 < labels.sum() < labels.size
    return {
        "auc": float(roc_auc_score(labels, probs)) if both else float("nan"),
        "logloss": logloss(labels, probs),
        "ne": normalized_entropy(labels, probs),
        "calibration": float(probs.mean() / labels.mean()) if labels.sum() > 0 else float("nan"),
        "ctr": float(labels.mean()),
        "n": int(labels.size),
    }
