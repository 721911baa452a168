"""Suite-wide fixtures: every test starts with torch's thread count the session started with;
``fresh_libraries`` (on request) looks the native kernels up anew.

Some tests pin torch to one thread (timings, multi-process workers); without this, every test
after them in the same session ran single-threaded too, and a seed-fixed search whose float
summation order depends on the thread count answered differently in the full suite than alone.
"""

from collections.abc import Iterator

import pytest
import torch

THREADS = torch.get_num_threads()


@pytest.fixture(autouse=True)
def _torch_threads_restored() -> Iterator[None]:
    torch.set_num_threads(THREADS)
    yield
    torch.set_num_threads(THREADS)


@pytest.fixture
def fresh_libraries() -> Iterator[None]:
    """The native kernels (:mod:`autorec.native.build`) looked up anew inside the test and after it."""
    from autorec.native import build
    build.library.cache_clear()
    build.load.cache_clear()
    yield
    build.library.cache_clear()
    build.load.cache_clear()
