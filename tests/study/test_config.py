"""The study file's pydantic models: one line per malformed file, naming file, key path and what
was expected; the JSON schema accepts every shipped study and refuses what the models refuse."""

from pathlib import Path

import jsonschema
import pytest
import yaml

from autorec.study import StudyConfig, StudyConfigError, study_json_schema
from tests.studyfiles import write_study

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("changes, message", [
    # unknown keys, at the top and inside each section
    ({"colour": "red"}, "colour: unknown key; expected one of name, data, space"),
    ({"budget": {"trails": 3}}, "budget.trails: unknown key; expected one of trials, timeout_s"),
    ({"data": {"name": "synthetic", "rows": 3}}, "data.rows: unknown key; expected one of name, path"),
    ({"strategy": {"name": "tpe", "option": {}}},
     "strategy.option: unknown key; expected one of name, options"),
    # wrong types
    ({"budget": {"trials": "many"}}, "budget.trials: expected an integer, got 'many'"),
    ({"budget": {"trials": True}}, "budget.trials: expected an integer, got True"),
    ({"budget": {"epochs": 1.5}}, "budget.epochs: expected an integer, got 1.5"),
    ({"budget": 12}, "budget: expected a mapping, got 12"),
    ({"workers": "two"}, "workers: expected an integer, got 'two'"),
    ({"data": ["synthetic"]}, "data: expected a mapping, got ['synthetic']"),
    ({"data": {"name": "synthetic", "options": "tiny"}}, "data.options: expected a mapping, got 'tiny'"),
    ({"objectives": [1]}, "objectives[0]: expected one of val_auc"),
    ({"budget": {"timeout_s": "1h"}}, "budget.timeout_s: expected a number, got '1h'"),
    # missing or unknown dataset
    ({"data": None}, "data: expected a mapping, got None"),
    ({"data": {"name": "imagenet"}}, "data.name: expected one of movielens100k"),
    # negative or zero budgets
    ({"budget": {"trials": -3}}, "budget.trials: expected an integer >= 1, got -3"),
    ({"budget": {"epochs": 0}}, "budget.epochs: expected an integer >= 1, got 0"),
    ({"budget": {"timeout_s": -1}}, "budget.timeout_s: expected a number > 0, got -1"),
    ({"budget": {"timeout_s": 0.0}}, "budget.timeout_s: expected a number > 0, got 0.0"),
    ({"seed": -1}, "seed: expected an integer >= 0, got -1"),
    # names
    ({"name": "a/b"}, "name: expected a non-empty name without '/', got 'a/b'"),
    ({"objectives": []}, "objectives: expected at least 1 item(s), got []"),
    ({"strategy": {"name": "dnas", "options": {"retrian": "scratch"}}},
     "strategy.options: strategy 'dnas': unknown options ['retrian']"),
    ({"strategy": {"name": "tpe", "options": {"n_startup_trials": "five"}}},
     "strategy.options: strategy 'tpe': n_startup_trials: expected an integer, got 'five'"),
])
def test_each_malformed_file_is_one_line_naming_file_key_and_expectation(tmp_path, changes, message):
    path = write_study(tmp_path, **changes)
    with pytest.raises(StudyConfigError) as info:
        StudyConfig.load(path)
    text = str(info.value)
    assert text.startswith(f"{path}: ") and message in text, text
    assert "\n" not in text


def test_a_missing_dataset_key(tmp_path):
    path = write_study(tmp_path)
    data = yaml.safe_load(path.read_text())
    del data["data"]
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(StudyConfigError, match=r"study.yaml: data: required key is missing$"):
        StudyConfig.load(path)


def test_a_file_that_is_not_a_mapping(tmp_path):
    path = tmp_path / "list.yaml"
    path.write_text("- name: x\n")
    with pytest.raises(StudyConfigError, match=r"list.yaml: expected a mapping of study keys, got list"):
        StudyConfig.load(path)


def test_paths_are_relative_to_the_study_file(tmp_path, monkeypatch):
    (tmp_path / "spaces").mkdir()
    (tmp_path / "spaces" / "s.yaml").write_text((ROOT / "search_spaces" / "zoo.yaml").read_text())
    path = write_study(tmp_path, space="spaces/s.yaml",
                       data={"name": "synthetic", "path": "data/x.npz", "options": {"preset": "tiny"}})
    monkeypatch.chdir(ROOT)  # not the study's folder
    config = StudyConfig.load(path)
    assert config.space == (tmp_path / "spaces" / "s.yaml").resolve()
    assert config.data.path == str(tmp_path.resolve() / "data" / "x.npz")
    assert config.source == path.resolve() and config.directory == tmp_path.resolve() / "t"


def test_defaults_and_shorthands(tmp_path):
    config = StudyConfig.load(write_study(tmp_path, strategy="nsga2", objectives="flops"))
    assert config.strategy.name == "nsga2" and config.strategy.options == {}
    assert config.objectives == ("flops",) and config.directions == ["minimize"]
    assert config.budget.patience == 1 and config.pruner == "none" and config.baselines == ()


def test_schema_accepts_every_shipped_study():
    schema = study_json_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    files = sorted((ROOT / "studies").glob("*.yaml"))
    assert len(files) >= 8
    for path in files:
        jsonschema.validate(yaml.safe_load(path.read_text()), schema)


@pytest.mark.parametrize("changes", [
    {"colour": "red"}, {"budget": {"trials": 0}}, {"budget": {"trails": 1}}, {"pruner": "asha"},
    {"objectives": ["speed"]}, {"workers": "two"}, {"strategy": 3},
])
def test_schema_refuses_what_the_models_refuse(tmp_path, changes):
    data = yaml.safe_load(write_study(tmp_path, **changes).read_text())
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(data, study_json_schema())
