"""Model selection: early stopping and the kept checkpoint watch validation logloss (default) or
AUC; the restored model is the selected epoch's."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from autorec.config.train import TrainSettings
from autorec.presets import preset
from autorec.train.trainer import TrainConfig, Trainer

# Learning rates high enough that validation logloss turns up while AUC still moves: the two
# monitors pick different epochs.
OVERFIT = TrainConfig(epochs=6, batch_size=128, seed=0, progress=False, embedding_lr=0.4, dense_lr=1e-2,
                      patience=6, track_test=True)


@pytest.fixture(scope="module")
def runs(planted_data):
    spec = preset("dlrm", planted_data.schema, dim=8)
    return {monitor: Trainer(spec, planted_data, dataclasses.replace(OVERFIT, monitor=monitor)).fit()
            for monitor in ("val_logloss", "val_auc")}


def test_the_default_monitor_is_validation_logloss():
    assert TrainConfig().monitor == "val_logloss" and TrainSettings().monitor == "val_logloss"


def test_logloss_selection_keeps_the_epoch_of_lowest_validation_logloss(runs):
    result = runs["val_logloss"]
    losses = [r.val["logloss"] for r in result.history]
    assert result.best_epoch == int(np.argmin(losses))
    assert result.val == result.history[result.best_epoch].val
    assert result.test == result.history[result.best_epoch].test  # the restored model is that epoch's
    assert {"logloss", "ne", "calibration", "auc"} <= result.test.keys()
    # (How close the selected epoch's test logloss comes to the best epoch's is a quality claim,
    # checked on enough validation data: tests/blocks/test_family_quality.py.)


def test_auc_selection_keeps_the_epoch_of_highest_validation_auc(runs):
    result = runs["val_auc"]
    assert result.best_epoch == int(np.argmax([r.val["auc"] for r in result.history]))
    assert result.test == result.history[result.best_epoch].test
    # Same seed, same data: the two runs saw the same epochs and differ only in what they kept.
    assert [r.val for r in result.history] == [r.val for r in runs["val_logloss"].history]


def test_a_bad_monitor_is_refused():
    with pytest.raises(ValueError, match="monitor: expected one of val_logloss, val_auc, got 'auc'"):
        TrainConfig(monitor="auc")
    with pytest.raises(ValueError, match="monitor"):
        TrainSettings(monitor="val_ne")


def test_a_run_resumed_with_another_monitor_is_refused(planted_data, tmp_path):
    spec = preset("dlrm", planted_data.schema, dim=8)
    config = dataclasses.replace(OVERFIT, epochs=1, track_test=False, checkpoint_dir=str(tmp_path))
    Trainer(spec, planted_data, config).fit()
    again = dataclasses.replace(config, epochs=2, resume=True, monitor="val_auc")
    with pytest.raises(ValueError, match="watched val_logloss; this one watches val_auc"):
        Trainer(spec, planted_data, again).fit()
