"""The forms of an export (eager, exported, compiled, int8) agree on what they predict."""

import json
import shutil

import pytest
import torch

from autorec.export import COMPILED, MANIFEST, PREDICTIONS, ExportError, load_compiled, load_predictions
from autorec.serving import FORMS, load_forms
from autorec.serving.bench import requests
from tests.doctests import assert_examples_run


def test_the_compiled_package_is_written_checked_and_recorded(compiled_export):
    assert (compiled_export / COMPILED).is_file()
    manifest = json.loads((compiled_export / MANIFEST).read_text())
    assert COMPILED in manifest["files"]
    checks = json.loads((compiled_export / PREDICTIONS).read_text())["checks"]
    assert checks["compiled_max_abs_diff"] <= 1e-4


def test_every_form_predicts_the_recorded_sample(compiled_export):
    sample = load_predictions(compiled_export)
    forms = load_forms(compiled_export)
    assert set(forms) == set(FORMS)
    with torch.inference_mode():
        for name in ("eager", "exported", "compiled"):
            torch.testing.assert_close(forms[name](sample.dense, sample.values, sample.lengths),
                                       sample.logits, atol=1e-4, rtol=0)
        # int8 moves the logits, but not far on a model this small
        int8 = forms["int8"](sample.dense, sample.values, sample.lengths)
        assert not torch.equal(int8, sample.logits)
        assert (int8 - sample.logits).abs().max() < 0.2


@pytest.mark.parametrize("batch_size", [1, 7, 300])
def test_any_batch_size_runs_compiled(compiled_export, movielens, batch_size):
    runner, eager = load_compiled(compiled_export), load_forms(compiled_export, ("eager",))["eager"]
    (request,) = requests(compiled_export, movielens, batch_size, count=1)
    with torch.inference_mode():
        torch.testing.assert_close(runner(*request), eager(*request), atol=1e-4, rtol=0)


def test_an_export_without_package_serves_the_other_forms(compiled_export, tmp_path):
    plain = tmp_path / "plain"
    shutil.copytree(compiled_export, plain)
    (plain / COMPILED).unlink()
    assert "compiled" not in load_forms(plain)
    with pytest.raises(ExportError, match=r"model.aoti.pt2: missing; export with --compile"):
        load_forms(plain, ("compiled",))


def test_a_corrupt_package_is_named(compiled_export, tmp_path):
    broken = tmp_path / "broken"
    shutil.copytree(compiled_export, broken)
    (broken / COMPILED).write_bytes(b"not a zip")
    with pytest.raises(ExportError, match=r"model.aoti.pt2: not a loadable AOTInductor package"):
        load_compiled(broken)


def test_an_unknown_form_is_refused(compiled_export):
    with pytest.raises(ValueError, match="forms: unknown fp4; expected some of eager"):
        load_forms(compiled_export, ("fp4",))


def test_examples_run():
    assert_examples_run("autorec.serving.forms")
    assert_examples_run("autorec.serving.bench")
