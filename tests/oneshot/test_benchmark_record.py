"""Issue 20's benchmark without its TPE studies: a recorded report is read, or refused by name."""

from __future__ import annotations

import json
from pathlib import Path

import optuna
import pytest

from benchmarks.oneshot_reference import RECORDED_TPE_KEYS, sampled_reference, tpe_record


def _report(path: Path, **drop: None) -> Path:
    data = {key: 1.0 for key in RECORDED_TPE_KEYS}
    data |= {"tpe_stage": "tpe_shared", "machine": "m", "commit": "c"}
    for key in drop:
        data.pop(key)
    path.write_text(json.dumps(data))
    return path


def test_a_report_gives_tpes_figures(tmp_path: Path) -> None:
    recorded = tpe_record(_report(tmp_path / "r.json"))
    assert recorded is not None
    assert recorded["tpe_stage"] == "tpe_shared" and recorded["commit"] == "c"
    assert tpe_record(None) is None


@pytest.mark.parametrize(("text", "expected"), [
    (None, "--tpe-record: no file at"),
    ("{not json", "--tpe-record: .* is not JSON"),
    ("[1, 2]", "holds a list, expected a JSON object"),
])
def test_an_unreadable_record_is_named(tmp_path: Path, text: str | None, expected: str) -> None:
    path = tmp_path / "r.json"
    if text is not None:
        path.write_text(text)
    with pytest.raises(SystemExit, match=expected) as caught:
        tpe_record(path)
    assert str(path) in str(caught.value)


def test_a_record_without_tpes_figures_names_what_is_missing(tmp_path: Path) -> None:
    path = _report(tmp_path / "r.json", tpe_wall_s=None, commit=None)
    with pytest.raises(SystemExit, match=r"no tpe_wall_s, commit; expected a report"):
        tpe_record(path)


def test_no_draws_to_take_a_reference_from_is_refused() -> None:
    with pytest.raises(SystemExit, match="no TPE study and no one-shot study"):
        sampled_reference(None, None)  # type: ignore[arg-type]
    study = optuna.create_study(study_name="oneshot_x_seed0")
    with pytest.raises(SystemExit, match="oneshot_x_seed0 has no architectures drawn from the space"):
        sampled_reference((None, study), None)  # type: ignore[arg-type]


def test_a_gone_tpe_study_is_none_and_not_created(tmp_path: Path) -> None:
    import argparse

    from benchmarks.oneshot_vs_tpe import reference_training, tpe_figures

    args = argparse.Namespace(out=tmp_path, samples=1000, trials=2, epochs=1, batch_size=64, tag="_x",
                              final_epochs=1, archive_dir=tmp_path / "archive")
    assert tpe_figures(args, "tpe") is None
    assert reference_training(args) is None
    assert not (tmp_path / "tpe" / "tpe" / "study.db").exists()  # reading a report leaves no empty study


def test_a_candidate_to_train_again_is_refused_by_name(tmp_path: Path) -> None:
    from benchmarks.oneshot_studies import open_candidates

    with pytest.raises(SystemExit, match=r"--trials '3,x': expected comma-separated trial numbers"):
        open_candidates(tmp_path, "_x", 0, "3,x")
    with pytest.raises(SystemExit, match=r"--tag _x --seed 1: no study file at .*oneshot_x_seed1/study.yaml"):
        open_candidates(tmp_path, "_x", 1, "3")
    with pytest.raises(SystemExit, match=r"--study tpe: no study file at .*tpe/study.yaml"):
        open_candidates(tmp_path, None, 0, "3", "tpe")
    with pytest.raises(SystemExit, match=r"name one study: --tag \(with --seed\) or --study"):
        open_candidates(tmp_path, "_x", 0, "3", "tpe")
    with pytest.raises(SystemExit, match=r"name one study"):
        open_candidates(tmp_path, None, 0, "3")


