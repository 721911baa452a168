"""benchmarks/malloc_keep.py: each arm's figures and the rounds' paired ratios."""

from __future__ import annotations

import pytest

from benchmarks.malloc_keep import ARMS, figures_of


def test_the_arms_differ_only_by_the_flag() -> None:
    assert ARMS == {"kept": (), "default": ("--no-keep-freed-memory",)}


def test_figures_pair_the_runs_by_round() -> None:
    kernel = {"faults_per_step": 100.0, "sys_ms_per_step": 2.0}
    slow = {"faults_per_step": 3000.0, "sys_ms_per_step": 9.0}
    runs = {"kept": [{"step_ms": 40.0, "floor_share": 0.6, **kernel},
                     {"step_ms": 50.0, "floor_share": 0.5, **kernel}],
            "default": [{"step_ms": 60.0, "floor_share": 0.4, **kernel},
                        {"step_ms": 55.0, "floor_share": 0.45, **slow}]}
    figures = figures_of("k", runs)
    assert figures["k_default_faults_per_step_max"] == 3000.0
    assert figures["k_kept_sys_ms_per_step_median"] == 2.0
    assert figures["k_kept_step_ms_median"] == pytest.approx(45.0)
    assert figures["k_default_floor_share_max"] == pytest.approx(0.45)
    assert figures["k_speedup_min"] == pytest.approx(1.1) and figures["k_speedup_max"] == pytest.approx(1.5)
    assert figures["k_speedup"] == pytest.approx(1.3) and figures["k_runs"] == 2


def test_bad_flags_name_the_flag(capsys: pytest.CaptureFixture[str]) -> None:
    from benchmarks.floor_share_runs import runs_args

    for argv, message in ((["--runs", "0"], "--runs: expected at least 1, got 0"),
                          (["--presets", "dlrm,nope"], "--presets: no preset 'nope'")):
        with pytest.raises(SystemExit):
            runs_args(None, argv)
        assert message in capsys.readouterr().err
    args, presets = runs_args(None, ["--presets", "wukong", "--autocast", "bf16"])
    assert presets == ["wukong"] and args.autocast == "bf16" and args.runs == 5
