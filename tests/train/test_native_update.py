"""The compiled row-wise Adagrad behind the CPU tables: torch's ops' update at every width (in
vector registers or not), its example, and torch's ops where it cannot be built."""

from __future__ import annotations

import pytest
import torch
from fbgemm_gpu.split_table_batched_embeddings_ops_common import PoolingMode

from autorec.native import build
from autorec.train import cpu_lookup
from tests.doctests import assert_examples_run
from tests.train.test_cpu_lookup import _batch, _tbe


def test_the_example_runs() -> None:
    assert_examples_run("autorec.train.native_update")


@pytest.mark.parametrize("dim", [4, 16, 20, 32, 48, 64, 80])  # D / 16 chunks in registers, or loops
@pytest.mark.parametrize("pooling", [PoolingMode.SUM, PoolingMode.MEAN])
def test_the_update_is_torchs_at_every_width(dim: int, pooling: PoolingMode) -> None:
    """Three steps of multi-hot bags (repeats and empty bags included) on a table shared by two
    features and two of its own: weights and state as torch's ops leave them, to float rounding."""
    tables = {kernel: _tbe([(40, dim), (9, dim), (300, dim)], pooling, [0, 0, 1, 2])
              for kernel in cpu_lookup.KERNELS}
    for kernel, tbe in tables.items():
        assert cpu_lookup.switch(tbe, kernel)
    assert cpu_lookup.native_ready(tables["native"])
    gen = torch.Generator().manual_seed(dim)
    for _ in range(3):
        indices, offsets = _batch([40, 40, 9, 300], 70, gen, True)
        upstream = torch.randn(70, 4 * dim, generator=gen)
        for tbe in tables.values():
            (tbe(indices, offsets) * upstream).sum().backward()
    native, torchs = tables["native"], tables["torch"]
    torch.testing.assert_close(native.momentum1_host, torchs.momentum1_host, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(native.weights_host, torchs.weights_host, rtol=1e-5, atol=1e-6)


def test_without_the_kernel_training_keeps_torchs_ops(fresh_libraries: None,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    assert _trains_natively()
    build.library.cache_clear()
    build.load.cache_clear()
    monkeypatch.setenv("AUTOREC_NATIVE", "0")
    assert not _trains_natively()


def _trains_natively() -> bool:
    """Whether a switched TBE's step goes to the native kernel; it trains either way."""
    tbe = _tbe([(20, 4), (20, 4)])
    assert cpu_lookup.switch(tbe)
    before = tbe.weights_host.clone()
    indices, offsets = _batch([20, 20], 8, torch.Generator().manual_seed(0), False)
    tbe(indices, offsets).sum().backward()
    assert not torch.equal(tbe.weights_host, before)
    return cpu_lookup.native_ready(tbe)
