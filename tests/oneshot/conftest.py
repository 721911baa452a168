"""Fixtures shared by the one-shot tests."""

from pathlib import Path

import pytest

from tests.studyfiles import run_micro_oneshot


@pytest.fixture(scope="session")
def micro_runs(tmp_path_factory) -> Path:
    """Two micro one-shot studies, ``oneshot_m_seed0`` and ``_seed1`` (2 tau draws each), laid
    out as the benchmark lays its runs: for the tests that read finished studies and never
    write into them."""
    return run_micro_oneshot(tmp_path_factory.mktemp("micro_runs"), "_m", (0, 1), calibrate=2)