def test_the_full_reference_trains_on_the_finals_budget_and_is_cached_apart(tmp_path: Path) -> None:
    """The two readings of the training-equivalent: the trial budget and the final's budget
    (``--full-reference``), each timed once and cached under its own attribute."""
    from autorec.data import load_dataset
    from autorec.presets import preset
    from autorec.study import StudyConfig
    from benchmarks.oneshot_reference import final_budget

    data = {"name": "synthetic", "options": {"preset": "tiny", "num_samples": 800}, "seed": 0}
    space = str(Path(__file__).parents[2] / "search_spaces" / "quickstart.yaml")
    config = StudyConfig.from_dict({"name": "tpe", "data": data, "space": space, "objectives": ["val_auc"],
                                    "budget": {"trials": 1, "epochs": 1, "batch_size": 128}},
                                   tmp_path / "study.yaml")
    arch = preset("dlrm", load_dataset("synthetic", preset="tiny", num_samples=800).schema).to_dict()
    study = optuna.create_study(study_name="oneshot_x_seed0")
    for flops in (3, 1, 2):  # the median by training FLOPs is the one of 2
        study.add_trial(optuna.trial.create_trial(value=0.5, user_attrs={
            "stage": "sample", "arch": arch, "costs": {"train_flops": flops}}))
    trial_budget = sampled_reference((None, study), config)
    full = sampled_reference((None, study), config, final_epochs=3)
    assert trial_budget["architecture"] == full["architecture"] == 2
    assert (trial_budget["epochs"], full["epochs"]) == (None, 3)
    assert study.user_attrs["reference"] == trial_budget and study.user_attrs["reference_full"] == full
    assert full["seconds"] > 0 and trial_budget["seconds"] > 0
    assert sampled_reference((None, study), config, final_epochs=3) == full  # cached: not trained again

    base = config.budget
    assert final_budget("as is", None) == "as is"
    from autorec.train.trainer import TrainConfig

    cfg = final_budget(TrainConfig(epochs=base.epochs, patience=1, checkpoint_dir=str(tmp_path),
                                   max_steps_per_epoch=150), 3)
    assert (cfg.epochs, cfg.patience, cfg.checkpoint_dir) == (3, 2, None)
    assert cfg.max_steps_per_epoch is None


def test_te_readings_without_the_study_name_it(tmp_path: Path) -> None:
    from benchmarks.oneshot_vs_tpe import arguments
    from benchmarks.te_reference import readings

    args = arguments().parse_args(["--stage", "report", "--tag", "_gone", "--out", str(tmp_path)])
    with pytest.raises(SystemExit, match=r"--tag _gone --seed 2: no one-shot study under"):
        readings(args, 2)


def test_a_borrowed_tau_is_marked_by_whether_the_same_architectures_were_reranked() -> None:
    from autorec.arch import ArchSpec, TableSpec
    from autorec.arch.layers import DotConfig
    from benchmarks.oneshot_vs_tpe import reranked_archs

    def study(dims: list[int], name: str) -> optuna.Study:
        made = optuna.create_study()
        for i, dim in enumerate(dims):
            t = TableSpec(name="t", features=("a",), num_embeddings=10, dim=dim)
            spec = ArchSpec(name=f"{name}-rerank{i}", dim=dim, tables=(t,), layers=(DotConfig(),))
            made.add_trial(optuna.trial.create_trial(value=0.5, user_attrs={"stage": "rerank",
                                                                            "arch": spec.to_dict()}))
        made.add_trial(optuna.trial.create_trial(value=0.5, user_attrs={"stage": "final", "arch": {}}))
        return made
    # the same architectures, re-ranked in another order by a study of another name: the same pairs
    assert reranked_archs(study([4, 8], "k5")) == reranked_archs(study([8, 4], "k7"))
    assert reranked_archs(study([4, 8], "k5")) != reranked_archs(study([4, 16], "k7"))


