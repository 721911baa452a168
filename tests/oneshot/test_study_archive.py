"""Issue 20's studies kept in the work tree: archived to a journal file, restored on a new machine."""

from __future__ import annotations

import argparse
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from autorec.study import StudyConfig, open_storage
from benchmarks.oneshot_vs_tpe import _load, archive_path, archive_stages, study_file
from benchmarks.study_archive import archive, restore


def _study(url: str, name: str = "s") -> optuna.Study:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(study_name=name, storage=open_storage(url))
    study.set_user_attr("final", {"trial": 1, "test_auc": 0.67})

    def objective(trial: optuna.Trial) -> float:
        trial.set_user_attr("arch", {"layers": [trial.suggest_categorical("kind", ["dot", "dcnv2"])]})
        return trial.suggest_float("x", 0, 1)

    study.optimize(objective, n_trials=3)
    pruned = study.ask()
    study.tell(pruned, state=TrialState.PRUNED)
    study.ask()  # running when archived: comes back running, as after a kill
    return study


def test_a_restored_study_holds_every_trial_as_archived(tmp_path: Path) -> None:
    source = _study(f"sqlite:///{tmp_path}/a.db")
    assert archive("s", f"sqlite:///{tmp_path}/a.db", tmp_path / "keep" / "s.jsonl") == 5
    assert not list((tmp_path / "keep").glob("*.partial"))
    assert restore(tmp_path / "keep" / "s.jsonl", "s", f"sqlite:///{tmp_path}/b.db")
    copy = optuna.load_study(study_name="s", storage=f"sqlite:///{tmp_path}/b.db")
    assert copy.user_attrs == source.user_attrs
    got = [(t.state, t.params, t.value, t.user_attrs) for t in copy.trials]
    assert got == [(t.state, t.params, t.value, t.user_attrs) for t in source.trials]
    assert [t.state for t in copy.trials][-2:] == [TrialState.PRUNED, TrialState.RUNNING]


def test_a_study_already_there_is_not_overwritten_nor_doubled(tmp_path: Path) -> None:
    _study(f"sqlite:///{tmp_path}/a.db")
    archive("s", f"sqlite:///{tmp_path}/a.db", tmp_path / "s.jsonl")
    assert not restore(tmp_path / "s.jsonl", "s", f"sqlite:///{tmp_path}/a.db")
    assert len(optuna.load_study(study_name="s", storage=f"sqlite:///{tmp_path}/a.db").trials) == 5
    assert not restore(tmp_path / "none.jsonl", "t", f"sqlite:///{tmp_path}/c.db")  # no archive: nothing


def test_wrong_names_are_refused_by_name(tmp_path: Path) -> None:
    _study(f"sqlite:///{tmp_path}/a.db")
    with pytest.raises(SystemExit, match="no study 'other' in sqlite:///"):
        archive("other", f"sqlite:///{tmp_path}/a.db", tmp_path / "o.jsonl")
    assert not (tmp_path / "o.jsonl").exists()
    archive("s", f"sqlite:///{tmp_path}/a.db", tmp_path / "s.jsonl")
    with pytest.raises(SystemExit, match=r"s.jsonl holds no study 'other'"):
        restore(tmp_path / "s.jsonl", "other", f"sqlite:///{tmp_path}/c.db")


def test_the_benchmark_reads_a_tpe_study_from_its_archive_on_a_machine_without_it(tmp_path: Path) -> None:
    def args(out: Path) -> argparse.Namespace:
        return argparse.Namespace(out=out, samples=1000, trials=2, epochs=1, batch_size=64, tag="_x",
                                  final_epochs=1, seeds="0", archive_dir=tmp_path / "archive")

    first = args(tmp_path / "machine1")
    url = StudyConfig.load(study_file(first, "tpe")).storage_url
    _study(url, name="tpe")
    archive_stages(first)  # TPE studies only (a one-shot study needs its supernet to go on)
    assert archive_path(first, "tpe").is_file()
    assert not archive_path(first, "oneshot_x_seed0").exists()
    loaded = _load(args(tmp_path / "machine2"), "tpe")
    assert loaded is not None
    assert len(loaded[1].trials) == 5 and loaded[1].user_attrs["final"]["test_auc"] == 0.67
