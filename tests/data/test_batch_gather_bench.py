"""benchmarks/batch_gather.py: its two ways of building a batch give the same KJT."""

from __future__ import annotations

import torch

from benchmarks.batch_gather import by_columns, sample_major
from tests.data.test_tabular import table


def test_column_by_column_and_sample_major_agree() -> None:
    data = table(16)
    idx = torch.tensor([3, 15, 0, 3, 8])
    old, new = by_columns(data, idx), sample_major(data, idx)
    assert old.keys() == new.keys()
    assert torch.equal(old.values(), new.values()) and torch.equal(old.lengths(), new.lengths())
