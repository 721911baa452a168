"""Mixed precision for the forward of a training or evaluation step: ``TrainConfig.autocast``.

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
"""

from __future__ import annotations

import contextlib
import functools
import logging
from contextlib import AbstractContextManager

import torch

log = logging.getLogger(__name__)

AUTOCAST = ("off", "bf16")


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
    log.warning("autocast bf16: this %s has no native bf16 matrix products; bf16 is emulated and "
                "slower than fp32 here (set train.autocast: off)", device_type)
