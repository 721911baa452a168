"""The suite restores torch's thread count between tests (tests/conftest.py), in file order."""

import torch

from tests.conftest import THREADS


def test_a_test_may_pin_one_thread():
    torch.set_num_threads(1)
    assert torch.get_num_threads() == 1


def test_the_next_test_starts_with_the_sessions_thread_count():
    assert torch.get_num_threads() == THREADS
