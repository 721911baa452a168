import gc
import itertools
import threading
import time

import pytest

from autorec.train.prefetch import Prefetched, prefetched


def _alive() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "autorec-prefetch"]


def test_items_arrive_in_the_source_order():
    with Prefetched(iter(range(100)), depth=3) as items:
        assert list(items) == list(range(100))
        assert next(items, "end") == "end"  # exhausted stays exhausted


def test_it_draws_at_most_depth_ahead():
    drawn = []

    def source():
        for i in range(10):
            drawn.append(i)
            yield i

    with Prefetched(source(), depth=2) as items:
        assert next(items) == 0
        time.sleep(0.3)
        # 0 taken, 2 waiting in the queue, and at most one more drawn and blocked on the full queue
        assert 3 <= len(drawn) <= 4


def test_an_error_of_the_source_is_raised_where_it_happened():
    def source():
        yield 1
        yield 2
        raise OSError("disk went away at row 3")

    items = Prefetched(source(), depth=2)
    assert next(items) == 1 and next(items) == 2
    with pytest.raises(OSError, match="row 3"):
        next(items)
    with pytest.raises(StopIteration):
        next(items)
    items.close()


def test_close_stops_a_thread_blocked_on_a_full_queue():
    items = Prefetched(itertools.count(), depth=1)
    assert next(items) == 0
    items.close()
    assert not _alive()
    with pytest.raises(StopIteration):
        next(items)


def test_an_abandoned_iterator_is_collected_and_its_thread_stops():
    items = Prefetched(itertools.count(), depth=1)
    assert next(items) == 0
    del items  # never closed: garbage collection must stop the thread
    gc.collect()
    deadline = time.monotonic() + 5
    while _alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive()


def test_the_context_stops_the_thread_when_the_block_fails():
    with pytest.raises(RuntimeError, match="step failed"), prefetched(iter(range(1000)), depth=2) as items:
        next(items)
        raise RuntimeError("step failed")
    assert not _alive()


def test_depth_zero_is_the_source_and_a_negative_depth_is_refused():
    source = iter(range(3))
    with prefetched(source, depth=0) as items:
        assert items is source
    with pytest.raises(ValueError, match="prefetch depth: expected >= 1, got 0"):
        Prefetched(iter(()), depth=0)
