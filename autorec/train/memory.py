"""glibc's malloc told to keep freed buffers for reuse: ``TrainConfig.keep_freed_memory``.

A training step allocates and frees the same large temporaries every step: on the scale
workload at batch 4096 the stacked embeddings [4096, 27, 64] and their gradient are 28 MB each,
the pooled lookup's output 27 MB. glibc serves every block over its mmap threshold (128 KiB
at first, raised as blocks are freed, up to 32 MiB) with fresh pages from the kernel, and gives
the heap's free top back past twice that threshold, so steps fault such pages in again:
``benchmarks/malloc_keep.py --presets dlrm --dim 64`` counted about 12,000 faults and 19 ms of
kernel time a step (0 and 0.3 ms kept; the step 1.11x faster, paired). :func:`keep_freed_memory`
sets the threshold to glibc's largest (32 MiB) and the trim threshold to 2 GiB, so such blocks
come from the heap and go back to it, warm. The price: the process keeps up to 2 GiB of freed
heap mapped instead of returning it. At the presets' D 16 it changes nothing measurable.

It is process-wide and cannot be undone; a Trainer applies it at construction unless its
config says ``keep_freed_memory: false``. Elsewhere than glibc on Linux it does nothing.
Measured in ``benchmarks/malloc_keep.py`` (BENCHMARKS.md, "Freed memory kept for reuse").

Example:
    >>> keep_freed_memory() in (True, False)
    True
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import sys

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc's malloc.h
MMAP_THRESHOLD_MAX = 32 * 2**20  # glibc's DEFAULT_MMAP_THRESHOLD_MAX on 64-bit: larger is refused
TRIM_THRESHOLD = 2**31 - 1  # mallopt takes an int


@functools.cache
def keep_freed_memory() -> bool:
    """Set glibc's mmap threshold to 32 MiB and its trim threshold to 2 GiB for this process
    (see the module docstring); True where glibc took both, False where there is no glibc."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
        glibc = hasattr(libc, "gnu_get_libc_version")  # another libc's mallopt may mean otherwise
    except (OSError, AttributeError):
        return False
    if not glibc:
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    mapped = mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_MAX) == 1
    return mapped and mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1
