"""benchmarks/dot_layout.py: its "before" arm trains the same model as the default, the same way."""

from __future__ import annotations

import torch

from autorec.blocks.dlrm import DotInteraction
from benchmarks.dot_layout import Before, plain_forward, plain_layout
from tests.ab_trainers import new_and_before


def test_the_plain_layout_is_used_only_inside_a_before_step_and_trains_the_same() -> None:
    new, before, batches = new_and_before(Before, "dlrm")
    with plain_layout():
        assert DotInteraction.forward is plain_forward
    assert DotInteraction.forward is not plain_forward
    for batch in batches:
        ours, theirs = new.train_step(batch), before.train_step(batch)
        assert abs(ours[0] - theirs[0]) < 1e-5 and ours[1] == theirs[1]
    assert DotInteraction.forward is not plain_forward
    for (name, a), (_, b) in zip(new.model.named_parameters(), before.model.named_parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5, msg=name)
