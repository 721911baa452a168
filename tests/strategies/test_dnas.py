"""`strategy: dnas` in a study: a tiny end-to-end run, options and the recorded probabilities."""

import optuna
import pytest
from optuna.trial import TrialState

from autorec.dashboard import prepare_dashboard
from autorec.report import arch_probs_data, report_html, study_figures
from autorec.space import SearchSpace
from autorec.strategies import make_strategy
from autorec.study import StudyConfig, run_study, trial_arch
from tests.studyfiles import write_study

TINY_SPACE = {
    "dim": [8], "dense_arch": [[8]], "over_arch": [[16], [32]],
    "embedding": {"dim_ratio": [1, 0.5]},
    "layers": {"num": {"low": 1, "high": 2}, "kinds": ["wukong", "dhen", "dlrm", "dcnv2"],
               "wukong": {"n_fm": [2, 4], "n_lcb": [2], "rank": [2], "mlp": [[8]]},
               "dhen": {"modules": [["dot"], ["dot", "linear"]], "ensemble": ["concat"], "n_out": [2],
                        "num_heads": [2], "dcn_layers": [1]},
               "dlrm": {"n_passthrough": [1], "self_interaction": [False]},
               "dcnv2": {"num_layers": {"low": 1, "high": 2}, "rank": [0]}},
}


def quiet(*_: object) -> None:
    pass


def test_a_tiny_dnas_study_trains_derived_specs_and_draws_their_probabilities(tmp_path):
    import yaml

    space = tmp_path / "space.yaml"
    space.write_text(yaml.safe_dump(TINY_SPACE))
    path = write_study(tmp_path, space=str(space), budget={"trials": 2, "epochs": 1, "batch_size": 256,
                                                           "max_steps_per_epoch": 3},
                       strategy={"name": "dnas", "options": {"steps": 6, "warmup_steps": 2, "batch_size": 128,
                                                             "record_every": 2, "retrain": "warm",
                                                             "selection": "validation",
                                                             "selection_samples": 256,
                                                             "weight_sampling": "uniform",
                                                             "arch_estimator": "reinforce",
                                                             "arch_samples": 3}},
                       objectives=["val_auc", "flops"])
    config = StudyConfig.load(path)
    summary = run_study(config, log=quiet)
    study = optuna.load_study(study_name="t", storage=config.storage_url)
    trials = study.get_trials(states=(TrialState.COMPLETE,))
    assert len(trials) == 2 and summary.best is not None
    loaded = SearchSpace.load(space)
    for t in trials:
        assert loaded.contains(trial_arch(t))
        assert {"dnas.lambda", "dnas.target_ratio", "over_arch"} <= set(t.params)
        probs = arch_probs_data(t)
        assert probs is not None and len(probs.probs) == 2 and probs.steps == [0, 1, 2, 3]
        assert set(probs.kinds) == {"wukong", "dhen", "dlrm", "dcnv2", "skip"}
        for layer in t.user_attrs["arch_probs"]:
            for step in layer:
                assert abs(sum(step.values()) - 1) < 1e-5
        dnas = t.user_attrs["dnas"]
        assert dnas["expected_cost"] > 0 and dnas["cost_metric"] == "flops"
        assert dnas["selection"] == "validation" and dnas["scored_paths"]
        assert dnas["weight_sampling"] == "uniform" and dnas["arch_estimator"] == "reinforce"
        assert [sum(layer.values()) for layer in dnas["weight_counts"]] == [6, 6]  # one path per step
        best = max(dnas["scored_paths"], key=lambda p: p["val_auc"])  # the path it derives
        kinds = [layer.kind for layer in trial_arch(t).layers]
        assert (len(kinds) == 1 if best["kind"] == "skip" else kinds[best["layer"]] == best["kind"])
        assert any(name.startswith("sparse_arch.embedding_bags.") for name in t.user_attrs["warm_started"])
    figures = study_figures(study)
    assert {f"arch_probs_trial{t.number}" for t in trials} <= set(figures)
    assert "Trial 0: architecture probabilities per layer" in report_html(study)
    assert "autorec-arch-probs-trial0" in prepare_dashboard(study)


