"""The compiled pooled lookup: fbgemm's forward bit for bit, where it runs, and bad indices."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from fbgemm_gpu.split_table_batched_embeddings_ops_common import PoolingMode

from autorec.train import cpu_lookup, native_lookup
from tests.doctests import assert_examples_run
from tests.train.test_cpu_lookup import _batch, _tbe


def _fbgemm(tbe: cpu_lookup.TBE, indices: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    with native_lookup.disabled(), torch.no_grad():
        return cpu_lookup.lookup(tbe, indices, offsets)


def test_the_example_runs() -> None:
    assert_examples_run("autorec.train.native_lookup")


def test_the_kernel_is_built_here() -> None:
    assert native_lookup.library() is not None and native_lookup.enabled()


@pytest.mark.parametrize("dim", [4, 16, 20, 32, 64, 80])  # in registers (16-64 by 16) or a loop
@pytest.mark.parametrize("pooling", [PoolingMode.SUM, PoolingMode.MEAN])
@pytest.mark.parametrize("multi_hot", [False, True])
def test_the_values_are_fbgemms_bit_for_bit(dim: int, pooling: PoolingMode, multi_hot: bool) -> None:
    """Three tables, one shared by two features; 131 samples (two blocks of 64 and a short one);
    multi-hot bags hold 0-3 rows, repeats included."""
    tbe = _tbe([(50, dim), (7, dim), (300, dim)], pooling, [0, 1, 2, 2])
    indices, offsets = _batch([50, 7, 300, 300], 131, torch.Generator().manual_seed(dim), multi_hot)
    got = native_lookup.pooled_lookup(tbe, indices, offsets)
    assert got.shape == (131, 4 * dim)
    assert torch.equal(got, _fbgemm(tbe, indices, offsets))


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_any_thread_count_gives_the_same_bits(threads: int) -> None:
    tbe = _tbe([(1000, 16)] * 5)
    indices, offsets = _batch([1000] * 5, 257, torch.Generator().manual_seed(3), True)
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        got = native_lookup.pooled_lookup(tbe, indices, offsets)
    finally:
        torch.set_num_threads(before)
    assert torch.equal(got, _fbgemm(tbe, indices, offsets))


def test_training_and_evaluation_take_it_unless_disabled_or_on_torchs_kernel(
        monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    kept = native_lookup.pooled_lookup

    def spy(*args: Any) -> torch.Tensor:
        calls.append(1)
        return kept(*args)

    monkeypatch.setattr(native_lookup, "pooled_lookup", spy)
    tbe = _tbe([(50, 8), (7, 8)])
    assert cpu_lookup.switch(tbe)
    indices, offsets = _batch([50, 7], 9, torch.Generator().manual_seed(0), True)
    tbe(indices, offsets).sum().backward()  # training
    with torch.no_grad():
        tbe(indices, offsets)  # evaluation
    assert calls == [1, 1]
    with native_lookup.disabled():
        tbe(indices, offsets).sum().backward()
    assert cpu_lookup.switch(tbe, "torch")
    tbe(indices, offsets).sum().backward()
    mixed = _tbe([(50, 8), (7, 4)])  # mixed widths: fbgemm's forward
    assert cpu_lookup.switch(mixed)
    mixed(*_batch([50, 7], 9, torch.Generator().manual_seed(0), True)).sum().backward()
    assert calls == [1, 1] and native_lookup.SWITCH.on


@pytest.mark.parametrize(("index", "position", "feature"), [(-1, 0, 0), (7, 3, 1), (10**9, 2, 1)])
def test_an_index_outside_its_table_is_refused_by_feature_and_position(index: int, position: int,
                                                                      feature: int) -> None:
    """Two samples, features 0 (50 rows) and 1 (7 rows), one row a bag: positions 0-1 are
    feature 0's bags, 2-3 feature 1's."""
    tbe = _tbe([(50, 8), (7, 8)])
    indices = torch.tensor([1, 2, 3, 4])
    indices[position] = index
    rows = (50, 7)[feature]
    with pytest.raises(RuntimeError, match=(f"feature {feature}: the index at position {position} is out of "
                                            f"bounds: {index}, its table's rows are 0 to {rows}")):
        native_lookup.pooled_lookup(tbe, indices, torch.arange(5))


def test_the_benchmark_arms_take_their_forwards_and_train_alike(monkeypatch: pytest.MonkeyPatch) -> None:
    """benchmarks/native_lookup.py: the "before" arm takes fbgemm's forward inside its steps
    only; both train the same model (the same lookups bit for bit, the same update)."""
    from benchmarks.native_lookup import FbgemmLookup
    from tests.ab_trainers import new_and_before
    calls: list[int] = []
    kept = native_lookup.pooled_lookup
    monkeypatch.setattr(native_lookup, "pooled_lookup", lambda *a: calls.append(1) or kept(*a))
    new, before, batches = new_and_before(FbgemmLookup, "dlrm")
    for batch in batches:
        assert new.train_step(batch)[0] == before.train_step(batch)[0]
    assert len(calls) == len(batches) and native_lookup.SWITCH.on  # the default arm's steps only
    for (name, a), (_, b) in zip(new.model.named_parameters(), before.model.named_parameters(), strict=True):
        assert torch.equal(a, b), name


def test_the_benchmark_times_the_lookup_alone_each_way() -> None:
    from benchmarks.native_lookup import alone
    got = alone(1, "off", batch=64, samples=640, flush_mb=1)
    assert set(got) == {f"native_lookup_alone_{key}_ms" for key in (
        "native", "fbgemm", "cold_native", "cold_fbgemm", "cold_update")} | {
        "native_lookup_alone_speedup", "native_lookup_alone_cold_speedup"}
    assert all(value > 0 for value in got.values())