def test_a_tau_on_fewer_than_twelve_pairs_is_short_and_borrowed() -> None:
    from benchmarks.oneshot_vs_tpe import TAU_ARCHITECTURES, short_of_tau

    assert TAU_ARCHITECTURES == 12  # the issue's: at least 12 sampled architectures
    assert short_of_tau({"tau_pairs": None}) and short_of_tau({"tau_pairs": 11})
    assert not short_of_tau({"tau_pairs": 12}) and not short_of_tau({"tau_pairs": 13})


def test_a_study_s_time_counts_its_complete_and_pruned_trials_only() -> None:
    """A trial cut by a kill stays FAIL (and is run again): its seconds are not the study's."""
    from benchmarks.oneshot_vs_tpe import finished

    study = optuna.create_study()
    study.optimize(lambda trial: trial.suggest_float("x", 0, 1), n_trials=1)
    study.add_trial(optuna.trial.create_trial(state=optuna.trial.TrialState.PRUNED))
    study.add_trial(optuna.trial.create_trial(state=optuna.trial.TrialState.FAIL))
    study.enqueue_trial({"x": 0.5})  # WAITING
    assert [t.state.name for t in finished(study)] == ["COMPLETE", "PRUNED"]


def test_tpes_final_is_cached_per_final_budget(tmp_path: Path) -> None:
    """A report on another final budget (``--final-epochs``) trains TPE's winner on it and keeps
    the first budget's record (``final``) as it was; each is trained once."""
    import argparse
    import datetime

    import yaml

    from autorec.data import load_dataset
    from autorec.presets import preset
    from autorec.study import StudyConfig, open_storage
    from benchmarks.oneshot_vs_tpe import final_attr, tpe_figures

    folder = tmp_path / "tpe"
    folder.mkdir()
    data = {"name": "synthetic", "options": {"preset": "tiny", "num_samples": 800}, "seed": 0}
    space = str(Path(__file__).parents[2] / "search_spaces" / "quickstart.yaml")
    (folder / "study.yaml").write_text(yaml.safe_dump({
        "name": "tpe", "data": data, "space": space, "objectives": ["val_auc"],
        "budget": {"trials": 1, "epochs": 1, "batch_size": 128}}))
    config = StudyConfig.load(folder / "study.yaml")
    arch = preset("dlrm", load_dataset("synthetic", preset="tiny", num_samples=800).schema).to_dict()
    study = optuna.create_study(study_name="tpe", storage=open_storage(config.storage_url))
    start = datetime.datetime(2026, 12, 1, 12, 0, 0)
    trial = optuna.trial.create_trial(value=0.6, user_attrs={
        "arch": arch, "metrics": {"val": {"auc": 0.6}, "test": {"auc": 0.6}},
        "costs": {"embedding_bytes": 10}})
    trial.datetime_start, trial.datetime_complete = start, start + datetime.timedelta(seconds=100)
    study.add_trial(trial)
    args = argparse.Namespace(out=tmp_path, samples=800, trials=1, epochs=1, batch_size=128, tag="_x",
                              final_epochs=1, archive_dir=tmp_path / "archive")
    assert (final_attr(3), final_attr(1)) == ("final", "final_1ep")
    one = tpe_figures(args, "tpe")
    assert one is not None and one["wall_s"] == pytest.approx(100 + one["final_s"])
    three = tpe_figures(argparse.Namespace(**{**vars(args), "final_epochs": 3}), "tpe")
    assert three is not None and 0 < three["test_auc"] < 1
    attrs = optuna.load_study(study_name="tpe", storage=open_storage(config.storage_url)).user_attrs
    assert (attrs["final_1ep"]["epochs"], attrs["final"]["epochs"]) == (1, 3)
    assert tpe_figures(args, "tpe") == one  # cached: not trained again


