"""The hand-written kernels' build: cached, rebuilt on change, refused with the reason."""

from __future__ import annotations

import ctypes
import json
import logging
from pathlib import Path

import pytest

from autorec.native import build
from benchmarks import native_build
from tests.doctests import assert_examples_run

KERNELS = ("rowwise_adagrad", "pooled_lookup", "pair_dots", "layer_norm")


def test_the_example_runs() -> None:
    assert_examples_run("autorec.native.build")


@pytest.mark.parametrize("name", KERNELS)
def test_every_kernel_is_built_here(name: str) -> None:
    """CI and every supported machine have a C++ compiler: the kernels must be there."""
    assert build.library(name) is not None


def test_a_build_is_cached_and_rebuilt_when_the_source_changes(tmp_path: Path) -> None:
    source = build.HERE / "rowwise_adagrad.cpp"
    first = build.compile_kernel(source, root=tmp_path)
    stamp = first.stat().st_mtime_ns
    assert build.compile_kernel(source, root=tmp_path) == first
    assert first.stat().st_mtime_ns == stamp  # not rebuilt
    changed = tmp_path / "rowwise_adagrad.cpp"
    changed.write_text(source.read_text() + "\n// changed\n")
    (tmp_path / "simd.h").write_text((build.HERE / "simd.h").read_text())  # what it includes
    second = build.compile_kernel(changed, root=tmp_path)
    assert second != first and second.exists()
    assert sorted(p.suffix for p in second.parent.iterdir()) == [".so"]  # no scratch file left


def test_a_header_beside_the_source_is_part_of_the_key(tmp_path: Path) -> None:
    """The kernels include ``simd.h``: a change there must rebuild them, as a change of their own."""
    (tmp_path / "shared.h").write_text("inline int width() { return 16; }\n")
    source = tmp_path / "kernel.cpp"
    source.write_text('#include "shared.h"\nextern "C" long long autorec_width() { return width(); }\n')
    first = build.compile_kernel(source, root=tmp_path / "cache")
    (tmp_path / "shared.h").write_text("inline int width() { return 8; }\n")
    second = build.compile_kernel(source, root=tmp_path / "cache")
    assert second != first
    assert ctypes.CDLL(str(first)).autorec_width() == 16 and ctypes.CDLL(str(second)).autorec_width() == 8


def test_a_compiler_error_names_the_source_and_the_message(tmp_path: Path) -> None:
    broken = tmp_path / "broken.cpp"
    broken.write_text("int f( {\n")
    with pytest.raises(RuntimeError, match=r"failed on .*broken\.cpp \(1\): .*error"):
        build.compile_kernel(broken, root=tmp_path / "cache")
    assert not list((tmp_path / "cache").rglob("*.so"))  # nothing half-written kept


def test_without_a_compiler_every_kernel_is_none_with_the_reason(
        fresh_libraries: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
        caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setenv("CXX", "no-such-compiler")
    monkeypatch.setenv("AUTOREC_CACHE", str(tmp_path))  # nothing built there to fall back on
    with caplog.at_level(logging.WARNING, logger="autorec.native.build"):
        for name in KERNELS:
            assert build.library(name) is None
    assert caplog.text.count("not found on PATH (set CXX)") == len(KERNELS)
    assert "pair_dots stays in torch's operators: no C++ compiler: 'no-such-compiler'" in caplog.text


def test_autorec_native_0_turns_every_kernel_off(fresh_libraries: None,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AUTOREC_NATIVE", "0")
    assert all(build.library(name) is None for name in KERNELS)
    assert build.load("pair_dots", "autorec_pair_dots_forward", build.PAIR_DOTS_FORWARD_ARGS) is None


def test_the_cache_root_follows_autorec_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("AUTOREC_CACHE", str(tmp_path))
    assert build.cache_root() == tmp_path / "native"
    monkeypatch.delenv("AUTOREC_CACHE")
    assert build.cache_root() == Path.home() / ".cache" / "autorec" / "native"


def test_the_build_benchmark_times_a_cold_and_a_cached_build(tmp_path: Path) -> None:
    native_build.main(["--repeats", "1", "--json", str(tmp_path / "t.json")])
    got = json.loads((tmp_path / "t.json").read_text())
    for name in native_build.KERNELS:
        assert got[f"native_build_{name}_cold_s"] > got[f"native_build_{name}_cached_s"] > 0
    assert got["native_build_machine"] and "native_build_commit" in got
