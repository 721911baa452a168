"""benchmarks/wukong_maps.py and benchmarks/floor_share_runs.py: each path is the one asked for,
and the figures over runs are those runs'."""

from __future__ import annotations

import sys

import pytest

from autorec.blocks.wukong import WukongLayer
from autorec.data import load_dataset
from benchmarks import floor_share_runs
from benchmarks.wukong_maps import trainer


@pytest.mark.parametrize("per_module", [False, True])
def test_each_trainer_takes_the_path_asked_for_and_steps(per_module: bool) -> None:
    data = load_dataset("synthetic", preset="tiny", num_samples=600)
    run = trainer(data, batch_size=64, autocast="off", per_module=per_module)
    layers = [m for m in run.model.modules() if isinstance(m, WukongLayer)]
    assert layers and all(bool(layer._plain_maps()) != per_module for layer in layers)
    batch = next(iter(run._batches("train", 64, True, 0)))
    run.train_step(batch)


def test_summary_is_the_runs_median_least_and_greatest() -> None:
    runs = [{"step_ms": s, "floor_share": f} for s, f in ((50.0, 0.5), (40.0, 0.6), (80.0, 0.3))]
    got = floor_share_runs.summary("wukong_bf16", runs)
    assert got["wukong_bf16_floor_share_runs"] == 3
    assert (got["wukong_bf16_step_ms_runs_median"], got["wukong_bf16_step_ms_runs_min"],
            got["wukong_bf16_step_ms_runs_max"]) == (50.0, 40.0, 80.0)
    assert (got["wukong_bf16_floor_share_runs_median"], got["wukong_bf16_floor_share_runs_min"],
            got["wukong_bf16_floor_share_runs_max"]) == (0.5, 0.3, 0.6)


@pytest.mark.parametrize(("flags", "message"), [
    (["--runs", "0"], "--runs: expected at least 1, got 0"),
    (["--presets", "dlrm,nosuchpreset"], "--presets: no preset 'nosuchpreset'; expected names from dlrm"),
], ids=["no-runs", "unknown-preset"])
def test_bad_flags_are_refused_before_any_run_with_the_flag_named(
        flags: list[str], message: str, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(sys, "argv", ["floor_share_runs", *flags])
    with pytest.raises(SystemExit):
        floor_share_runs.main()
    assert message in capsys.readouterr().err


def test_a_failed_profile_names_its_command(tmp_path) -> None:
    with pytest.raises(SystemExit, match="step_profile --presets dlrm --autocast nosuch"):
        floor_share_runs.one_run("dlrm", "nosuch", tmp_path / "out.json")


def test_a_run_at_another_width_passes_it_on_and_reads_its_keys(tmp_path) -> None:
    """``dim`` reaches step_profile's command line (and its figures are read under
    ``<preset>_dim<D>[_<autocast>]``, :func:`benchmarks.step_profile.figure_key`)."""
    with pytest.raises(SystemExit, match="--dim 64"):
        floor_share_runs.one_run("dlrm", "nosuch", tmp_path / "out.json", dim=64)
    args, _ = floor_share_runs.runs_args(None, ["--dim", "64"])
    assert args.dim == 64 and floor_share_runs.runs_args(None, [])[0].dim is None


def test_an_earlier_commits_runs_carry_its_name() -> None:
    runs = [{"step_ms": 30.0, "floor_share": 0.5}]
    got = floor_share_runs.summary("dlrm_bf16", runs, "_at_abc1234")
    assert got["dlrm_bf16_floor_share_runs_at_abc1234"] == 1
    assert got["dlrm_bf16_floor_share_runs_median_at_abc1234"] == 0.5
    assert got["dlrm_bf16_step_ms_runs_max_at_abc1234"] == 30.0


def test_a_run_against_another_tree_runs_that_trees_code(tmp_path) -> None:
    """The process runs from ``tree`` with only that tree on its path: an empty folder has no
    ``benchmarks`` package, and the failure says so; a folder that is no checkout is refused."""
    with pytest.raises(SystemExit, match="No module named 'benchmarks'"):
        floor_share_runs.one_run("dlrm", "off", tmp_path / "out.json", tree=tmp_path)
    with pytest.raises(SystemExit, match=f"--against {tmp_path}: expected a checkout of autorec"):
        floor_share_runs.tree_commit(tmp_path)
