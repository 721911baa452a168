"""How long the training loop waits for its next batch: the data-stall share of a step.

:class:`Waited` wraps the batch iterator a training epoch draws from and adds up the seconds
each ``next()`` takes: building the batch (reading, hashing, the KJT), or waiting on a loader's
workers. Divided by the epoch's seconds it is the share of the step time lost to data
(``data_wait_share`` in a training's result, a trial's metrics and ``autorec train``'s line).
Under torchrec's train pipeline the pipeline draws batches ahead of the step; those draws are
timed the same way, since they run on the training thread too.

Example:
    >>> waited = Waited(iter(range(3)))
    >>> list(waited), waited.batches, waited.seconds >= 0.0
    ([0, 1, 2], 3, True)
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Generic, TypeVar

T = TypeVar("T")


class Waited(Generic[T]):
    """An iterator over ``source`` that keeps the seconds spent in its ``next()`` calls."""

    def __init__(self, source: Iterator[T], seconds: float = 0.0) -> None:
        self.source, self.seconds, self.batches = source, seconds, 0

    def __iter__(self) -> Waited[T]:
        return self

    def __next__(self) -> T:
        start = time.perf_counter()
        try:
            item = next(self.source)
        finally:
            self.seconds += time.perf_counter() - start
        self.batches += 1
        return item
