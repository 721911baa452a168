"""Batches built ahead of the step on a background thread.

:class:`Prefetched` draws from a batch iterator on one daemon thread and hands the batches over
through a bounded queue, in order, so the next batches (the in-memory gather, the hashing, the
KeyedJaggedTensor) are built while the current step computes. A thread rather than DataLoader
worker processes: the batch is built by torch operators that release the GIL, and a thread hands
the KeyedJaggedTensor over without pickling it through a pipe. The order of the batches is the
source's, so a training with and without prefetching sees the same batches.

An exception raised by the source is raised again by ``next()`` at that point of the sequence;
:meth:`Prefetched.close` (or leaving a ``with`` block, or garbage collection) stops the thread
and drops what it had built ahead.

Example:
    >>> with Prefetched(iter(range(5)), depth=2) as batches:
    ...     list(batches)
    [0, 1, 2, 3, 4]
    >>> with prefetched(iter("ab"), depth=0) as batches:  # depth 0: the source itself
    ...     list(batches)
    ['a', 'b']
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Generic, TypeVar

T = TypeVar("T")
_DONE = object()  # the source is exhausted


class _Failed:
    def __init__(self, error: BaseException) -> None:
        self.error = error


def _put(into: queue.Queue[Any], stop: threading.Event, item: Any) -> bool:
    """Put ``item`` unless stopped meanwhile; whether it was put."""
    while not stop.is_set():
        try:
            into.put(item, timeout=0.1)
            return True
        except queue.Full:
            continue
    return False


def _fill(source: Iterator[Any], into: queue.Queue[Any], stop: threading.Event) -> None:
    """The thread: ``source``'s items into ``into``, then the end or the error, until ``stop``."""
    try:
        for item in source:
            if not _put(into, stop, item):
                return
    except BaseException as error:  # handed to the consumer, raised there
        _put(into, stop, _Failed(error))
        return
    _put(into, stop, _DONE)


class Prefetched(Generic[T]):
    """An iterator over ``source`` whose items are drawn up to ``depth`` ahead on a thread."""

    def __init__(self, source: Iterator[T], depth: int = 2) -> None:
        if depth < 1:
            raise ValueError(f"prefetch depth: expected >= 1, got {depth}")
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=depth)
        self._stop = threading.Event()
        self._finished = False
        # The thread holds the queue and the event, not this object, so an abandoned iterator is
        # collected and its __del__ stops the thread.
        self._thread = threading.Thread(target=_fill, args=(source, self._queue, self._stop),
                                        name="autorec-prefetch", daemon=True)
        self._thread.start()

    def __iter__(self) -> Prefetched[T]:
        return self

    def __next__(self) -> T:
        if self._finished:
            raise StopIteration
        item = self._queue.get()
        if item is _DONE:
            self._finished = True
            raise StopIteration
        if isinstance(item, _Failed):
            self._finished = True
            raise item.error
        return item

    def close(self) -> None:
        """Stop the thread and drop the batches built ahead."""
        self._finished = True
        self._stop.set()
        while True:  # unblock a put() waiting on a full queue
            try:
                self._queue.get_nowait()
            except queue.Empty:
                break
        self._thread.join(timeout=5)

    def __enter__(self) -> Prefetched[T]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        if not self._finished:
            self._stop.set()


@contextmanager
def prefetched(source: Iterator[T], depth: int) -> Iterator[Iterator[T]]:
    """``source`` drawn ``depth`` ahead on a thread (``depth`` 0: ``source`` itself), the
    thread stopped when the block ends, however it ends."""
    if depth == 0:
        yield source
        return
    with Prefetched(source, depth) as ahead:
        yield ahead
