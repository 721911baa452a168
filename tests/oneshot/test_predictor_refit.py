"""benchmarks/oneshot_predictor_refit.py: the tau predictor refitted on subsets of its labels."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy.stats import kendalltau

from benchmarks.oneshot_predictor_refit import labelled_counts, main, refits


def _rows(rng: np.random.Generator, kind: str, n: int, layers_weight: float) -> list[dict]:
    layers, features = rng.normal(size=n), rng.normal(size=n)
    trained = 0.6 + layers_weight * layers + 0.01 * features + rng.normal(scale=1e-3, size=n)
    return [{"set": kind, "trained": float(t), "layers": float(a), "features": float(b),
             "joint": float(a + b)} for t, a, b in zip(trained, layers, features, strict=True)]


def test_each_studys_trials_alone_and_all_of_them():
    rng = np.random.default_rng(0)
    rows = _rows(rng, "pool", 30, 0.0) + _rows(rng, "fit", 8, 0.0) + _rows(rng, "fit", 9, 0.02)
    figures = refits({"k_seed0": rows, "machine": "m", "commit": "c"}, ["a", "b"], [8, 9])
    assert figures["k_seed0_refit_a_predictor_pairs"] == 8 and figures["k_seed0_refit_b_predictor_pairs"] == 9
    assert figures["k_seed0_refit_a+b_predictor_pairs"] == 17
    # the labels where the layers part counts teach the predictor to weigh it
    assert figures["k_seed0_refit_b_predictor_weight_layers"] == pytest.approx(0.02, abs=2e-3)
    assert abs(figures["k_seed0_refit_a_predictor_weight_layers"]) < 2e-3
    pool = [r for r in rows if r["set"] == "pool"]
    alone = kendalltau([r["features"] for r in pool], [r["trained"] for r in pool]).statistic
    assert figures["k_seed0_refit_features_alone_tau"] == pytest.approx(alone)
    assert figures["k_seed0_refit_a_tau_predicted"] > figures["k_seed0_refit_b_tau_predicted"]
    with pytest.raises(ValueError, match=r"k_seed0: 17 fit rows, where a, b hold 18 trials"):
        refits({"k_seed0": rows}, ["a", "b"], [9, 9])


def test_the_archived_tpe_studies_and_bad_files(tmp_path, capsys):
    assert labelled_counts(["tpe", "tpe_shared"]) == [10, 13]  # the archive in the repo
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    for scores, message in ((tmp_path / "gone.json", "--scores: no file at"), (bad, "is not JSON")):
        with pytest.raises(SystemExit):
            main(["--scores", str(scores), "--fit-on", "tpe", "--out", str(tmp_path / "out.json")])
        assert message in capsys.readouterr().err
    short = tmp_path / "short.json"
    rng = np.random.default_rng(1)
    short.write_text(json.dumps({"k_seed0": _rows(rng, "pool", 5, 0.0) + _rows(rng, "fit", 4, 0.0)}))
    with pytest.raises(SystemExit):
        main(["--scores", str(short), "--fit-on", "tpe", "--out", str(tmp_path / "out.json")])
    assert "k_seed0: 4 fit rows, where tpe hold 10 trials" in capsys.readouterr().err
    assert not (tmp_path / "out.json").exists()
