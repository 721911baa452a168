"""benchmarks/native_layer_norm.py: its "before" arm takes torch's LayerNorm inside its steps
only, the default arm the kernel, and both train the same model to float rounding."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from autorec.native import layer_norm as native
from benchmarks.native_layer_norm import TorchNorm, alone
from tests.ab_trainers import new_and_before


def test_the_arms_take_their_paths_and_train_alike(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[bool] = []
    kept = native.layer_norm

    def spy(*args: Any) -> torch.Tensor:
        calls.append(True)
        return kept(*args)

    monkeypatch.setattr(native, "layer_norm", spy)
    new, before, batches = new_and_before(TorchNorm, "wukong")
    for batch in batches:
        assert new.train_step(batch)[0] == pytest.approx(before.train_step(batch)[0], rel=1e-5)
    # the default arm's steps only: each layer's norm over D, and the FM's where it is <= 64 wide
    assert len(calls) >= 2 * len(batches) and len(calls) % len(batches) == 0
    assert native.eligible(torch.randn(2, 4), torch.ones(4), torch.zeros(4), (4,))  # on again
    for (name, a), (_, b) in zip(new.model.named_parameters(), before.model.named_parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5, msg=name)


def test_the_norm_alone_is_timed_each_way() -> None:
    got = alone(1, "off")
    assert set(got) == {f"native_layer_norm_alone_{way}_{part}_ms" for way in ("native", "torch")
                        for part in ("fwd", "bwd")} | {"native_layer_norm_alone_speedup"}
    assert all(value > 0 for value in got.values())
