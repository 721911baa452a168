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
    (None, "cannot read it as JSON"),
    ("{not json", "cannot read it as JSON"),
    ("[1, 2]", "expected a JSON object, got list"),
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
                              final_epochs=1)
    assert tpe_figures(args, "tpe") is None
    assert reference_training(args) is None
    assert not (tmp_path / "tpe" / "tpe" / "study.db").exists()  # reading a report leaves no empty study


def test_a_candidate_to_train_again_is_refused_by_name(tmp_path: Path) -> None:
    from benchmarks.oneshot_studies import open_candidates

    with pytest.raises(SystemExit, match=r"--trials '3,x': expected comma-separated trial numbers"):
        open_candidates(tmp_path, "_x", 0, "3,x")
    with pytest.raises(SystemExit, match=r"--tag _x --seed 1: no study file at .*oneshot_x_seed1/study.yaml"):
        open_candidates(tmp_path, "_x", 1, "3")
