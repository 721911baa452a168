"""Mixed precision of a training or evaluation step: ``TrainConfig.autocast`` and ``fp32_matmul``.

``"bf16"`` runs the model's forward under ``torch.autocast`` with bfloat16: matrix products
(linear layers, DLRM's dots, DCN's cross kernels, Wukong's FM) take bf16 inputs and the
weights, optimizer state and embedding tables stay fp32, so no loss scaling is needed (bf16
keeps fp32's exponent range). The loss is computed from fp32 logits. Where the device has
native bf16 arithmetic (GPUs; CPUs with AVX512-BF16 or AMX) the products run 2-3x faster than
fp32 (this AMD EPYC's ``torch.mm``: 430-440 against 177-181 GFLOP/s); elsewhere autocast
emulates bf16 and is slower, so :func:`forward_autocast` warns once.

Example:
    >>> import torch
    >>> layer = torch.nn.Linear(4, 2)
    >>> with forward_autocast("bf16", torch.device("cpu")):
    ...     out = layer(torch.ones(3, 4))
    >>> out.dtype
    torch.bfloat16
    >>> with forward_autocast("off", torch.device("cpu")):
    ...     out = layer(torch.ones(3, 4))
    >>> out.dtype
    torch.float32

``fp32_matmul`` keeps every tensor fp32 and changes only how fp32 matrix products are computed,
in the forward and the backward alike: ``"ieee"`` (the process's own setting, fp32 products by
default), ``"bf16"`` (oneDNN on the CPU rounds the products' inputs to bf16 and accumulates in
fp32, on the AMX or AVX512-BF16 units: what Intel calls BF32) or ``"tf32"`` (CUDA's TensorFloat-32
tensor cores). Unlike autocast, no activation, gradient or weight is stored in bf16 and no cast
runs between layers; see :func:`fp32_matmul`.
"""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import Iterator
from contextlib import AbstractContextManager

import torch

log = logging.getLogger(__name__)

AUTOCAST = ("off", "bf16")
FP32_MATMUL = ("ieee", "bf16", "tf32")


@functools.cache
def native_bf16(device_type: str) -> bool:
    """Whether ``device_type`` multiplies bf16 matrices natively (an x86 CPU: AVX512-BF16 or
    AMX, as torch detects them; oneDNN's own bf16 check also passes on plain AVX512, where bf16
    is emulated)."""
    if device_type == "cuda":
        return torch.cuda.is_available() and torch.cuda.is_bf16_supported()
    if device_type == "cpu":
        names = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")
        checks = (getattr(torch.cpu, name, None) for name in names)
        return any(bool(check()) for check in checks if check is not None)
    return False


def forward_autocast(mode: str, device: torch.device) -> AbstractContextManager[object]:
    """The context to run a forward in under ``mode`` (one of :data:`AUTOCAST`) on ``device``."""
    if mode == "off":
        return contextlib.nullcontext()
    if mode != "bf16":
        raise ValueError(f"autocast: expected one of {', '.join(AUTOCAST)}, got {mode!r}")
    if not native_bf16(device.type):
        _warn_emulated(device.type)
    return torch.autocast(device.type, dtype=torch.bfloat16)


@functools.cache
def _warn_emulated(device_type: str) -> None:
    log.warning("bf16 products: this %s has no native bf16 matrix products; bf16 is emulated and "
                "slower than fp32 here (set train.autocast: off and train.fp32_matmul: ieee)", device_type)


@functools.cache
def _warn_no_effect(mode: str, device_type: str) -> None:
    log.warning("fp32_matmul %s: applies to %s products only; this %s training runs them as before",
                mode, "CPU (oneDNN)" if mode == "bf16" else "CUDA", device_type)


@contextlib.contextmanager
def fp32_matmul(mode: str, device: torch.device) -> Iterator[None]:
    """fp32 matrix products (``torch.mm``, ``addmm``, ``bmm``, linear layers, forward and backward)
    at ``mode``'s precision while the context is open (a process-wide torch setting, restored on
    exit): ``"ieee"`` leaves it alone; ``"bf16"`` sets oneDNN's fp32 matmul precision to bf16 on
    the CPU; ``"tf32"`` sets CUDA's to TF32. Tensors stay fp32 throughout.

    Example:
        >>> with fp32_matmul("bf16", torch.device("cpu")):
        ...     torch.backends.mkldnn.matmul.fp32_precision
        'bf16'
    """
    if mode not in FP32_MATMUL:
        raise ValueError(f"fp32_matmul: expected one of {', '.join(FP32_MATMUL)}, got {mode!r}")
    if mode == "ieee":
        yield
        return
    backend = torch.backends.mkldnn.matmul if mode == "bf16" else torch.backends.cuda.matmul
    if device.type != ("cpu" if mode == "bf16" else "cuda"):
        _warn_no_effect(mode, device.type)
    elif mode == "bf16" and not native_bf16(device.type):
        _warn_emulated(device.type)
    before = backend.fp32_precision
    backend.fp32_precision = mode
    try:
        yield
    finally:
        backend.fp32_precision = before
