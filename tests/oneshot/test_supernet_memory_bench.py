"""benchmarks/supernet_memory.py: each arm's figures per phase, the runs' paired ratios, bad flags."""

from __future__ import annotations

import pytest

from benchmarks.supernet_memory import FIGURES, PHASES, figures_of, parse


def _run(step_ms: float, faults: float) -> dict[str, float]:
    values = {"step_ms": step_ms, "faults_per_step": faults, "sys_ms_per_step": 1.0}
    return {f"{phase}_{figure}": values[figure] for phase in PHASES for figure in FIGURES}


def test_figures_pair_the_runs_in_order_per_phase() -> None:
    runs = {"kept": [_run(40.0, 0.0), _run(50.0, 10.0)],
            "default": [{**_run(44.0, 1000.0), "fine_step_ms": 60.0}, _run(60.0, 1200.0)]}
    figures = figures_of(runs)
    assert figures["supernet_memory_runs"] == 2
    assert figures["supernet_memory_coarse_speedup_min"] == pytest.approx(1.1)
    assert figures["supernet_memory_coarse_speedup_max"] == pytest.approx(1.2)
    assert figures["supernet_memory_fine_speedup_max"] == pytest.approx(1.5)
    assert figures["supernet_memory_default_coarse_faults_per_step_median"] == pytest.approx(1100.0)
    assert figures["supernet_memory_kept_fine_step_ms_min"] == 40.0


@pytest.mark.parametrize("argv, message", [(["--runs", "0"], "--runs: expected an integer >= 1, got 0"),
                                           (["--steps", "-2"], "--steps: expected an integer >= 1, got -2")])
def test_bad_flags_name_the_flag(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse(argv)
    assert message in capsys.readouterr().err