def test_a_fresh_reference_is_timed_for_this_report_and_the_cached_one_kept(tmp_path: Path) -> None:
    """``--fresh-reference``: the median TPE trial trained again now, in this report's unit only."""
    import datetime

    from autorec.presets import preset
    from autorec.study import StudyConfig, open_storage
    from benchmarks.oneshot_vs_tpe import arguments, reference_training, study_file

    flags = ["--stage", "report", "--out", str(tmp_path), "--samples", "2000", "--batch-size", "256"]
    args = arguments().parse_args(flags)
    config = StudyConfig.load(study_file(args, "tpe"))
    from autorec.data import load_dataset

    schema = load_dataset("synthetic", preset="scale", num_samples=2000).schema
    arch = preset("dlrm", schema).to_dict()
    study = optuna.create_study(study_name=config.name, storage=open_storage(config.storage_url))
    start = datetime.datetime(2026, 1, 1)
    for seconds in (30, 10, 20):  # the median by duration is the trial of 20 s
        study.add_trial(optuna.trial.FrozenTrial(
            number=0, trial_id=0, state=optuna.trial.TrialState.COMPLETE, value=0.5, values=None,
            datetime_start=start, datetime_complete=start + datetime.timedelta(seconds=seconds),
            params={}, distributions={}, user_attrs={"metrics": {}, "arch": arch}, system_attrs={},
            intermediate_values={}))
    cached = reference_training(args)
    assert cached is not None and cached["trial"] == 2 and cached["trial_seconds"] == 20
    assert study.user_attrs["reference"] == cached and not cached.get("fresh")
    fresh = reference_training(arguments().parse_args([*flags, "--fresh-reference"]))
    assert fresh is not None and fresh["fresh"] and fresh["trial"] == 2 and fresh["seconds"] > 0
    assert optuna.load_study(study_name=config.name, storage=open_storage(config.storage_url)
                             ).user_attrs["reference"] == cached  # kept for the other reports


def test_a_seeds_search_time_is_split_by_stage_and_sums_to_its_search_s(tmp_path: Path) -> None:
    """The report's per-seed stage seconds (``oneshot_seed<N>_<stage>_s``) come from the study's
    record and add up to its ``search_s``; the final's tables are counted."""
    from autorec.study import StudyConfig, open_storage
    from benchmarks.oneshot_vs_tpe import arguments, oneshot_figures, stage_figures, study_file

    args = arguments().parse_args(["--stage", "report", "--out", str(tmp_path), "--tag", "_t"])
    config = StudyConfig.load(study_file(args, "oneshot", 0))
    study = optuna.create_study(study_name=config.name, storage=open_storage(config.storage_url))
    record = {"supernet": {"seconds": 100.0}, "heads": {"seconds": 40.0}, "layer_grid": {"seconds": 35.0},
              "fine_phase": {"seconds": 80.0}, "search_seconds": 162.5, "rescore_seconds": 41.0,
              "rung_loser_seconds": 84.0, "final_seconds": 140.0}
    study.set_user_attr("oneshot", record)
    study.add_trial(optuna.trial.create_trial(
        value=0.6, user_attrs={"stage": "final", "arch": {"tables": [{}] * 17},
                               "metrics": {"test": {"auc": 0.67}}, "costs": {"embedding_bytes": 1}}))
    figures = oneshot_figures(args, 0)
    assert figures is not None and figures["final_tables"] == 17 and figures["test_auc"] == 0.67
    assert figures["stages"] == {"supernet_s": 100.0, "heads_s": 40.0, "grid_s": 35.0, "fine_phase_s": 80.0,
                                 "other_search_s": 7.5, "rescore_s": 41.0, "rerank_s": 0.0,
                                 "rung_losers_s": 84.0}
    assert figures["search_s"] == pytest.approx(100.0 + 162.5 + 41.0 + 84.0)
    assert figures["wall_s"] == pytest.approx(figures["search_s"] + 140.0)
    # --stage stages: the same as flat keys per seed; a seed with no study is left out
    flat = stage_figures(arguments().parse_args(["--stage", "stages", "--out", str(tmp_path), "--tag", "_t",
                                                 "--seeds", "0,1"]))
    assert flat["t_seed0_grid_s"] == 35.0 and flat["t_seed0_final_tables"] == 17
    assert flat["t_seed0_search_s"] == figures["search_s"] and not any(k.startswith("t_seed1") for k in flat)
