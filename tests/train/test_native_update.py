"""The compiled row-wise Adagrad's build: cached, rebuilt on change, refused with the reason."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from autorec.train import cpu_lookup, native_update
from tests.doctests import assert_examples_run
from tests.train.test_cpu_lookup import _batch, _tbe


@pytest.fixture
def fresh_library() -> Iterator[None]:
    """:func:`native_update.library` looked up anew inside the test and after it."""
    native_update.library.cache_clear()
    yield
    native_update.library.cache_clear()


def test_the_example_runs() -> None:
    assert_examples_run("autorec.train.native_update")


def test_a_build_is_cached_and_rebuilt_when_the_source_changes(tmp_path: Path) -> None:
    first = native_update.compile_kernel(root=tmp_path)
    stamp = first.stat().st_mtime_ns
    assert native_update.compile_kernel(root=tmp_path) == first
    assert first.stat().st_mtime_ns == stamp  # not rebuilt
    changed = tmp_path / "rowwise_adagrad.cpp"
    changed.write_text(native_update.SOURCE.read_text() + "\n// changed\n")
    second = native_update.compile_kernel(changed, root=tmp_path)
    assert second != first and second.exists()
    assert sorted(p.suffix for p in second.parent.iterdir()) == [".so"]  # no scratch file left


def test_a_compiler_error_names_the_source_and_the_message(tmp_path: Path) -> None:
    broken = tmp_path / "broken.cpp"
    broken.write_text("int f( {\n")
    with pytest.raises(RuntimeError, match=r"failed on .*broken\.cpp \(1\): .*error"):
        native_update.compile_kernel(broken, root=tmp_path / "cache")
    assert not list((tmp_path / "cache").rglob("*.so"))  # nothing half-written kept


def test_without_a_compiler_training_keeps_torchs_ops(
        fresh_library: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
        caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setenv("CXX", "no-such-compiler")
    monkeypatch.setenv("AUTOREC_CACHE", str(tmp_path))  # nothing built there to fall back on
    with caplog.at_level(logging.WARNING, logger="autorec.train.native_update"):
        assert native_update.library() is None
    assert "no C++ compiler: 'no-such-compiler' not found on PATH (set CXX)" in caplog.text
    assert not _trains_natively()


def test_autorec_native_0_keeps_torchs_ops(fresh_library: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AUTOREC_NATIVE", "0")
    assert native_update.library() is None
    assert not _trains_natively()


def test_the_cache_root_follows_autorec_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("AUTOREC_CACHE", str(tmp_path))
    assert native_update.cache_root() == tmp_path / "native"
    monkeypatch.delenv("AUTOREC_CACHE")
    assert native_update.cache_root() == Path.home() / ".cache" / "autorec" / "native"


def _trains_natively() -> bool:
    """Whether a switched TBE's step goes to the native kernel; it trains either way."""
    tbe = _tbe([(20, 4), (20, 4)])
    assert cpu_lookup.switch(tbe)
    before = tbe.weights_host.clone()
    indices, offsets = _batch([20, 20], 8, torch.Generator().manual_seed(0), False)
    tbe(indices, offsets).sum().backward()
    assert not torch.equal(tbe.weights_host, before)
    return cpu_lookup.native_ready(tbe)
