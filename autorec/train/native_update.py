"""The CPU tables' row-wise Adagrad as one compiled pass (``rowwise_adagrad.cpp`` beside this file).

:mod:`autorec.train.cpu_lookup` replaces fbgemm's CPU fused backward by the same update in
torch's operators: about twenty passes over the looked-up rows (sort, unique, sums, gathers,
scatters), 5-7 ms a step at the scale workload's shapes. This module does it in one C++ pass:
the rows of every table grouped at once by a stable radix sort, then each row's gradient summed
and its state and weights updated in place, split over the intra-op threads. Written by hand
because neither fbgemm (17 ms on this CPU; see ``cpu_lookup``) nor torch offers that kernel.

The source is compiled on first use with the system's C++ compiler (``$CXX``, else ``c++``;
about a second) into ``~/.cache/autorec/native/<hash>/`` (``$AUTOREC_CACHE`` moves the root),
keyed by the source, the flags and the compiler's version, and loaded with ctypes (no torch
headers; the call releases the GIL). Without a compiler, or with ``AUTOREC_NATIVE=0``,
:func:`library` is None, a warning names the reason once, and ``cpu_lookup`` keeps torch's ops.

Example:
    >>> import torch
    >>> from fbgemm_gpu.split_table_batched_embeddings_ops_training import OptimType
    >>> from autorec.train.cpu_lookup import TBE
    >>> from fbgemm_gpu.split_table_batched_embeddings_ops_common import EmbeddingLocation
    >>> from fbgemm_gpu.split_table_batched_embeddings_ops_training import ComputeDevice
    >>> one_table = [(5, 4, EmbeddingLocation.HOST, ComputeDevice.CPU)]  # 5 rows of 4
    >>> tbe = TBE(one_table, optimizer=OptimType.EXACT_ROWWISE_ADAGRAD, learning_rate=0.1)
    >>> # B 3 bags: [1, 4], [4], []; each row's gradient summed over its bags, then its update
    >>> rowwise_adagrad(tbe, torch.tensor([1, 4, 4]), torch.tensor([0, 2, 3, 3]),
    ...                 torch.ones(3, 4), mean=False)
    >>> tbe.momentum1_host.tolist()  # mean(g^2): row 1 g = (1, 1, 1, 1), row 4 g = (2, 2, 2, 2)
    [0.0, 1.0, 0.0, 0.0, 4.0]
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import logging
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import torch

log = logging.getLogger(__name__)

SOURCE = Path(__file__).with_name("rowwise_adagrad.cpp")
FLAGS = ("-O3", "-std=c++17", "-shared", "-fPIC", "-fopenmp")
SYMBOL = "autorec_rowwise_adagrad"


def cache_root() -> Path:
    """Where compiled kernels are kept: ``$AUTOREC_CACHE/native``, else ``~/.cache/autorec/native``."""
    return Path(os.environ.get("AUTOREC_CACHE") or Path.home() / ".cache" / "autorec").expanduser() / "native"


def compile_kernel(source: Path = SOURCE, root: Path | None = None) -> Path:
    """The shared library built from ``source`` (built now unless the cache holds it).

    Raises:
        RuntimeError: no compiler, or the compiler failed (its message included).
    """
    compiler = os.environ.get("CXX") or "c++"
    if shutil.which(compiler) is None:
        raise RuntimeError(f"no C++ compiler: {compiler!r} not found on PATH (set CXX)")
    version = subprocess.run([compiler, "--version"], capture_output=True, text=True, check=False).stdout
    key = hashlib.sha256("\0".join([source.read_text(), *FLAGS, compiler, version]).encode()).hexdigest()[:16]
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
def library() -> Any | None:
    """The loaded kernel, or None (with one warning saying why) when it cannot be had."""
    if os.environ.get("AUTOREC_NATIVE", "1") == "0":
        log.info("AUTOREC_NATIVE=0: the CPU tables' update stays in torch's operators")
        return None
    try:
        lib = ctypes.CDLL(str(compile_kernel()))
    except (OSError, RuntimeError) as err:
        log.warning("the CPU tables' update stays in torch's operators: %s", err)
        return None
    fn = getattr(lib, SYMBOL)
    ptr, i64, f32 = ctypes.c_void_p, ctypes.c_int64, ctypes.c_float
    fn.argtypes = [ptr, ptr, i64, i64, ptr, ptr, i64, i64, ptr, ptr, i64, f32, f32, ctypes.c_int,
                   ctypes.c_int]
    fn.restype = i64
    return fn


def rowwise_adagrad(tbe: Any, indices: torch.Tensor, offsets: torch.Tensor, grad: torch.Tensor,
                    *, mean: bool) -> None:
    """Exact row-wise Adagrad on the rows ``indices`` looked up, in place in ``tbe``'s tables.

    Args:
        tbe: fbgemm's TBE with every feature the same width D and ``weights_host`` row r at state
            row r (``cpu_lookup``'s aligned case).
        indices: [n] int64, feature-major; offsets: [T * B + 1] int64 (bags as fbgemm's).
        grad: [B, T * D] float32, the gradient of the lookup's output (rows may be a slice of
            a wider tensor: read in place).
        mean: mean pooling (each occurrence's gradient scaled by 1 / its bag's length).

    Raises:
        RuntimeError: the kernel is unavailable (:func:`library` is None), or a row falls
            outside the tables.
    """
    fn = library()
    if fn is None:
        raise RuntimeError("the native row-wise Adagrad kernel is unavailable (see the log)")
    features = tbe.D_offsets.numel() - 1
    batch = (offsets.numel() - 1) // features
    dim = int(tbe.D_offsets[1] - tbe.D_offsets[0])
    indices, offsets = indices.long().contiguous(), offsets.long().contiguous()
    grad = grad.float()
    if grad.dim() != 2 or grad.stride(1) != 1:  # rows of a wider tensor are read in place
        grad = grad.contiguous()
    base = tbe.momentum1_offsets[:features].long().contiguous()
    weights, state = tbe.weights_host, tbe.momentum1_host
    if grad.shape != (batch, features * dim) or not (weights.is_contiguous() and state.is_contiguous()):
        raise RuntimeError(f"native row-wise Adagrad: gradient {tuple(grad.shape)}, expected "
                           f"({batch}, {features * dim}), and contiguous tables")
    bad = fn(indices.data_ptr(), offsets.data_ptr(), features, batch, base.data_ptr(), grad.data_ptr(),
             grad.stride(0), dim, weights.data_ptr(), state.data_ptr(), state.numel(),
             float(tbe.get_learning_rate()), float(tbe.optimizer_args.eps), int(mean),
             torch.get_num_threads())
    if bad:
        raise RuntimeError(f"index {int(indices[bad - 1])} (position {bad - 1}) is out of bounds: "
                           f"its row falls outside the tables' {state.numel()} rows")
