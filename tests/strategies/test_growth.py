"""`strategy: growth` in a study: a tiny end-to-end run, options, the recorded schedule, the figure."""

import optuna
import pytest
from optuna.trial import TrialState

from autorec.arch import ArchSpec
from autorec.growth.figures import schedule_data, schedule_figure
from autorec.growth.schedule import GrowthSchedule, Phase
from autorec.report import report_html, study_figures
from autorec.space import SearchSpace
from autorec.strategies import make_strategy
from autorec.study import StudyConfig, export_trials, run_study, trial_arch
from tests.doctests import assert_examples_run
from tests.studyfiles import write_study

TINY_SPACE = {
    "dim": [8], "dense_arch": [[16]], "over_arch": [[32, 16], [64]],
    "layers": {"num": {"low": 1, "high": 1}, "kinds": ["dcnv2", "mlp"],
               "dcnv2": {"num_layers": [1], "rank": [0]},
               "mlp": {"hidden": [[32]], "n_out": [4]}},
}


def quiet(*_: object) -> None:
    pass


@pytest.mark.parametrize("module", ["autorec.strategies.growth", "autorec.growth.figures"])
def test_examples_run(module):
    assert_examples_run(module)


@pytest.mark.parametrize("max_flops_ratio", [None, 0.8])
def test_a_tiny_growth_study_records_and_draws_the_schedules(tmp_path, max_flops_ratio):
    import yaml

    space = tmp_path / "space.yaml"
    space.write_text(yaml.safe_dump(TINY_SPACE))
    path = write_study(tmp_path, space=str(space), budget={"trials": 2, "epochs": 1, "batch_size": 256,
                                                           "max_steps_per_epoch": 3},
                       strategy={"name": "growth", "options": {
                           "steps": 8, "budget": 2, "batch_size": 128, "rl_batch_size": 2, "lambda": 0.5,
                           "retrain": "warm", "max_flops_ratio": max_flops_ratio}},
                       train={"dense_lr": 0.004, "embedding_lr": 0.1})
    config = StudyConfig.load(path)
    run_study(config, log=quiet)
    study = optuna.load_study(study_name="t", storage=config.storage_url)
    trials = study.get_trials(states=(TrialState.COMPLETE,))
    assert len(trials) == 2
    loaded = SearchSpace.load(space)
    figures = study_figures(study)
    for t in trials:
        spec = trial_arch(t)
        growth = t.user_attrs["growth"]
        schedule = GrowthSchedule.from_dict(growth["best"]["schedule"])
        assert loaded.contains(spec) and "schedule" not in t.user_attrs["arch"]  # the architecture only
        assert schedule.total_steps == 8 and schedule.phases[-1].full
        schedule.check_parts(spec)
        assert growth["trained"] >= 2 and growth["baseline"]["flops_ratio"] == 1.0
        assert growth["max_flops_ratio"] == max_flops_ratio
        # schedules were searched under the study's recipe, its defaults where the study sets none
        assert growth["recipe"] == {"dense_optimizer": "adam", "dense_lr": 0.004, "dense_weight_decay": 1e-4,
                                    "embedding_lr": 0.1, "embedding_weight_decay": 0.0}
        if max_flops_ratio is not None:  # budgeted: the pick is a schedule within the budget
            assert growth["best"]["flops_ratio"] <= max_flops_ratio and schedule.phases[0].widths
        assert any(n.startswith("sparse_arch.embedding_bags.") for n in t.user_attrs["warm_started"])
        assert f"schedule_trial{t.number}" in figures
        assert ArchSpec.from_dict(t.user_attrs["arch"]) == spec
    assert "growth schedule (width per part over steps)" in report_html(study)
    best = max(trials, key=lambda t: t.values[0])
    out = export_trials(config, tmp_path / "export", trial=best.number, log=quiet)[0]
    assert GrowthSchedule.load(out / "schedule.json", trial_arch(best)).to_dict() == \
        best.user_attrs["growth"]["best"]["schedule"]


def test_schedule_figure_data_follows_the_phases():
    from autorec.data import Schema, SparseFeature
    from autorec.presets import preset

    spec = preset("dcnv2", Schema(("x",), (SparseFeature("u", 5), SparseFeature("i", 7))))
    schedule = GrowthSchedule((Phase(30, {"layers.0": 0.25}), Phase(20, {"over_arch": 0.5}), Phase(50)))
    data = schedule_data(spec, schedule)
    assert data.parts == ["layers.0", "over_arch"] and data.steps == [0, 30, 50, 100]
    assert data.ratios == {"layers.0": [0.25, 1.0, 1.0], "over_arch": [1.0, 0.5, 1.0]}
    assert data.sizes["over_arch"] == ["256-128", "128-64", "256-128"]
    assert data.sizes["layers.0"][0] != data.sizes["layers.0"][1]  # rank pruned, then full again
    assert schedule_data(spec, None) is None
    figure = schedule_figure(data)
    assert [t.name for t in figure.data] == ["layers.0", "over_arch"]
    assert list(figure.data[1].x) == [0, 30, 50, 100] and list(figure.data[1].y) == [1.0, 0.5, 1.0, 1.0]


def test_growth_options_are_checked():
    with pytest.raises(ValueError, match="strategy 'growth': unknown options"):
        make_strategy("growth", temperature=2.0)
    with pytest.raises(ValueError, match="strategy 'growth': search: expected one of rl, tpe, got 'grid'"):
        make_strategy("growth", search="grid")
    with pytest.raises(ValueError, match="strategy 'growth': retrain: expected one of scratch, warm"):
        make_strategy("growth", retrain="hot")
    with pytest.raises(ValueError, match="strategy 'growth': lambda: expected a number >= 0"):
        make_strategy("growth", **{"lambda": -1})
    with pytest.raises(ValueError, match="strategy 'growth': budget: expected a positive integer"):
        make_strategy("growth", budget=0)
    with pytest.raises(ValueError,
                       match=r"strategy 'growth': schedule space: ratios: expected choices in \(0, 1\]"):
        make_strategy("growth", ratios=[0.5, 2.0])
    for bad, expected in ((0, r"a FLOPs ratio in \(0, 1\], got 0.0"),
                          (1.5, r"a FLOPs ratio in \(0, 1\], got 1.5"),
                          ("half", "a number, got 'half'"), (True, "a number, got True")):
        with pytest.raises(ValueError, match=f"strategy 'growth': max_flops_ratio: expected {expected}"):
            make_strategy("growth", max_flops_ratio=bad)
    strategy = make_strategy("growth")
    study = optuna.create_study()
    with pytest.raises(ValueError, match="call bind"):
        strategy.propose(study.ask(), SearchSpace.from_dict(TINY_SPACE), None)
