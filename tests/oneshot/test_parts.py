"""autorec/oneshot/parts.py: tau split into the proxy's layers part and its embeddings part."""

from __future__ import annotations

import optuna
import pytest

from autorec.oneshot.labels import trained_pairs
from autorec.oneshot.parts import (
    PARTS,
    feature_settings,
    part_figures,
    proxy_parts,
    reference_setting,
    setting_of,
)
from autorec.oneshot.predictor import fit_predictor
from autorec.report.data import proxy_data
from autorec.report.figures import proxy_figure
from autorec.strategies import make_strategy
from autorec.study import StudyConfig, run_study
from autorec.study.config import StudyConfigError
from benchmarks.oneshot_cross_scores import pooled_pairs, winners
from benchmarks.oneshot_tpe_proxy import load_supernet
from tests.oneshot.test_run import micro_space, run_oneshot
from tests.studyfiles import MICRO_BUDGET, write_study


def test_the_parts_add_up_and_the_reference_embedding_costs_nothing(micro_runs):
    pairs = pooled_pairs(["_m"], [0, 1], micro_runs)
    loaded = load_supernet("_m", 0, 256, micro_runs)
    names = loaded.search.names
    reference = reference_setting(names)
    assert reference and all(float(v) == max(float(x) for x in names[n]) for n, v in reference.items())
    layers = winners("_m", [0], micro_runs)[0]["params"]  # its embedding choices are ignored
    at_reference = {**pairs[0][0], **reference}  # one architecture already at the reference embedding
    calls = []
    rescore = loaded.search.rescore
    loaded.search.rescore = lambda values, samples: calls.append(values) or rescore(values, samples)
    parts = proxy_parts(loaded.search, [*(p for p, _ in pairs), at_reference], layers, 256)
    assert set(parts) == set(PARTS)
    paths = [tuple(sorted(v.items())) for v in calls]  # each distinct path scored once
    assert len(paths) == len(set(paths)) < 1 + len(feature_settings(names)) + 2 * (len(pairs) + 1)
    for i in range(len(pairs) + 1):
        assert parts["additive"][i] == pytest.approx(parts["layers"][i] + parts["features"][i])
        assert parts["own_features"][i] == pytest.approx(parts["joint"][i] - parts["layers"][i])
        assert 0.0 < parts["joint"][i] < 1.0 and 0.0 < parts["layers"][i] < 1.0
    assert parts["features"][-1] == 0.0
    assert parts["joint"][-1] == pytest.approx(parts["layers"][-1])
    # a drawn architecture that differs from the reference in its embeddings has a feature part
    drawn = [i for i, (p, _) in enumerate(pairs) if any(str(p[n]) != v for n, v in reference.items())]
    assert drawn and any(parts["features"][i] != 0.0 for i in drawn)


def test_each_setting_is_scored_once_and_read_back_by_its_architecture():
    names = {"emb.a": ["0", "4", "8"], "emb.a.hash": ["1", "0.5"], "emb.b": ["0", "4", "8"],
             "emb.b.hash": ["1", "0.5"], "layer0.kind": ["dlrm", "dcnv2"]}
    settings = feature_settings(names)
    assert len(settings) == 2 * (1 + 2 + 1)  # per feature: dropped once, width 4 twice, width 8 hashed
    assert len(set(settings)) == len(settings)
    reference = reference_setting(names)
    params = {"emb.a": "0", "emb.a.hash": "0.5", "emb.b": "4", "emb.b.hash": "0.5", "layer0.kind": "dlrm"}
    assert setting_of(params, "emb.a", reference) == ("0", None)  # a dropped feature's hash is moot
    assert setting_of(params, "emb.b", reference) == ("4", "0.5")
    assert ("emb.a", "0", None) in settings and ("emb.b", "4", "0.5") in settings
    assert feature_settings({"emb.a": ["8"], "layer0.kind": ["dlrm"]}) == []  # nothing but the reference


def test_part_figures_name_a_constant_part_and_too_few_pairs():
    figures = part_figures({"joint": [0.5, 0.7, 0.6], "features": [0.0, 0.0, 0.0]}, [0.1, 0.3, 0.2])
    assert figures["tau_joint"] == pytest.approx(1.0) and figures["tau_features"] is None
    assert figures["sd_features"] == 0.0 and figures["sd_trained"] > 0
    assert part_figures({"joint": [0.5, 0.6]}, [0.1, 0.2])["tau_joint"] is None


