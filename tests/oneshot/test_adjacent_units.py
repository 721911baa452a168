"""Each one-shot seed's TE unit timed beside it (benchmarks/adjacent_units.py, ``--stage unit``)."""

from __future__ import annotations

import datetime
import json
from pathlib import Path

import optuna
import pytest

from benchmarks.adjacent_units import UNITS_FILE, adjacent_keys, read_units, record_unit


def test_units_are_appended_and_read_back(tmp_path: Path) -> None:
    folder = tmp_path / "seed0"
    assert read_units(folder) == []
    record_unit(folder, "before", 90.0, 7, "m")
    units = record_unit(folder, "after", 110.0, 7, "m")
    assert [(u["when"], u["seconds"], u["trial"]) for u in units] == [("before", 90.0, 7),
                                                                      ("after", 110.0, 7)]
    assert read_units(folder) == units
    assert sorted(p.name for p in folder.iterdir()) == [UNITS_FILE]  # no staged file left behind
    with pytest.raises(ValueError, match="when: expected one of before, after, got 'during'"):
        record_unit(folder, "during", 1.0, 7, "m")
    assert read_units(folder) == units  # the refused one wrote nothing


@pytest.mark.parametrize(("text", "expected"), [
    ("{not json", "is not JSON"),
    ('{"seconds": 1}', "holds a dict, expected a JSON list of unit records"),
    ('[{"when": "after", "seconds": 0}]', r"record 0 has no 'seconds' > 0"),
    ('[{"when": "after", "seconds": 5}, 3]', r"record 1 has no 'seconds' > 0 \(got 3\)"),
    ('[{"when": "later", "seconds": 5}]', "record 0 has 'when' 'later'; expected one of before, after"),
])
def test_a_bad_units_file_is_named(tmp_path: Path, text: str, expected: str) -> None:
    (tmp_path / UNITS_FILE).write_text(text)
    with pytest.raises(SystemExit, match=expected) as caught:
        read_units(tmp_path)
    assert str(tmp_path / UNITS_FILE) in str(caught.value)
    with pytest.raises(SystemExit):  # and a new unit does not overwrite what is there
        record_unit(tmp_path, "after", 1.0, 0, "m")
    assert (tmp_path / UNITS_FILE).read_text() == text


def test_each_seed_is_read_in_its_own_units() -> None:
    shots = [{"seed": 0, "search_s": 300.0, "units": [{"seconds": 100.0}, {"seconds": 150.0}]},
             {"seed": 2, "search_s": 240.0, "units": [{"seconds": 80.0}]}]
    keys = adjacent_keys(shots)
    assert keys["oneshot_seed0_adjacent_unit_s"] == 125.0 and keys["oneshot_seed0_adjacent_units"] == 2
    assert keys["oneshot_seed0_adjacent_unit_spread"] == 1.5
    assert keys["oneshot_seed0_train_equivalents_adjacent"] == pytest.approx(2.4)
    assert keys["oneshot_seed2_train_equivalents_adjacent"] == pytest.approx(3.0)
    assert keys["oneshot_train_equivalents_adjacent_max"] == pytest.approx(3.0)
    partial = adjacent_keys([*shots, {"seed": 1, "search_s": 500.0, "units": []}])
    assert "oneshot_train_equivalents_adjacent_max" not in partial  # a seed without units: no worst
    assert "oneshot_seed1_train_equivalents_adjacent" not in partial


def test_the_unit_stage_times_tpes_median_trial_into_each_seeds_folder(tmp_path: Path) -> None:
    from autorec.data import load_dataset
    from autorec.presets import preset
    from autorec.study import StudyConfig, open_storage
    from benchmarks.oneshot_vs_tpe import arguments, study_file, time_units

    flags = ["--stage", "unit", "--out", str(tmp_path), "--samples", "2000", "--batch-size", "256",
             "--tag", "_x", "--seeds", "0,1", "--variant", "none",
             "--archive-dir", str(tmp_path / "archive")]  # (the repository's archive holds a tpe study)
    with pytest.raises(SystemExit, match="no complete trial in the tpe study"):
        time_units(arguments().parse_args(flags))
    args = arguments().parse_args([*flags, "--when", "before"])
    config = StudyConfig.load(study_file(args, "tpe"))
    arch = preset("dlrm", load_dataset("synthetic", preset="scale", num_samples=2000).schema).to_dict()
    study = optuna.create_study(study_name=config.name, storage=open_storage(config.storage_url))
    start = datetime.datetime(2026, 1, 1)
    for seconds in (30, 10, 20):  # the median by duration is the trial of 20 s, number 2
        study.add_trial(optuna.trial.FrozenTrial(
            number=0, trial_id=0, state=optuna.trial.TrialState.COMPLETE, value=0.5, values=None,
            datetime_start=start, datetime_complete=start + datetime.timedelta(seconds=seconds),
            params={}, distributions={}, user_attrs={"metrics": {}, "arch": arch}, system_attrs={},
            intermediate_values={}))
    time_units(args)
    for seed in (0, 1):
        name = f"oneshot_x_seed{seed}"
        units = json.loads((tmp_path / name / name / UNITS_FILE).read_text())
        assert [(u["when"], u["trial"]) for u in units] == [("before", 2)] and units[0]["seconds"] > 0
