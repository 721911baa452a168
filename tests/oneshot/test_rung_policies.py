"""benchmarks/rung_policies.py (issue 20): a smaller rung policy read from a recorded rung picks
what the rung itself would have picked, and a report without TPE's figures is refused by name."""

import subprocess
import sys

import pytest

from benchmarks.rung_policies import policy

VAL = {(7, 0): 0.60, (3, 0): 0.62, (3, 1): 0.65, (3, 2): 0.61}


@pytest.mark.parametrize(("k", "m", "winner", "runs"), [
    (1, 1, (7, 0), [(7, 0)]),
    (2, 1, (3, 0), [(7, 0), (3, 0)]),
    (2, 2, (3, 1), [(7, 0), (3, 0), (3, 1)]),
    (2, 3, (3, 1), [(7, 0), (3, 0), (3, 1), (3, 2)]),  # a later restart below the best is run, not kept
])
def test_a_policy_runs_its_finalists_then_the_leaders_restarts_and_keeps_the_best(k, m, winner, runs):
    assert policy([7, 3], 0, VAL, k, m) == (winner, runs)


def test_a_policy_needing_a_training_the_run_did_not_record_is_none():
    assert policy([7, 3], 0, VAL, 1, 2) is None  # 7 led alone, and was never restarted
    assert policy([7, 3], 0, VAL, 2, 4) is None  # a fourth seed of 3 was never trained
    assert policy([7, 3], 5, VAL, 1, 1) is None  # another base seed: nothing recorded


def test_a_report_without_tpes_figures_is_refused_by_name(tmp_path):
    report = tmp_path / "r.json"
    report.write_text('{"tpe_wall_s": 1}')
    done = subprocess.run([sys.executable, "-m", "benchmarks.rung_policies", "--tag", "_x", "--out",
                           str(tmp_path), "--report", str(report)], capture_output=True, text=True)
    assert done.returncode != 0
    assert f"--report {report}: expected an oneshot_vs_tpe report with tpe_best_test_auc" in done.stderr
