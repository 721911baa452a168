"""Compile and load the hand-written CPU kernels beside this file (``<name>.cpp``).

Each kernel is plain C++ with a C ABI (no torch headers: it compiles in 0.4-3 s and is found in
the cache in 2 ms, ``python -m benchmarks.native_build``) and is called through ctypes, which
releases the GIL. It is compiled on first use with the system's C++ compiler (``$CXX``, else
``c++``) into ``~/.cache/autorec/native/<hash>/`` (``$AUTOREC_CACHE`` moves the root), keyed by
the source, the headers beside it (``simd.h``), the flags and the compiler's version.
``-fopenmp`` links ``libgomp.so.1``, the soname of the OpenMP runtime torch ships: in a process
that imported torch the kernels' parallel loops run on torch's own (already awake) OpenMP team.

Without a compiler, or with ``AUTOREC_NATIVE=0``, :func:`load` gives None and logs the reason
once; every caller then keeps its torch path. Each kernel holds an AVX-512, an AVX2 and a plain
x86-64 build of its loops and runs the CPU's best; ``AUTOREC_NATIVE_ISA=avx2`` or ``plain`` caps
that choice (read once per process), so one machine can test every build.

Example:
    >>> fn = load("rowwise_adagrad", "autorec_rowwise_adagrad", ROWWISE_ADAGRAD_ARGS)
    >>> fn is None or callable(fn)
    True
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import hashlib
import logging
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

HERE = Path(__file__).parent
FLAGS = ("-O3", "-std=c++17", "-shared", "-fPIC", "-fopenmp")
_P, _I, _F, _C = ctypes.c_void_p, ctypes.c_int64, ctypes.c_float, ctypes.c_int
# argument types of each kernel's entry point, as its .cpp declares them
POOLED_LOOKUP_ARGS = (_P, _P, _I, _I, _P, _P, _P, _I, _C, _P, _C)
ROWWISE_ADAGRAD_ARGS = (_P, _P, _I, _I, _P, _P, _I, _I, _P, _P, _I, _F, _F, _C, _C)
PAIR_DOTS_FORWARD_ARGS = (_P, _I, _I, _I, _P, _P, _I, _I, _I, _P, _C, _C)
PAIR_DOTS_BACKWARD_ARGS = (_P, _C, _I, _P, _I, _I, _I, _P, _P, _I, _I, _P, _C)
PAIR_DOTS_FORWARD_PARTS_ARGS = (_P, _I, _I, _P, _I, _I, _I, _I, _P, _P, _I, _I, _I, _P, _C, _C)
PAIR_DOTS_BACKWARD_PARTS_ARGS = (_P, _C, _I, _P, _I, _I, _P, _I, _I, _I, _I, _P, _P, _I, _I, _P, _I, _P, _I,
                                 _C)
LAYER_NORM_FORWARD_ARGS = (_P, _P, _P, _I, _I, _F, _P, _P, _P, _C)
LAYER_NORM_BACKWARD_ARGS = (_P, _P, _P, _P, _P, _I, _I, _P, _P, _P, _C)
WUKONG_HEAD_FORWARD_ARGS = (_P, _I, _I, _P, _I, _I, _I, _I, _P, _I, _I, _I, _I, _C, _P, _P, _F, _P, _C, _P,
                            _P, _C)
WUKONG_HEAD_BACKWARD_ARGS = (_P, _I, _I, _P, _I, _I, _I, _I, _P, _I, _I, _I, _I, _C, _P, _P, _P, _C, _P, _P,
                             _I, _P, _I, _P, _P, _P, _C)
WUKONG_MID_FORWARD_ARGS = (_P, _P, _C, _I, _I, _I, _I, _P, _P, _F, _P, _P, _I, _I, _I, _I, _C, _P, _P, _F,
                           _P, _C, _P, _P, _C)
WUKONG_MID_BACKWARD_ARGS = (_P, _P, _C, _I, _I, _I, _I, _P, _P, _F, _P, _P, _I, _I, _I, _I, _C, _P, _P, _P,
                            _C, _P, _P, _P, _P, _P, _P, _P, _P, _C)
WUKONG_TAIL_FORWARD_ARGS = (_P, _P, _C, _I, _I, _I, _I, _P, _P, _F, _P, _C, _P, _C)
WUKONG_TAIL_BACKWARD_ARGS = (_P, _C, _P, _P, _C, _I, _I, _I, _I, _P, _P, _P, _P, _P, _P, _C)


def cache_root() -> Path:
    """Where compiled kernels are kept: ``$AUTOREC_CACHE/native``, else ``~/.cache/autorec/native``."""
    return Path(os.environ.get("AUTOREC_CACHE") or Path.home() / ".cache" / "autorec").expanduser() / "native"


def compile_kernel(source: Path, root: Path | None = None) -> Path:
    """The shared library built from ``source`` (built now unless the cache holds it).

    Raises:
        RuntimeError: no compiler, or the compiler failed (its message included).
    """
    compiler = os.environ.get("CXX") or "c++"
    if shutil.which(compiler) is None:
        raise RuntimeError(f"no C++ compiler: {compiler!r} not found on PATH (set CXX)")
    version = subprocess.run([compiler, "--version"], capture_output=True, text=True, check=False).stdout
    headers = [h.read_text() for h in sorted(source.parent.glob("*.h"))]  # what the source may include
    parts = [source.read_text(), *headers, *FLAGS, compiler, version]
    key = hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]
    folder = (root or cache_root()) / key
    target = folder / f"{source.stem}.so"
    if target.exists():
        return target
    folder.mkdir(parents=True, exist_ok=True)
    # Built beside the target and renamed into place: processes starting together (torchrun
    # ranks, Ray trials) each build their own copy and never load a half-written one.
    handle, scratch = tempfile.mkstemp(suffix=".so", dir=folder)
    os.close(handle)
    done = subprocess.run([compiler, *FLAGS, "-o", scratch, str(source)], capture_output=True, text=True,
                          check=False)
    if done.returncode != 0:
        Path(scratch).unlink(missing_ok=True)
        raise RuntimeError(f"{compiler} failed on {source} ({done.returncode}): "
                           f"{done.stderr.strip()[-2000:]}")
    os.replace(scratch, target)
    return target


@functools.cache
def library(name: str) -> ctypes.CDLL | None:
    """``<name>.cpp`` built and loaded, or None (with one warning saying why)."""
    if os.environ.get("AUTOREC_NATIVE", "1") == "0":
        log.info("AUTOREC_NATIVE=0: %s stays in torch's operators", name)
        return None
    try:
        return ctypes.CDLL(str(compile_kernel(HERE / f"{name}.cpp")))
    except (OSError, RuntimeError) as err:
        log.warning("%s stays in torch's operators: %s", name, err)
        return None


@functools.cache
def load(name: str, symbol: str, argtypes: tuple[Any, ...]) -> Any | None:
    """The entry point ``symbol`` of ``<name>.cpp`` (returning int64), or None as :func:`library`."""
    lib = library(name)
    if lib is None:
        return None
    fn = getattr(lib, symbol)
    fn.argtypes, fn.restype = list(argtypes), ctypes.c_int64
    return fn


def raise_on(code: int, kernel: str, errors: dict[int, str]) -> None:
    """A kernel's return code as an error: ``ValueError(errors[code])`` for the codes it names
    (bad sizes or indices, which the kernel checked before writing anything), ``RuntimeError``
    for any other non-zero code."""
    if code in errors:
        raise ValueError(errors[code])
    if code:
        raise RuntimeError(f"{kernel}: the kernel returned {code}")


class Switch:
    """Whether a kernel's callers may use it: on unless inside :meth:`disabled` (A/B benchmarks
    and tests run torch's path there)."""

    def __init__(self) -> None:
        self.on = True

    @contextlib.contextmanager
    def disabled(self) -> Iterator[None]:
        kept, self.on = self.on, False
        try:
            yield
        finally:
            self.on = kept
