"""Issue 24, "bad input": every class of bad input ends in one clear line and a non-zero exit,
and leaves what was already written (a resumable checkpoint, an earlier result, a study's
storage) byte-identical.

The cases live in benchmarks/faults_input.py. The default suite runs each through
``autorec.cli.main`` in this process (the same code path, without a torch import per case) and
one as a real ``autorec`` process; the slow test runs them all as real processes.
"""

import pytest

from benchmarks.faults_input import CASES, changed, earlier_results, judge, measure, run_case, snapshot

NAMES = [case.name for case in CASES]


@pytest.fixture(scope="module")
def earlier(tmp_path_factory):
    """The earlier results every case starts from (a real short training and a study storage)."""
    return earlier_results(tmp_path_factory.mktemp("earlier") / "results")


def test_there_are_at_least_twelve_distinct_classes():
    assert len(set(NAMES)) == len(NAMES) >= 12


@pytest.mark.parametrize("name", NAMES)
def test_bad_input_ends_in_one_clear_line_and_touches_nothing(earlier, tmp_path, name):
    (case,) = [c for c in CASES if c.name == name]
    verdict = run_case(case, earlier, tmp_path / "work", in_process=True)
    assert verdict.code == 2, verdict.stderr
    assert not verdict.touched, f"changed {verdict.touched}"
    assert verdict.clear, f"{verdict.stderr!r} lacks one of {case.expect}"


def test_a_corrupt_checkpoint_in_a_real_process(earlier, tmp_path):
    (case,) = [c for c in CASES if c.name == "corrupt checkpoint"]
    verdict = run_case(case, earlier, tmp_path / "work")
    assert verdict.clear, verdict
    assert "Traceback" not in verdict.stderr and "CheckpointException" not in verdict.stderr


def test_the_judge_refuses_a_traceback_a_second_line_or_a_touched_file(tmp_path):
    one = "autorec: error: a.tsv:3: expected 40 fields\n"
    assert judge(2, one, ("a.tsv:3:",), [])
    assert not judge(0, one, ("a.tsv:3:",), [])
    assert not judge(2, one + "more\n", ("a.tsv:3:",), [])
    assert not judge(2, one, ("b.tsv",), [])
    assert not judge(2, one, ("a.tsv:3:",), ["ck/LATEST"])
    (tmp_path / "f").write_text("x")
    before = snapshot(tmp_path)
    (tmp_path / "f").write_text("y")
    (tmp_path / "new").mkdir()
    assert changed(before, snapshot(tmp_path)) == ["f", "new"]


@pytest.mark.slow
def test_every_class_in_a_real_process():
    figures = measure()
    assert figures["bad_input_clear"] == figures["bad_input_classes"] >= 12, figures
