"""`autorec search`'s summary table: each architecture once, the full trainings, and a line on
the proposals that reused an earlier training."""

from __future__ import annotations

from autorec.cli.search import _print_summary
from autorec.study.results import StudySummary


def row(number: int, val: float, test: float | None, reused: int | None = None) -> dict:
    return {"number": number, "state": "COMPLETE", "val_auc": val, "test_auc": test, "test_logloss": None,
            "values": [val], "costs": {"flops": 2e6}, "fail_reason": None, "seconds": 3.0,
            "reused_from": reused}


def test_reused_trials_are_one_line_and_full_trainings_are_rows(capsys):
    trials = [row(0, 0.70, 0.71), row(1, 0.75, 0.74), row(2, 0.75, 0.74, reused=1), row(3, 0.72, None)]
    final = {"1": {"val": {"auc": 0.78, "logloss": 0.49}, "test": {"auc": 0.77, "logloss": 0.5},
                   "epochs": 4, "seconds": 9.0}}
    summary = StudySummary("s", ("val_auc",), trials, [1], {}, final, "val_logloss")
    _print_summary(summary)
    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if "0.7500" in line]
    assert len(lines) == 1  # trial 2 repeats trial 1: not listed again
    assert "1, in full" in out and "0.7700" in out
    assert "1 proposals repeated an architecture already trained" in out
    assert "trial 1 retrained in full" in out  # the verdict answers with the full training
