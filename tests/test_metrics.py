import math

import numpy as np
import pytest

from autorec.metrics import binary_metrics, logloss, normalized_entropy


def test_auc_logloss_ne_on_known_values():
    labels = np.array([0, 0, 1, 1])
    probs = np.array([0.1, 0.6, 0.4, 0.9])
    m = binary_metrics(labels, probs)
    assert m["auc"] == pytest.approx(0.75)
    expected = -np.mean(np.log([0.9, 0.4, 0.4, 0.9]))
    assert m["logloss"] == pytest.approx(expected)
    assert m["ne"] == pytest.approx(expected / math.log(2))


def test_base_rate_predictor_has_ne_one():
    labels = np.array([1, 0, 0, 0, 1, 0, 0, 0])
    assert normalized_entropy(labels, np.full(8, 0.25)) == pytest.approx(1.0)
    assert logloss(labels, labels.astype(float)) < 1e-6


def test_single_class_gives_nan_auc_and_shape_mismatch_raises():
    assert math.isnan(binary_metrics(np.ones(3), np.full(3, 0.5))["auc"])
    with pytest.raises(ValueError, match="equal 1-d shapes"):
        binary_metrics(np.ones(3), np.ones(4))
