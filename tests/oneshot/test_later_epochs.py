"""benchmarks/later_epochs.py (issue 20): a study's architecture trained for several epochs with
each epoch's validation and test AUC, the tables' rate scaled from the second epoch on."""

from pathlib import Path

import pytest

from autorec.data import load_dataset
from autorec.presets import preset
from autorec.study import StudyConfig, TrialRunner
from benchmarks.later_epochs import later_epochs

DATA = {"name": "synthetic", "options": {"preset": "tiny", "num_samples": 1200}, "seed": 0}
SPACE = str(Path(__file__).parents[2] / "search_spaces" / "quickstart.yaml")


def test_the_first_epoch_is_the_same_and_the_later_ones_follow_the_tables_rate(tmp_path):
    config = StudyConfig.from_dict({"name": "s", "data": DATA, "space": SPACE, "objectives": ["val_auc"],
                                    "budget": {"trials": 1, "epochs": 1, "batch_size": 128}},
                                   tmp_path / "study.yaml")
    runner = TrialRunner(config)
    arch = preset("dlrm", load_dataset("synthetic", preset="tiny", num_samples=1200).schema).to_dict()
    trained = later_epochs(runner, arch, 3, 1.0, None, log=lambda _: None)
    frozen = later_epochs(runner, arch, 3, 0.0, None, log=lambda _: None)
    assert len(trained) == len(frozen) == 3  # no early stop
    assert frozen[0] == pytest.approx({**trained[0], "seconds": frozen[0]["seconds"]})
    assert frozen[1]["train_loss"] != trained[1]["train_loss"]
    for row in trained + frozen:
        assert 0 < row["val_auc"] < 1 and 0 < row["test_auc"] < 1 and row["seconds"] > 0
    reseeded = later_epochs(runner, arch, 2, 1.0, 5, log=lambda _: None)
    assert reseeded[0]["train_loss"] != trained[0]["train_loss"]
