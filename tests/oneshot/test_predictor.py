"""autorec/oneshot/predictor.py: a least-squares predictor over the proxy's parts."""

from __future__ import annotations

import numpy as np
import pytest

from autorec.oneshot.predictor import PartsPredictor, fit_predictor


def test_the_fit_recovers_the_weights_that_made_the_labels():
    rng = np.random.default_rng(0)
    layers, features = rng.normal(size=40), rng.normal(size=40)
    trained = 0.6 + 0.002 * layers + 0.01 * features + rng.normal(scale=1e-4, size=40)
    parts = {"layers": list(layers), "features": list(features), "joint": [0.0] * 40}
    fit = fit_predictor(parts, list(trained))
    assert set(fit.weights) == {"layers", "features"}  # the default inputs, not every part given
    assert fit.intercept == pytest.approx(0.6, abs=1e-4)
    assert fit.weights["layers"] == pytest.approx(0.002, abs=1e-4)
    assert fit.weights["features"] == pytest.approx(0.01, abs=1e-4)
    predicted = fit.predict({"layers": [1.0, 0.0], "features": [0.0, 1.0]})
    assert predicted == pytest.approx([0.602, 0.61], abs=2e-4)
    only = fit_predictor({"features": list(features)}, list(trained), inputs=("features",))
    assert list(only.weights) == ["features"]


def test_bad_inputs_are_named():
    parts = {"layers": [0.1, 0.2, 0.3, 0.4], "features": [1.0, 0.0, 2.0, 1.0]}
    with pytest.raises(ValueError, match=r"no scores for part\(s\) features"):
        fit_predictor({"layers": parts["layers"]}, [0.5] * 4)
    with pytest.raises(ValueError, match="part 'features' has 3 scores for 4 trained AUCs"):
        fit_predictor({**parts, "features": [1.0, 2.0, 3.0]}, [0.5, 0.6, 0.7, 0.8])
    with pytest.raises(ValueError, match="part 'layers' scores every architecture alike"):
        fit_predictor({**parts, "layers": [0.3] * 4}, [0.5, 0.6, 0.7, 0.8])
    short = "3 trained architectures for 2 weights and an intercept; expected at least 4"
    with pytest.raises(ValueError, match=short):
        fit_predictor({p: v[:3] for p, v in parts.items()}, [0.5, 0.6, 0.7])
    with pytest.raises(ValueError, match="no inputs given"):
        fit_predictor(parts, [0.5, 0.6, 0.7, 0.8], inputs=())
    with pytest.raises(KeyError, match=r"no scores for part\(s\) features \(given layers"):
        PartsPredictor(0.5, {"layers": 1.0, "features": 1.0}).predict({"layers": [0.1]})


def test_a_nonnegative_fit_gives_a_part_at_chance_no_weight_rather_than_a_negative_one():
    rng = np.random.default_rng(1)
    features = rng.normal(size=12)
    layers = rng.normal(size=12)
    # the labels follow the features; the layers part is noise that happens to anti-correlate
    trained = 0.6 + 0.01 * features - 0.004 * layers + rng.normal(scale=1e-4, size=12)
    parts = {"layers": list(layers), "features": list(features)}
    free = fit_predictor(parts, list(trained))
    bounded = fit_predictor(parts, list(trained), nonnegative=True)
    assert free.weights["layers"] < -0.003  # the unbounded fit reads the layers upside down
    assert bounded.weights["layers"] == 0.0
    assert bounded.weights["features"] == pytest.approx(0.01, abs=2e-3)
    # where the unbounded weights are already >= 0 the two fits agree
    positive = 0.6 + 0.01 * features + 0.002 * layers
    assert fit_predictor(parts, list(positive), nonnegative=True).weights == pytest.approx(
        fit_predictor(parts, list(positive)).weights, abs=1e-6)


def test_predictor_figures_give_both_fits():
    from autorec.oneshot.predictor import predictor_figures

    rng = np.random.default_rng(2)
    learned = {"layers": list(rng.normal(size=10)), "features": list(rng.normal(size=10))}
    labels = [0.6 + 0.01 * f - 0.003 * la
              for f, la in zip(learned["features"], learned["layers"], strict=True)]
    pool = {"layers": list(rng.normal(size=8)), "features": list(rng.normal(size=8))}
    trained = [0.6 + 0.01 * f for f in pool["features"]]
    figures = predictor_figures(learned, labels, pool, trained)
    assert figures["predictor_weight_layers"] < 0
    assert figures["predictor_weight_layers_nonnegative"] == 0.0
    assert figures["tau_predicted_nonnegative"] == pytest.approx(1.0)  # ranks by the features alone
    assert figures["tau_predicted"] < 1.0
