"""benchmarks/dot_blocks.py: its "before" arm runs the dots over the whole batch inside its steps
only, and trains the same model as the default bit for bit."""

from __future__ import annotations

from typing import Any

import torch

from autorec.blocks import gram
from benchmarks.dot_blocks import WHOLE, Before, TorchDots
from tests.ab_trainers import new_and_before


def test_the_whole_batch_block_is_used_only_inside_a_before_step_and_trains_the_same(monkeypatch) -> None:
    monkeypatch.setattr(gram, "BLOCK", 16)  # the tiny workload's batches span several blocks
    seen: list[int] = []
    kept = gram._PairDots.forward

    def spy(ctx: Any, *args: Any) -> torch.Tensor:
        seen.append(gram.BLOCK)
        return kept(ctx, *args)

    monkeypatch.setattr(gram._PairDots, "forward", staticmethod(spy))
    new, before, batches = new_and_before(Before, "dlrm", new=TorchDots)
    for batch in batches:
        assert new.train_step(batch) == before.train_step(batch)
    assert set(seen) == {16, WHOLE} and gram.BLOCK == 16
    for (name, a), (_, b) in zip(new.model.named_parameters(), before.model.named_parameters(), strict=True):
        assert torch.equal(a, b), name
