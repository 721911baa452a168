"""After the search, the best trials retrained in full (budget.final_top), the presets with the
same full budget, the answer and the export taken from the full trainings; a rerun resumes."""

from __future__ import annotations

import json
from pathlib import Path

import optuna
import pytest

from autorec.export import MANIFEST
from autorec.report import write_report
from autorec.study import StudyConfig, StudyConfigError, export_trials, open_storage, run_study
from autorec.study.final import FINAL_ATTR, ranked_trials
from autorec.train import trainer as trainer_module
from tests import studyfiles

BUDGET = {"trials": 3, "epochs": 1, "batch_size": 256, "max_steps_per_epoch": 3,
          "final_top": 2, "final_epochs": 2}


def quiet(*_: object) -> None:
    pass


@pytest.fixture
def fits(monkeypatch) -> list[int]:
    calls: list[int] = []
    real = trainer_module.Trainer.fit

    def counted(self, *args, **kwargs):
        calls.append(self.config.epochs)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(trainer_module.Trainer, "fit", counted)
    return calls


def test_the_best_trials_and_the_presets_are_trained_in_full_and_answer(tmp_path: Path, fits):
    config = StudyConfig.load(studyfiles.write_study(tmp_path, budget=BUDGET, baselines=["dlrm"]))
    summary = run_study(config, log=quiet)
    assert fits == [2, 1, 1, 1, 2, 2]  # the preset in full, 3 trials, the 2 best in full
    study = optuna.load_study(study_name=config.name, storage=open_storage(config.storage_url))
    final = study.user_attrs[FINAL_ATTR]
    assert config.answer_by == "val_auc"  # the study's one objective, not the monitor (logloss)
    ranked = [t.number for t in ranked_trials(study, config)]
    assert sorted(final) == sorted(str(n) for n in ranked[:2])
    aucs = {t.number: t.user_attrs["metrics"]["val"]["auc"] for t in study.trials}
    assert min(aucs[n] for n in ranked[:2]) >= max(aucs[n] for n in ranked[2:])
    for record in final.values():
        assert record["epochs"] == 2 and Path(record["checkpoint"]).is_dir()
    assert study.user_attrs["baselines"]["dlrm"]["budget"] == "full"
    best = summary.best
    assert best["full_training"] and str(best["number"]) in final
    assert best["val_auc"] == max(record["val"]["auc"] for record in final.values())
    assert best["test_auc"] == final[str(best["number"])]["test"]["auc"]
    assert "retrained in full" in summary.verdict() and "the same full budget" in summary.verdict()

    page = write_report(study, tmp_path / "report.html").read_text()
    assert "The best trials retrained in full" in page and "test logloss" in page
    assert "synthetic, random 80/10/10 split (seed 0)" in page
    assert "Each training keeps the epoch of lowest validation logloss" in page

    out = export_trials(config, tmp_path / "export", log=quiet)[0]
    manifest = json.loads((out / MANIFEST).read_text())
    assert manifest["metrics"]["full_training"] is True
    assert manifest["metrics"]["test"] == final[str(best["number"])]["test"]

    fits.clear()
    run_study(config, log=quiet)  # everything recorded: nothing trains again
    assert fits == []


def test_a_oneshot_study_refuses_a_final_stage_before_writing_anything(tmp_path: Path):
    config = StudyConfig.load(studyfiles.write_study(
        tmp_path, strategy={"name": "oneshot", "options": {"steps": 2, "candidates": 2}}, budget=BUDGET))
    with pytest.raises(StudyConfigError, match=r"budget\.final_top: a oneshot study trains what it answers"):
        run_study(config, log=quiet)
    assert not (config.directory / "study.db").exists()


@pytest.mark.parametrize(("objectives", "monitor", "expected"), [
    (["val_auc"], "val_logloss", "val_auc"),
    (["val_logloss"], "val_auc", "val_logloss"),
    (["val_auc", "flops"], "val_logloss", "val_logloss"),  # several: the monitor decides
    (["flops"], "val_auc", "val_auc"),
])
def test_the_answer_follows_the_one_validation_objective_else_the_monitor(
        tmp_path: Path, objectives: list[str], monitor: str, expected: str) -> None:
    path = studyfiles.write_study(tmp_path, budget={**BUDGET, "monitor": monitor}, objectives=objectives)
    assert StudyConfig.load(path).answer_by == expected
