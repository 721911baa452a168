"""Tau along a supernet's training (``benchmarks/oneshot_tau_steps.py``): kept checkpoints, each
scored against the pooled tau trainings; a branch from a kept step; resumable; bad input named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.oneshot_cross_scores import borrowed_tau
from benchmarks.oneshot_tau_steps import main
from tests.studyfiles import run_micro_oneshot


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    return run_micro_oneshot(tmp_path_factory.mktemp("steps"), "_x", (0, 1), calibrate=2)


def args(root: Path, out_dir: Path, *extra: str) -> list[str]:
    return ["--tag", "_x", "--seed", "0", "--tau-from", "_x", "--pool-seeds", "0,1", "--samples", "512",
            "--root", str(root), "--out-dir", str(out_dir), "--out", str(out_dir / "out.json"), *extra]


def test_each_kept_step_is_scored_and_the_last_is_the_studys_own_supernet(root, tmp_path, monkeypatch):
    main(args(root, tmp_path, "--name", "a", "--keep", "3,6"))
    figures = json.loads((tmp_path / "out.json").read_text())
    assert {"a_seed0_step3_tau", "a_seed0_step6_tau", "a_seed0_step3_vs_step6_tau",
            "a_seed0_ensemble_tau", "a_seed0_machine", "a_seed0_commit"} <= set(figures)
    assert (tmp_path / "a_seed0" / "kept" / "step-000000006").is_dir()
    # the same recipe and seed train the study's own supernet again: the same tau at its last step
    own = borrowed_tau("_x", ["_x"], [0], 512, root, pool=True, pool_seeds=[0, 1])
    assert figures["a_seed0_step6_tau"] == pytest.approx(own["x_seed0_kendall_tau_on_x_pooled01"])
    assert figures["a_seed0_pairs"] == own["x_seed0_kendall_tau_on_x_pooled01_pairs"]

    # a rerun trains and scores nothing again
    from autorec.oneshot import train as train_module

    def no_step(*_args, **_kwargs):
        raise AssertionError("trained again")
    monkeypatch.setattr(train_module.SupernetTraining, "step", no_step)
    monkeypatch.setattr("benchmarks.oneshot_tau_steps.proxy_at", no_step)
    main(args(root, tmp_path, "--name", "a", "--keep", "3,6"))
    again = json.loads((tmp_path / "out.json").read_text())
    assert again["a_seed0_step6_tau"] == figures["a_seed0_step6_tau"]


def test_a_recipe_branches_from_another_recipes_kept_step(root, tmp_path, capsys):
    main(args(root, tmp_path, "--name", "a", "--keep", "3"))
    main(args(root, tmp_path, "--name", "b", "--start", "a:3", "--options", '{"dense_lr_decay": 3}',
              "--keep", "6"))
    meta = json.loads((tmp_path / "b_seed0" / "kept" / "step-000000006" / "autorec.json").read_text())
    assert meta["resumed_from"] == [3] and meta["config"]["dense_lr_decay"] == 3
    assert "b_seed0_step6_tau" in json.loads((tmp_path / "out.json").read_text())


@pytest.mark.parametrize("extra, message", [
    (["--options", '{"nope": 1}', "--keep", "6"], r"--options: 'nope' is not a supernet training option"),
    (["--options", '{"steps": 0}', "--keep", "6"], r"--options: steps: expected an integer >= 1, got 0"),
    (["--keep", "7"], r"--keep: step 7 is outside the training's 1..6"),
    (["--start", "a3", "--keep", "6"], r"--start: expected NAME:STEP \(as k47:2000\), got 'a3'"),
    (["--start", "gone:3", "--keep", "6"],
     r"--start: no kept checkpoint at .*gone_seed0/kept/step-000000003"),
])
def test_bad_input_is_named(root, tmp_path, extra, message):
    with pytest.raises(SystemExit, match=message):
        main(args(root, tmp_path, "--name", "c", *extra))


def test_a_study_that_does_not_exist_is_named(root, tmp_path):
    with pytest.raises(SystemExit, match=r"oneshot_y_seed0/study.yaml: no study"):
        main(["--tag", "_y", "--seed", "0", "--name", "a", "--keep", "6", "--root", str(root),
              "--out-dir", str(tmp_path), "--out", str(tmp_path / "o.json")])
