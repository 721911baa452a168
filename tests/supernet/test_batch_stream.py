"""The supernet's endless batch stream, resumed at a batch: the same batches a full pass gives."""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from typing import Any

import pytest

from autorec.data import load_dataset
from autorec.supernet.search import forever


class Streamed:
    """``dataset``'s batches as a plain iterable (not a TabularBatches): what a streamed source gives."""

    def __init__(self, dataset: Any) -> None:
        self.dataset, self.schema = dataset, dataset.schema

    def batches(self, split: str, batch_size: int, **kwargs: Any) -> Iterable[Any]:
        return list(self.dataset.batches(split, batch_size, **kwargs))


def _dense(stream: Iterable[Any], n: int) -> list[list[float]]:
    return [b.dense_features.flatten().tolist() for b in itertools.islice(stream, n)]


@pytest.mark.parametrize("streamed", [False, True])
def test_a_stream_from_a_start_goes_on_where_a_whole_one_is_there(streamed: bool) -> None:
    dataset = load_dataset("synthetic", preset="tiny", num_samples=600)  # 480 train rows: 8 batches of 64
    source = Streamed(dataset) if streamed else dataset
    whole = _dense(forever(source, "train", 64, seed=3), 30)  # three epochs and more
    for start in (0, 5, 7, 8, 13, 21):  # inside the first epoch, at its last batch, at the second's first
        assert _dense(forever(source, "train", 64, seed=3, start=start), 30 - start) == whole[start:], start