def test_dnas_options_are_checked():
    with pytest.raises(ValueError, match="strategy 'dnas': unknown options"):
        make_strategy("dnas", temperature=2.0)
    with pytest.raises(ValueError, match="strategy 'dnas': lambda: expected"):
        make_strategy("dnas", **{"lambda": [1.0, 0.1]})
    with pytest.raises(ValueError, match="strategy 'dnas': retrain: expected one of scratch, warm"):
        make_strategy("dnas", retrain="hot")
    with pytest.raises(ValueError, match="strategy 'dnas': retrain: warm copies the leading columns"):
        make_strategy("dnas", retrain="warm", width_columns="own")
    with pytest.raises(ValueError, match=r"warm copies the leading columns and rows .* hash_rows: shared"):
        make_strategy("dnas", retrain="warm", hash_rows="own")
    with pytest.raises(ValueError, match="'dnas': supernet selection: expected one of argmax, validation, "
                                         "penalized"):
        make_strategy("dnas", selection="perturbation")
    with pytest.raises(ValueError, match="'dnas': supernet weight_sampling: expected one of arch, uniform"):
        make_strategy("dnas", weight_sampling="logits")
    with pytest.raises(ValueError, match="'dnas': supernet arch_estimator: expected one of gumbel, reinfo"):
        make_strategy("dnas", arch_estimator="ppo")
    with pytest.raises(ValueError, match="'dnas': search_over_arch: expected true or false, got 'yes'"):
        make_strategy("dnas", search_over_arch="yes")
    with pytest.raises(ValueError, match="strategy 'dnas': supernet tau"):
        make_strategy("dnas", tau_start=0.1, tau_end=1.0)
    strategy = make_strategy("dnas")
    study = optuna.create_study()
    with pytest.raises(ValueError, match="call bind"):
        strategy.propose(study.ask(), SearchSpace.from_dict(TINY_SPACE), None)


def test_with_search_over_arch_the_supernet_picks_the_over_arch_and_selection_scores_it(tmp_path):
    import yaml

    space = tmp_path / "space.yaml"
    space.write_text(yaml.safe_dump({**TINY_SPACE, "over_arch": [[16, 8], [32, 16]]}))
    path = write_study(tmp_path, space=str(space), budget={"trials": 2, "epochs": 1, "batch_size": 256,
                                                           "max_steps_per_epoch": 2},
                       strategy={"name": "dnas", "options": {"steps": 4, "warmup_steps": 1, "batch_size": 128,
                                                             "search_over_arch": True,
                                                             "selection": "penalized",
                                                             "selection_samples": 256}},
                       objectives=["val_auc", "flops"])
    config = StudyConfig.load(path)
    run_study(config, log=quiet)
    study = optuna.load_study(study_name="t", storage=config.storage_url)
    trials = study.get_trials(states=(TrialState.COMPLETE,))
    assert len(trials) == 2
    for t in trials:
        assert "over_arch" not in t.params  # the supernet chose it, not the sampler
        dnas = t.user_attrs["dnas"]
        assert set(dnas["final_probs"]["over_arch"]) == {"16-8", "32-16"}
        # The over-arch is a coordinate of the selection: the value the layers' sweep did not
        # already score is scored on its own (the other is the cached incumbent path).
        scored = [p for p in dnas["scored_paths"] if p["kind"] == "over_arch"]
        assert scored and {p["fields"]["over_arch"] for p in scored} <= {"16-8", "32-16"}
        assert all(p["layer"] == 2 and "penalized_loss" in p for p in scored)
        assert trial_arch(t).over_arch in ((16, 8), (32, 16))
