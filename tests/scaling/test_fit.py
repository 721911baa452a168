"""The law fit recovers a known exponent (floor fixed or fitted, with noise), its bootstrap
interval covers it, the held-out check predicts the largest rung, and bad points are refused."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import log_loss

from autorec.data import load_dataset
from autorec.scaling.fit import FitError, bootstrap, fit_law, holdout
from autorec.scaling.results import Rung, summarize_ladder

COMPUTE = np.logspace(11, 14, 7)  # three decades, as a ladder's training FLOPs


def law(compute: np.ndarray, floor: float = 0.45, scale: float = 40.0, alpha: float = 0.12) -> np.ndarray:
    return floor + scale * compute ** -alpha


def test_an_exact_law_is_recovered_with_the_floor_fixed_or_fitted():
    fixed = fit_law(COMPUTE, law(COMPUTE), floor=0.45)
    assert fixed.alpha == pytest.approx(0.12, rel=1e-6) and fixed.scale == pytest.approx(40.0, rel=1e-5)
    free = fit_law(COMPUTE, law(COMPUTE))
    assert free.alpha == pytest.approx(0.12, rel=1e-3) and free.floor == pytest.approx(0.45, abs=1e-3)
    assert not free.floor_fixed and fixed.floor_fixed and fixed.points == 7


def test_with_noise_the_exponent_lands_inside_its_bootstrap_interval():
    rng = np.random.default_rng(0)
    noisy = law(COMPUTE) * np.exp(rng.normal(0.0, 0.002, COMPUTE.size))
    fit = fit_law(COMPUTE, noisy, floor=0.45)
    interval = bootstrap(COMPUTE, noisy, floor=0.45, samples=200)
    assert fit.alpha == pytest.approx(0.12, abs=0.01)
    low, high = interval["alpha"]
    assert low <= 0.12 <= high and low < high
    again = bootstrap(COMPUTE, noisy, floor=0.45, samples=50)
    assert again == bootstrap(COMPUTE, noisy, floor=0.45, samples=50)  # seeded


def test_the_held_out_rung_is_predicted_from_the_others():
    exact = holdout(COMPUTE, law(COMPUTE), floor=0.45)
    assert exact["compute"] == COMPUTE[-1] and exact["rel_err"] < 1e-6
    bent = law(COMPUTE)
    bent[-1] = 0.45 + 0.5 * (bent[-1] - 0.45)  # the largest rung gains twice what the law says
    off = holdout(COMPUTE[::-1], bent[::-1], floor=0.45)  # order of the rungs does not matter
    assert off["rel_err"] == pytest.approx(1.0, rel=1e-3)


def test_gain_per_decade():
    fit = fit_law(COMPUTE, law(COMPUTE), floor=0.45)
    top = COMPUTE[-1]
    assert fit.gain_per_decade(top) == pytest.approx(float(law(top) - law(10 * top)), rel=1e-5)


@pytest.mark.parametrize("compute, loss, floor, message", [
    ([1e9, 1e10], [0.6, 0.5], None, "at least 3 distinct computes, got 2"),
    ([1e9, 1e9, 1e9, 1e9], [0.6, 0.5, 0.5, 0.4], None, "at least 3 distinct computes, got 1"),
    ([1e9, 1e10, 1e11], [0.6, 0.5], None, "two lists of one length"),
    ([1e9, -1e10, 1e11], [0.6, 0.5, 0.4], None, "finite positive numbers"),
    ([1e9, 1e10, 1e11], [0.6, float("nan"), 0.4], None, "finite positive numbers"),
    ([1e9, 1e10, 1e11], [0.4, 0.4, 0.4], 0.45, "every loss is at or under the floor 0.4500"),
])
def test_bad_points(compute, loss, floor, message):
    with pytest.raises(FitError, match=message):
        fit_law(compute, loss, floor)


def test_a_family_too_short_to_fit_says_why_and_the_others_still_fit():
    good = [Rung(r, r, float(c), 1e3 * 10 ** r, float(v), 0.7) for r, (c, v) in
            enumerate(zip(COMPUTE[:5], law(COMPUTE[:5]), strict=True))]
    short = good[:2]
    summary = summarize_ladder({"dlrm": good, "dcnv2": short}, floor=0.45, bootstrap_samples=20)
    assert summary.families["dlrm"]["alpha"] == pytest.approx(0.12, rel=1e-4)
    assert summary.families["dcnv2"]["error"] == "a law needs at least 3 distinct computes, got 2"
    assert "the held-out check fits all rungs but the largest" in summary.families["dcnv2"]["holdout_error"]
    flat = summary.flat()
    assert flat["dlrm_rungs"] == 5 and flat["dcnv2_alpha"] is None and flat["bayes_logloss"] == 0.45
    assert flat["dlrm_flops_span_decades"] == pytest.approx(4.0)
    assert summary.steepest() == "dlrm"


def test_bayes_logloss_is_the_logloss_of_the_true_probabilities():
    data = load_dataset("synthetic", preset="tiny", num_samples=2000)
    labels, probs = data.splits["test"].labels.numpy(), data.probs["test"].numpy()
    assert data.bayes_logloss("test") == pytest.approx(log_loss(labels, probs), rel=1e-6)
