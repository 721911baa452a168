"""The compiled row-wise Adagrad behind the CPU tables: its example, and torch's ops where it
cannot be built."""

from __future__ import annotations

import pytest
import torch

from autorec.native import build
from autorec.train import cpu_lookup
from tests.doctests import assert_examples_run
from tests.train.test_cpu_lookup import _batch, _tbe


def test_the_example_runs() -> None:
    assert_examples_run("autorec.train.native_update")


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
