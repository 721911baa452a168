"""The CPU embedding tables on 2 MiB transparent huge pages: ``TrainConfig.huge_pages``.

A pooled lookup reads one row of D floats (64 B at D 16) from anywhere in the tables, 356 MB
at the scale workload's 26 tables, and the row-wise Adagrad update writes it and its state
back. On 4 KiB pages nearly every such row is also a TLB miss and a walk of the page tables;
on 2 MiB pages the same tables need 180 TLB entries instead of 91,000. Measured on the Intel
Xeon (``python -m benchmarks.huge_pages``, BENCHMARKS.md "The tables on huge pages"): the
lookup alone 1.4x faster, the update 1.1-1.2x, a DLRM or Wukong step 1.02-1.07x.

:func:`back_with_huge_pages` asks Linux for it on the 2 MiB-aligned part of a tensor's memory:
``madvise(MADV_HUGEPAGE)`` marks the range, and ``madvise(MADV_COLLAPSE)`` (Linux 6.1 and later)
moves its pages onto huge pages now, in place: the same addresses (every view of the tables
stays valid) and the same values. Where the kernel has free huge pages this takes about 0.2 s
for the scale workload's tables; where it must first compact memory, 1-1.5 s. Where Linux
refuses (transparent huge pages set to ``never``, an older kernel, no huge page to be had) the
tables stay as they are and training goes on; the reason is logged. Written with ctypes on
libc's ``madvise``: neither torch nor fbgemm offers it for a tensor already allocated (torch's
``THP_MEM_ALLOC_ENABLE`` applies to every allocation of the process and only when set before
torch is first imported).

Example:
    >>> import torch
    >>> table = torch.randn(2**22)  # 16 MiB
    >>> before = table.clone()
    >>> back_with_huge_pages(table) in (0, *range(14 * 2**20, 16 * 2**20 + 1, 2**21))
    True
    >>> torch.equal(table, before)  # the same values, in place
    True
"""

from __future__ import annotations

import ctypes
import functools
import logging
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

import torch
from torch import nn

from autorec.train.cpu_lookup import fused_tables

log = logging.getLogger(__name__)

HUGE_PAGE = 2**21  # x86-64's and aarch64's (4 KiB granule) transparent huge page
MADV_HUGEPAGE, MADV_COLLAPSE = 14, 25  # linux/mman-common.h
THP_ENABLED = Path("/sys/kernel/mm/transparent_hugepage/enabled")


def thp_mode(path: Path = THP_ENABLED) -> str:
    """The transparent huge page mode in effect (``always``, ``madvise`` or ``never``: the
    bracketed word of ``path``); ``""`` where there is none to read (not Linux, no THP).

    Example:
        >>> thp_mode(Path("/nonexistent"))
        ''
    """
    try:
        text = path.read_text()
    except OSError:
        return ""
    start, end = text.find("["), text.find("]")
    return text[start + 1:end] if 0 <= start < end else ""


@functools.cache
def _madvise() -> Any | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None
    fn = libc.madvise
    fn.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    fn.restype = ctypes.c_int
    return fn


def kernel_version(release: str | None = None) -> tuple[int, int]:
    """(major, minor) of the running kernel (or of ``release``); (0, 0) where unreadable.

    Example:
        >>> kernel_version("6.18.44-fc-v1300"), kernel_version("unknown")
        ((6, 18), (0, 0))
    """
    parts = (release if release is not None else platform.release()).split(".")
    try:
        return int(parts[0]), int(parts[1].split("-")[0])
    except (IndexError, ValueError):
        return 0, 0


def unsupported() -> str | None:
    """Why this process cannot collapse memory onto huge pages, or None where it can."""
    if _madvise() is None:
        return "not Linux with a C library that has madvise"
    mode = thp_mode()
    if mode in ("", "never"):
        return f"transparent huge pages are {mode or 'absent'} ({THP_ENABLED})"
    if kernel_version() < (6, 1):
        return f"Linux {platform.release()} has no MADV_COLLAPSE (6.1 and later)"
    return None


def aligned_span(tensor: torch.Tensor) -> tuple[int, int]:
    """(first address, bytes) of the whole 2 MiB pages inside ``tensor``'s elements; bytes 0
    where there is no whole one.

    Example:
        >>> aligned_span(torch.zeros(1000))[1]
        0
    """
    start = tensor.data_ptr()
    end = start + tensor.numel() * tensor.element_size()
    low = -(-start // HUGE_PAGE) * HUGE_PAGE
    high = end // HUGE_PAGE * HUGE_PAGE
    return low, max(high - low, 0)


def back_with_huge_pages(tensor: torch.Tensor) -> int:
    """Put the whole 2 MiB pages inside ``tensor`` (CPU, contiguous) on transparent huge pages,
    in place; the bytes that Linux collapsed onto them (0 where it could not: see the module).

    Raises:
        ValueError: ``tensor`` is not a contiguous CPU tensor (its memory is not one span).
    """
    if tensor.device.type != "cpu" or not tensor.is_contiguous():
        raise ValueError(f"back_with_huge_pages: expected a contiguous CPU tensor, got one on "
                         f"{tensor.device} with strides {tuple(tensor.stride())}")
    low, size = aligned_span(tensor)
    if size == 0 or unsupported() is not None:
        return 0
    return _collapse(low, size)


def _collapse(low: int, size: int) -> int:
    """``size`` bytes from ``low`` (whole 2 MiB pages) collapsed onto huge pages: ``size``, or 0
    where Linux refused (logged)."""
    madvise = _madvise()
    for advice, name in ((MADV_HUGEPAGE, "MADV_HUGEPAGE"), (MADV_COLLAPSE, "MADV_COLLAPSE")):
        if madvise(low, size, advice) != 0:
            error = ctypes.get_errno()
            log.info("huge pages: madvise(%s) on %d MiB refused (%s); the tables stay on small pages",
                     name, size >> 20, os.strerror(error))
            return 0
    return size


def back_tables(model: nn.Module) -> int:
    """:func:`back_with_huge_pages` on the weights and row-wise optimizer state of every fused
    CPU table of ``model`` (:func:`autorec.train.cpu_lookup.fused_tables`); the bytes collapsed."""
    reason = unsupported()
    if reason is not None:
        log.info("huge pages: none for the embedding tables: %s", reason)
        return 0
    start, total = time.perf_counter(), 0
    for tbe in fused_tables(model):
        for name in ("weights_host", "momentum1_host"):
            tensor = getattr(tbe, name, None)
            if isinstance(tensor, torch.Tensor) and tensor.device.type == "cpu" and tensor.is_contiguous():
                low, size = aligned_span(tensor)  # the support checked once above, not per tensor
                total += _collapse(low, size) if size else 0
    if total:
        log.info("huge pages: %d MiB of embedding tables in %.2f s", total >> 20, time.perf_counter() - start)
    return total
