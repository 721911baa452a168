"""N workers x M trials on one storage (issue 24): ``autorec search --workers 4`` on a study of
4 x M trials in SQLite, a journal file and a real PostgreSQL server records exactly 4 x M trials,
numbered once each, no proposal twice, several processes running them, and ends (no
deadlock: the run's process would hang past its timeout)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from autorec.study.recovery import BudgetClaim
from benchmarks.faults_runs import workers_run
from tests.postgres import server_url

WORKERS = 4


@pytest.fixture
def postgres_url() -> str:
    return server_url()


def check(tmp_path, storage: str, trials: int) -> None:
    out = workers_run(tmp_path, storage, WORKERS, trials)
    assert out.records == out.complete == WORKERS * trials
    assert out.numbers_ok and out.duplicates == 0
    if trials >= 10:  # (with a few trials, the first workers may run them all before the last starts)
        assert out.processes >= 2


@pytest.mark.slow  # 19 s of four spawned processes; the default suite has test_study's two workers
def test_four_workers_share_a_journal_file(tmp_path):
    check(tmp_path, "journal", 2)


@pytest.mark.slow
@pytest.mark.parametrize("storage", ["sqlite", "journal"])
def test_four_workers_by_ten_trials(tmp_path, storage):
    check(tmp_path, storage, 10)


@pytest.mark.slow
def test_four_workers_by_ten_trials_on_postgresql(tmp_path, postgres_url):
    check(tmp_path, postgres_url, 10)


def test_the_budget_claim_shuts_out_another_process(tmp_path):
    """Regression: local workers counted the budget and started their trial without a lock, so
    two could both see one trial left and both start one (N x M + 1 records)."""
    path = tmp_path / "budget.lock"
    probe = [sys.executable, "-c", "import fcntl, sys; fcntl.flock(open(sys.argv[1], 'a'), "
             "fcntl.LOCK_EX | fcntl.LOCK_NB)", str(path)]
    claim = BudgetClaim(path)
    claim.acquire()
    assert subprocess.run(probe, capture_output=True).returncode != 0  # held: the other waits
    claim.release()
    assert subprocess.run(probe, capture_output=True).returncode == 0
