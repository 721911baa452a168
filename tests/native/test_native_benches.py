"""benchmarks/native_dots.py and benchmarks/native_layer_norm.py: each "before" arm takes torch's
path inside its steps only, the default arm the kernel, both train the same model to float
rounding, and the part alone is timed each way."""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType
from typing import Any

import pytest
import torch

from autorec.native import layer_norm as native_norm
from autorec.native import pair_dots as native_dots
from autorec.train.trainer import Trainer
from benchmarks import native_dots as dots_bench
from benchmarks import native_layer_norm as norm_bench
from benchmarks.dot_blocks import TorchDots
from tests.ab_trainers import new_and_before


@dataclass(frozen=True)
class Case:
    prefix: str  # the benchmark's keys
    kernel: ModuleType
    entry: str  # the kernel module's function that every kernel call goes through
    bench: ModuleType
    before: type
    preset: str
    calls_per_step: int  # at least
    atol: float
    new: type = Trainer  # the default arm

    def __str__(self) -> str:
        return self.prefix


CASES = (
    # a DLRM step reads the dots' input in parts (the dense vector, the pooled embeddings)
    Case("native_dots", native_dots, "forward_parts", dots_bench, TorchDots, "dlrm", 1, 1e-6),
    # Wukong normalises each layer's output over D and the FM's where it is <= 64 wide
    Case("native_layer_norm", native_norm, "layer_norm", norm_bench, norm_bench.TorchNorm, "wukong", 2, 1e-5,
         norm_bench.KernelNorm),
)


@pytest.mark.parametrize("case", CASES, ids=str)
def test_the_arms_take_their_paths_and_train_alike(case: Case, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[bool] = []
    kept = getattr(case.kernel, case.entry)

    def spy(*args: Any, **kwargs: Any) -> torch.Tensor:
        calls.append(True)
        return kept(*args, **kwargs)

    monkeypatch.setattr(case.kernel, case.entry, spy)
    new, before, batches = new_and_before(case.before, case.preset, new=case.new)
    for batch in batches:
        assert new.train_step(batch)[0] == pytest.approx(before.train_step(batch)[0], rel=1e-5)
    # the default arm's steps only, the same number of calls in each
    assert len(calls) >= case.calls_per_step * len(batches) and len(calls) % len(batches) == 0
    assert case.kernel.SWITCH.on  # on again after the before arm's steps
    for (name, a), (_, b) in zip(new.model.named_parameters(), before.model.named_parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=case.atol, msg=name)


@pytest.mark.parametrize("case", CASES, ids=str)
def test_the_part_alone_is_timed_each_way(case: Case) -> None:
    got = case.bench.alone(1, "off")
    assert set(got) == {f"{case.prefix}_alone_{way}_{part}_ms" for way in ("native", "torch")
                        for part in ("fwd", "bwd")} | {f"{case.prefix}_alone_speedup"}
    assert all(value > 0 for value in got.values())


def test_dots_across_samples_times_this_kernel_against_a_commits(tmp_path: Any, monkeypatch: Any) -> None:
    """``benchmarks/dots_across_samples``: a commit's ``pair_dots.cpp`` is built apart from this
    tree's and both are timed on the same batch (the run itself checks they agree); HEAD's
    kernel stands in for the earlier one, so the test needs no particular history."""
    from benchmarks import dots_across_samples as bench

    monkeypatch.setattr(bench, "SHAPES", (37, 27, 16))
    earlier = bench.earlier_library("HEAD", tmp_path)
    assert earlier.parent.parent == tmp_path / "built"
    ways = {"new": bench.kernels(bench.build.compile_kernel(bench.build.HERE / "pair_dots.cpp")),
            "before": bench.kernels(earlier)}
    times = bench.timed(ways, repeats=2)
    assert {way: {k: len(v) for k, v in pieces.items()} for way, pieces in times.items()} == {
        "new": {"fwd": 2, "bwd": 2}, "before": {"fwd": 2, "bwd": 2}}
    assert all(t > 0 for pieces in times.values() for seconds in pieces.values() for t in seconds)
    refused = r"--against 'not-a-commit': git has no autorec/native/pair_dots\.cpp"
    with pytest.raises(ValueError, match=refused):
        bench.earlier_library("not-a-commit", tmp_path / "other")


def _calls_of_bit_for_bit_arms(module: ModuleType, entry: str, before: type, preset: str,
                               monkeypatch: Any) -> tuple[int, int]:
    """(calls of ``module.entry``, steps) over a bit-for-bit A/B benchmark's two arms stepping on
    the same batches: the same losses and weights, asserted here."""
    calls: list[bool] = []
    real = getattr(module, entry)
    monkeypatch.setattr(module, entry, lambda *a, **k: calls.append(True) or real(*a, **k))
    new, other, batches = new_and_before(before, preset)
    for batch in batches:
        assert new.train_step(batch)[0] == other.train_step(batch)[0]
    for (name, a), (_, b) in zip(new.model.named_parameters(), other.model.named_parameters(), strict=True):
        assert torch.equal(a, b), name
    return len(calls), len(batches)


def test_dots_parts_before_arm_concatenates_and_trains_alike(monkeypatch: Any) -> None:
    """``benchmarks/dots_parts``: the default arm reads the dots' input in parts (once a step),
    the hooked one concatenates it; the same losses and weights bit for bit."""
    from benchmarks import dots_parts

    calls, steps = _calls_of_bit_for_bit_arms(native_dots, "forward_parts", dots_parts.Concatenated, "dlrm",
                                              monkeypatch)
    assert calls == steps


def test_wukong_stack_before_arm_runs_the_layers_one_by_one_and_trains_alike(monkeypatch: Any) -> None:
    """``benchmarks/wukong_stack``: the default arm runs the preset's two layers with the first's
    tail and the second's head in one pass (once a step), the other one by one; the same losses
    and weights bit for bit."""
    from autorec.native import wukong_layer as native_wukong
    from benchmarks import wukong_stack

    calls, steps = _calls_of_bit_for_bit_arms(native_wukong, "mid", wukong_stack.OneByOne, "wukong",
                                              monkeypatch)
    assert calls == steps and native_wukong.STACK.on
