"""benchmarks/final_seeds.py: a winner's final training under other training seeds, each cached
in its study as it ends; a study without a final is refused by name."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest

from benchmarks.final_seeds import seeded_finals, winner


def test_a_study_without_a_final_is_refused_by_name() -> None:
    tpe = optuna.create_study(study_name="tpe_x")
    with pytest.raises(SystemExit, match="tpe_x: no 'final' training recorded"):
        winner(tpe, "tpe")
    tpe.set_user_attr("final", {"trial": 0, "test_auc": 0.6})  # a 3-epoch final: not a 1-epoch one
    with pytest.raises(SystemExit, match=r"tpe_x: no 'final_1ep' training recorded .* --final-epochs 1"):
        winner(tpe, "tpe", final_epochs=1)
    shot = optuna.create_study(study_name="oneshot_x_seed0")
    shot.add_trial(optuna.trial.create_trial(value=0.5, user_attrs={"stage": "rerank", "arch": {}}))
    with pytest.raises(SystemExit, match="oneshot_x_seed0: no complete final training"):
        winner(shot, "oneshot")


def test_each_seed_trains_once_on_the_final_budget_and_is_cached(tmp_path: Path) -> None:
    from autorec.data import load_dataset
    from autorec.presets import preset
    from autorec.study import StudyConfig

    data = {"name": "synthetic", "options": {"preset": "tiny", "num_samples": 800}, "seed": 0}
    space = str(Path(__file__).parents[2] / "search_spaces" / "quickstart.yaml")
    config = StudyConfig.from_dict({"name": "tpe", "data": data, "space": space, "objectives": ["val_auc"],
                                    "budget": {"trials": 1, "epochs": 1, "batch_size": 128,
                                               "max_steps_per_epoch": 1}},
                                   tmp_path / "study.yaml")
    arch = preset("dlrm", load_dataset("synthetic", preset="tiny", num_samples=800).schema).to_dict()
    study = optuna.create_study(study_name="tpe")
    study.add_trial(optuna.trial.create_trial(value=0.5, user_attrs={"arch": arch}))
    study.set_user_attr("final", {"trial": 0, "test_auc": 0.6})
    study.set_user_attr("final_2ep", {"trial": 0, "test_auc": 0.62, "machine": "Intel"})
    assert winner(study, "tpe") == (arch, 0.6)
    assert winner(study, "tpe", final_epochs=2, here="Intel") == (arch, 0.62)
    with pytest.raises(SystemExit, match="tpe: its 'final_2ep' training was recorded on Intel, not on "
                                         r"this one \(AMD EPYC\); run oneshot_vs_tpe's report here"):
        winner(study, "tpe", final_epochs=2, here="AMD EPYC")
    with pytest.raises(SystemExit, match="recorded on an unnamed machine"):
        winner(study, "tpe", final_epochs=3, here="Intel")  # a record from before machines were kept
    lines: list[str] = []
    runs = seeded_finals(config, study, arch, [1, 2], final_epochs=2, log=lines.append, here="Intel")
    assert set(runs) == {"1", "2"} and len(lines) == 2
    assert runs["1"]["test_auc"] != runs["2"]["test_auc"]  # other initial weights, other batches
    assert all(r["best_epoch"] in (0, 1) and r["seconds"] > 0 for r in runs.values())
    assert study.user_attrs["final_seeds"] == {"1/2ep/Intel": runs["1"], "2/2ep/Intel": runs["2"]}
    again = seeded_finals(config, study, arch, [2], final_epochs=2, log=lines.append, here="Intel")
    assert again == {"2": runs["2"]} and len(lines) == 2  # cached: not trained again
    seeded_finals(config, study, arch, [2], final_epochs=1, log=lines.append, here="Intel")
    seeded_finals(config, study, arch, [2], final_epochs=2, log=lines.append, here="AMD EPYC")
    assert len(lines) == 4  # another budget, another machine: trained again, beside the first
    assert set(study.user_attrs["final_seeds"]) == {"1/2ep/Intel", "2/2ep/Intel", "2/1ep/Intel",
                                                   "2/2ep/AMD EPYC"}


def _study_file(folder: Path, name: str, seed: int = 0) -> Path:
    """A study file of ``name`` at ``folder/name/study.yaml`` (its SQLite database goes beside it)."""
    import yaml

    data = {"name": "synthetic", "options": {"preset": "tiny", "num_samples": 800}, "seed": 0}
    space = str(Path(__file__).parents[2] / "search_spaces" / "quickstart.yaml")
    path = folder / name / "study.yaml"
    path.parent.mkdir(parents=True)
    path.write_text(yaml.safe_dump({"name": name, "data": data, "space": space, "objectives": ["val_auc"],
                                    "seed": seed, "budget": {"trials": 1, "epochs": 1, "batch_size": 128}}))
    return path


def test_the_recorded_seed_is_the_studys_or_the_rung_winners(tmp_path: Path) -> None:
    from autorec.study import StudyConfig
    from benchmarks.final_seeds import recorded_seed

    config = StudyConfig.load(_study_file(tmp_path, "oneshot_x_seed2", seed=2))
    shot = optuna.create_study(study_name="oneshot_x_seed2")
    assert recorded_seed(shot, "oneshot", config) == 2  # one rung seed: the study's
    shot.set_user_attr("oneshot", {"rung_winner_seed": 3})
    assert recorded_seed(shot, "oneshot", config) == 3
    assert recorded_seed(shot, "tpe", config) == 2


def test_a_study_whose_database_is_gone_is_restored_from_its_archive(tmp_path: Path) -> None:
    from autorec.study import StudyConfig, open_storage
    from benchmarks.final_seeds import open_study
    from benchmarks.study_archive import archive

    with pytest.raises(SystemExit, match=r"tpe_y: no study file at .*tpe_y/study.yaml"):
        open_study(tmp_path, "tpe_y", tmp_path / "archive")
    config = StudyConfig.load(_study_file(tmp_path, "tpe_y"))
    study = optuna.create_study(study_name="tpe_y", storage=open_storage(config.storage_url))
    study.set_user_attr("final", {"trial": 0, "test_auc": 0.61})
    (tmp_path / "archive").mkdir()
    archive("tpe_y", config.storage_url, tmp_path / "archive" / "tpe_y.jsonl")
    (config.directory / "study.db").unlink()
    _, again = open_study(tmp_path, "tpe_y", tmp_path / "archive")
    assert again.user_attrs["final"] == {"trial": 0, "test_auc": 0.61}
    assert (config.directory / "study.db").exists()
