"""Native FP8 on CUDA: E4M3 linear layers through ``torch._scaled_mm`` (Hopper/Ada and later).

Used by :func:`autorec.precision.layers.quant_linear` for the ``fp8_e4m3`` (per-tensor) and
``fp8_e4m3_rowwise`` recipes when the tensors sit on a CUDA device of compute capability
>= 8.9 and K and N are multiples of 16, the shapes ``_scaled_mm`` accepts; anywhere else the
emulated path runs. The scales are the emulation's (amax / 448, per tensor or per row), so the
two paths differ only by the accumulation order and the bf16 output of the row-wise kernel.
MX stays emulated on these devices: native MX matrix products need Blackwell.

Only the forward product is native; the backward products run emulated (E5M2 gradients).

Example:
    >>> native_linear(torch.randn(4, 32), torch.randn(16, 32), rowwise=True) is None  # on a CPU
    True
"""

from __future__ import annotations

import torch

FP8_MAX = 448.0  # float8_e4m3fn's largest finite value
MIN_CAPABILITY = (8, 9)


def scaled_mm_supported(x2d: torch.Tensor, weight: torch.Tensor) -> bool:
    """Whether ``x2d [M, K] @ weight[N, K]^T`` can run on ``torch._scaled_mm`` here."""
    if not (x2d.is_cuda and weight.is_cuda and hasattr(torch, "_scaled_mm")):
        return False
    if torch.cuda.get_device_capability(x2d.device) < MIN_CAPABILITY:
        return False
    return x2d.shape[-1] % 16 == 0 and weight.shape[0] % 16 == 0


def _to_fp8(t: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    # Row-major whatever the input's strides: _scaled_mm takes a row-major first operand.
    return (t.float() / scale).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn).contiguous()


def native_linear(x2d: torch.Tensor, weight: torch.Tensor, rowwise: bool) -> torch.Tensor | None:
    """FP8 E4M3 ``x2d @ weight.T`` on ``torch._scaled_mm``, or None where it cannot run.

    Args:
        x2d: activations [M, K].
        weight: [N, K].
        rowwise: one scale per row of ``x2d`` and per row of ``weight`` (else one per tensor).

    Returns:
        [M, N] in ``x2d``'s dtype, or None (the caller falls back to the emulated product).
    """
    if not scaled_mm_supported(x2d, weight):
        return None
    dims = {"dim": 1, "keepdim": True} if rowwise else {}
    x_scale = (x2d.detach().abs().amax(**dims).float() / FP8_MAX).clamp(min=1e-30)
    w_scale = (weight.detach().abs().amax(**dims).float() / FP8_MAX).clamp(min=1e-30)
    # _scaled_mm wants the second operand column-major: the transpose of a row-major [N, K].
    out = torch._scaled_mm(_to_fp8(x2d, x_scale), _to_fp8(weight, w_scale).t(),
                           scale_a=x_scale, scale_b=w_scale.t() if rowwise else w_scale,
                           out_dtype=torch.bfloat16)
    return out.to(x2d.dtype)
