"""Native FP8 on CUDA: the three products of an FP8 linear layer through ``torch._scaled_mm``
(Hopper/Ada and later).

Used by :func:`autorec.precision.layers.quant_linear` for the ``fp8_e4m3`` (per-tensor) and
``fp8_e4m3_rowwise`` recipes when the tensors sit on a CUDA device of compute capability
>= 8.9 and the reduction and output sizes are multiples of 16, the shapes ``_scaled_mm``
accepts; anywhere else (a CPU, an older GPU, another shape, an operand pairing the kernel
refuses) the emulated path runs. The forward ``X W^T`` multiplies E4M3 operands; the backward
``dY W`` and ``dY^T X`` multiply the E5M2 output gradient with the E4M3 weight and activation.
Each operand is scaled along its product's reduction axis exactly as the emulation scales it
(amax / the format's largest value, per tensor or per row), so the two paths differ only by the
accumulation order and the rounding of the output (bf16 for row-wise scales, whose kernel
writes no fp32). MX stays emulated on these devices: native MX matrix products need Blackwell.

Example:
    >>> native_linear(torch.randn(4, 32), torch.randn(16, 32), rowwise=True) is None  # on a CPU
    True
"""

from __future__ import annotations

import warnings

import torch

MIN_CAPABILITY = (8, 9)
# Native formats: quantiser name -> (torch dtype, row-wise scales).
NATIVE_FORMATS: dict[str, tuple[torch.dtype, bool]] = {
    "fp8_e4m3": (torch.float8_e4m3fn, False), "fp8_e4m3_rowwise": (torch.float8_e4m3fn, True),
    "fp8_e5m2": (torch.float8_e5m2, False), "fp8_e5m2_rowwise": (torch.float8_e5m2, True),
}
REFUSED: set[tuple[torch.dtype, torch.dtype, bool]] = set()  # pairings the kernel refused here


def scaled_mm_supported(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether ``a [M, K] @ b[N, K]^T`` can run on ``torch._scaled_mm`` here."""
    if not (a.is_cuda and b.is_cuda and hasattr(torch, "_scaled_mm")):
        return False
    if torch.cuda.get_device_capability(a.device) < MIN_CAPABILITY:
        return False
    return a.shape[-1] % 16 == 0 and b.shape[0] % 16 == 0


def _scale(t: torch.Tensor, dtype: torch.dtype, rowwise: bool) -> torch.Tensor:
    """amax / the format's largest value: [rows, 1] per row, or [] per tensor (float32)."""
    magnitude = t.detach().abs()
    amax = magnitude.amax(dim=1, keepdim=True) if rowwise else magnitude.amax()
    return (amax.float() / torch.finfo(dtype).max).clamp(min=1e-30)


def _to_fp8(t: torch.Tensor, scale: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    # Row-major whatever the input's strides: _scaled_mm takes a row-major first operand.
    limit = torch.finfo(dtype).max
    return (t.float() / scale).clamp(-limit, limit).to(dtype).contiguous()


def scaled_product(a: torch.Tensor, b: torch.Tensor, a_format: str, b_format: str,
                   out_dtype: torch.dtype) -> torch.Tensor | None:
    """``a @ b.T`` with each operand in its FP8 format, scaled along K, or None where it cannot
    run natively (see the module docstring).

    Args:
        a: [M, K], any strides (a transposed view is copied row-major once).
        b: [N, K], any strides.
        a_format, b_format: names in :data:`NATIVE_FORMATS`; both per tensor or both per row.
        out_dtype: dtype of the result.

    Returns:
        [M, N] in ``out_dtype``, or None.
    """
    if a_format not in NATIVE_FORMATS or b_format not in NATIVE_FORMATS:
        return None
    (a_dtype, rowwise), (b_dtype, b_rowwise) = NATIVE_FORMATS[a_format], NATIVE_FORMATS[b_format]
    if rowwise != b_rowwise or (a_dtype, b_dtype, rowwise) in REFUSED or not scaled_mm_supported(a, b):
        return None
    a_scale, b_scale = _scale(a, a_dtype, rowwise), _scale(b, b_dtype, rowwise)
    try:
        # _scaled_mm wants the second operand column-major: the transpose of a row-major [N, K].
        out = torch._scaled_mm(_to_fp8(a, a_scale, a_dtype), _to_fp8(b, b_scale, b_dtype).t(),
                               scale_a=a_scale, scale_b=b_scale.t() if rowwise else b_scale,
                               out_dtype=torch.bfloat16 if rowwise else torch.float32)
    except RuntimeError as error:  # e.g. a pairing of element types this build has no kernel for
        REFUSED.add((a_dtype, b_dtype, rowwise))
        warnings.warn(f"torch._scaled_mm refused {a_dtype} x {b_dtype} (row-wise {rowwise}); "
                      f"those products run emulated from now on: {error}", stacklevel=2)
        return None
    return out.to(out_dtype)


def native_linear(x2d: torch.Tensor, weight: torch.Tensor, rowwise: bool) -> torch.Tensor | None:
    """FP8 E4M3 ``x2d @ weight.T`` on ``torch._scaled_mm``, or None where it cannot run.

    Args:
        x2d: activations [M, K].
        weight: [N, K].
        rowwise: one scale per row of ``x2d`` and per row of ``weight`` (else one per tensor).

    Returns:
        [M, N] in ``x2d``'s dtype, or None (the caller falls back to the emulated product).
    """
    name = "fp8_e4m3_rowwise" if rowwise else "fp8_e4m3"
    return scaled_product(x2d, weight, name, name, x2d.dtype)
