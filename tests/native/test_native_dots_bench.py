"""benchmarks/native_dots.py: its "before" arm takes torch's path inside its steps only, the
default arm the kernel, and both train the same model to float rounding."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from autorec.native import pair_dots as native
from benchmarks.dot_blocks import TorchDots
from benchmarks.native_dots import alone
from tests.ab_trainers import new_and_before


def test_the_arms_take_their_paths_and_train_alike(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[bool] = []
    kept = native.forward

    def spy(*args: Any, **kwargs: Any) -> torch.Tensor:
        calls.append(True)
        return kept(*args, **kwargs)

    monkeypatch.setattr(native, "forward", spy)
    new, before, batches = new_and_before(TorchDots, "dlrm")
    for batch in batches:
        assert new.train_step(batch)[0] == pytest.approx(before.train_step(batch)[0], rel=1e-5)
    assert len(calls) == len(batches)  # the default arm's steps only
    assert native.eligible(torch.randn(2, 3, 4))  # on again after the before arm's steps
    for (name, a), (_, b) in zip(new.model.named_parameters(), before.model.named_parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6, msg=name)


def test_the_dots_alone_are_timed_each_way() -> None:
    got = alone(1, "off")
    assert set(got) == {f"native_dots_alone_{way}_{part}_ms" for way in ("native", "torch")
                        for part in ("fwd", "bwd")} | {"native_dots_alone_speedup"}
    assert all(value > 0 for value in got.values())
