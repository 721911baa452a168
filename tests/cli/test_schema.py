"""``autorec schema``: the study file's JSON schema, to a file or stdout."""

import json

from autorec.cli import main
from autorec.study.config import study_json_schema


def test_schema_to_a_file_is_the_study_schema(tmp_path, capsys):
    out = tmp_path / "study.schema.json"
    assert main(["schema", "-o", str(out)]) == 0
    assert json.loads(out.read_text()) == study_json_schema()
    assert str(out) in capsys.readouterr().err


def test_schema_to_stdout(capsys):
    assert main(["schema"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document == study_json_schema() and "properties" in document