def test_a_study_with_tau_parts_records_the_split_and_the_report_draws_it(tmp_path):
    space = micro_space(tmp_path, "{dim: [0, 4, 8], hash: [1, 0.5]}")
    (tmp_path / "rnd").mkdir()  # a multi-trial study of the same space: the predictor's labels
    labelled = StudyConfig.load(write_study(tmp_path / "rnd", name="rnd", space=str(space),
                                            budget={**MICRO_BUDGET, "trials": 6}))
    run_study(labelled, log=lambda *_: None)
    source = {"storage": labelled.storage_url, "study": "rnd"}
    config, study = run_oneshot(tmp_path, {"steps": 6, "candidates": 10, "rerank": 2, "calibrate": 2,
                                           "rescore": 3, "rescore_samples": 600, "tau_parts": True,
                                           "tau_predictor_from": [source]},
                                space=str(space))
    record = study.user_attrs["oneshot"]
    parts = record["tau_parts"]
    assert parts["pairs"] == record["tau_pairs"] == 4
    assert {f"tau_{p}" for p in PARTS} | {f"sd_{p}" for p in PARTS} | {"sd_trained"} <= set(parts)
    # the joint part is the proxy tau was taken on: the same scores, so the same tau
    assert parts["tau_joint"] == pytest.approx(record["kendall_tau"])
    # the predictor learned from the other study's complete trials and ranked this study's own
    done = optuna.load_study(study_name="rnd", storage=labelled.storage_url).get_trials(
        states=(optuna.trial.TrialState.COMPLETE,))
    assert parts["predictor_pairs"] == len(done) == 6
    assert -1.0 <= parts["tau_predicted"] <= 1.0 and -1.0 <= parts["predictor_fit_tau"] <= 1.0
    # its weights are those of a fit on the other study's trials alone, scored on the same supernet
    search = _search_of(config)
    labels = trained_pairs(optuna.load_study(study_name="rnd", storage=labelled.storage_url), search, "rnd")
    winner = [t for t in study.trials if t.user_attrs.get("stage") == "final"][-1].params
    scored = proxy_parts(search, [p for p, _ in labels], winner, 600)
    fit = fit_predictor(scored, [v for _, v in labels])
    for part, weight in fit.weights.items():
        assert parts[f"predictor_weight_{part}"] == pytest.approx(weight)
    bounded = fit_predictor(scored, [v for _, v in labels], nonnegative=True)  # and bounded at 0
    for part, weight in bounded.weights.items():
        assert parts[f"predictor_weight_{part}_nonnegative"] == pytest.approx(weight, abs=1e-9)
        assert weight >= 0.0
    title = proxy_figure(proxy_data(study)).layout.title.text
    assert "tau of its layers part" in title and "of its embeddings part" in title
    assert "a predictor over the parts, fitted on 6 other trainings" in title
    assert f"({parts['tau_predicted_nonnegative']:.2f} with weights >= 0)" in title
    (tmp_path / "plain").mkdir()
    _, plain = run_oneshot(tmp_path / "plain", {"steps": 6, "candidates": 10, "rerank": 2, "calibrate": 2},
                           space=str(space))
    assert "tau_parts" not in plain.user_attrs["oneshot"]  # off by default
    assert "layers part" not in proxy_figure(proxy_data(plain)).layout.title.text


@pytest.mark.parametrize(("options", "message"), [
    ({"tau_parts": "yes"}, "tau_parts: expected true or false, got 'yes'"),
    ({"tau_parts": True, "calibrate": 0, "rerank_train": False}, "tau_parts: true without tau's trainings"),
    ({"tau_parts": True, "tau_predictor_from": "tpe"}, "tau_predictor_from: expected a list"),
    ({"tau_parts": True, "tau_predictor_from": []}, "tau_predictor_from: expected a list"),
    ({"tau_parts": True, "tau_predictor_from": [{"study": "tpe"}]},
     r"tau_predictor_from\[0\]: expected a mapping with keys storage and study"),
    ({"tau_parts": True, "tau_predictor_from": [{"storage": "sqlite:///a.db", "study": ""}]},
     r"tau_predictor_from\[0\]\.study: expected a non-empty string"),
    ({"tau_predictor_from": [{"storage": "sqlite:///a.db", "study": "tpe"}]},
     "tau_predictor_from: set without tau_parts: true"),
])
def test_bad_tau_parts(options, message):
    with pytest.raises(ValueError, match=message):
        make_strategy("oneshot", **options)


def test_a_predictor_study_that_is_not_there_is_named_before_anything_trains(tmp_path):
    space = micro_space(tmp_path, "{dim: [0, 4, 8], hash: [1, 0.5]}")
    (tmp_path / "rnd").mkdir()
    labelled = StudyConfig.load(write_study(tmp_path / "rnd", name="rnd", space=str(space),
                                            budget={**MICRO_BUDGET, "trials": 1}))
    run_study(labelled, log=lambda *_: None)
    for source, message in (({"storage": f"sqlite:///{tmp_path / 'gone.db'}", "study": "rnd"},
                             r"tau_predictor_from\[0\]: no database file at .*gone\.db"),
                            ({"storage": labelled.storage_url, "study": "nope"},
                             r"tau_predictor_from\[0\]: no study 'nope' in sqlite")):
        folder = tmp_path / f"run_{source['study']}_{len(message)}"
        folder.mkdir()
        with pytest.raises(StudyConfigError, match=message):
            run_oneshot(folder, {"steps": 6, "calibrate": 2, "tau_parts": True,
                                 "tau_predictor_from": [source]}, space=str(space))
        assert not (folder / "t" / "oneshot").exists()  # nothing trained (the study "t"'s folder)
        assert not (tmp_path / "gone.db").exists()  # and no empty database left where none was


def _search_of(config: StudyConfig):
    """A :class:`~autorec.oneshot.search.CandidateSearch` over ``config``'s trained supernet (its
    last checkpoint; nothing trains), as the study's run scored with."""
    from autorec.oneshot.search import CandidateSearch
    from autorec.oneshot.train import OneShotTrainConfig, SupernetTraining
    from autorec.study import TrialRunner

    runner = TrialRunner(config)
    options = OneShotTrainConfig(**runner.strategy.train_options)
    folder = config.directory / "oneshot" / "supernet"
    training = SupernetTraining(runner.space, runner.dataset, options, folder)
    training.fit()
    return CandidateSearch(training, 600, config.objectives)
