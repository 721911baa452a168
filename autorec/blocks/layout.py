"""Two CPU-minded pieces the blocks share: a LayerNorm kept in fp32 under autocast, and X^T whose
gradient comes back contiguous.

Both came out of torch.profiler over the Wukong preset's step under bf16 autocast on the scale
workload (batch 4096, AMD EPYC, 2 threads; BENCHMARKS.md, "LayerNorm in fp32 and contiguous
gradients under bf16"):

- CPU autocast leaves ``layer_norm`` in the input's dtype (CUDA's autocast runs it in fp32). The
  CPU's bf16 LayerNorm backward over D = 16 at [4096, 16, 16] took 1.6-7.2 ms a call, its fp32
  form 1.1 ms; fp32 is also the precision a norm's statistics want.
- Where a layer reads X both as it is and as X^T (Wukong's FM reads X, its one product over the
  feature axis reads X^T), autograd adds the two gradients, one of them a transposed view: a
  strided add, 3.3 ms in bf16 at [4096, 27, 16] against 0.5 ms for a contiguous copy and 0.2 ms
  for the add that follows it (in fp32 the strided add takes 0.47 ms, so fp32 keeps the view).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from autorec.native import layer_norm as native_norm


class FloatLayerNorm(nn.LayerNorm):
    """``nn.LayerNorm`` that runs in fp32 when autocast hands it a lower-precision input.

    Outside autocast, or given fp32, it is ``nn.LayerNorm`` itself (same parameters, same state
    dict keys); in fp32 on the CPU over rows of up to 64, under autocast too, it runs the
    compiled kernel of :mod:`autorec.native.layer_norm` (the same values to float rounding)
    where it could be built.
    Shapes: [..., *normalized_shape] -> the same; fp32 out under autocast.

    Example:
        >>> norm = FloatLayerNorm(4)
        >>> x = torch.randn(2, 3, 4)
        >>> with torch.autocast("cpu", dtype=torch.bfloat16):
        ...     y = norm(x.to(torch.bfloat16))
        >>> y.dtype
        torch.float32
        >>> torch.allclose(norm(x), nn.functional.layer_norm(x, (4,), norm.weight, norm.bias), atol=1e-6)
        True
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        device = x.device.type
        low = x.dtype != torch.float32 and torch.is_autocast_enabled(device)
        if low:  # under autocast the norm runs in fp32 (CPU autocast would leave it in bf16)
            x = x.float()
        if native_norm.eligible(x, self.weight, self.bias, self.normalized_shape):
            return native_norm.layer_norm(x, self.weight, self.bias, self.eps)
        if not low:
            return super().forward(x)
        with torch.autocast(device, enabled=False):
            return super().forward(x)


class _Transposed(torch.autograd.Function):
    """X [B, F, D] -> contiguous X^T [B, D, F]; the backward hands back a contiguous gradient
    where it is not fp32."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        return x.transpose(1, 2).contiguous()

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        back = grad.transpose(1, 2)  # fp32's strided add costs less than the copy (0.47 against 0.6 ms)
        return back if back.dtype == torch.float32 else back.contiguous()


def transposed(x: torch.Tensor) -> torch.Tensor:
    """X^T as a contiguous [B, D, F] tensor whose gradient w.r.t. X comes back contiguous (where
    it is not fp32), so a layer that also reads X as it is adds two contiguous gradients (see the
    module docstring).

    Shapes: [B, F, D] -> [B, D, F].

    Example:
        >>> x = torch.randn(2, 3, 4)
        >>> xt = transposed(x)
        >>> xt.shape, xt.is_contiguous(), torch.equal(xt, x.transpose(1, 2))
        (torch.Size([2, 4, 3]), True, True)
    """
    return _Transposed.apply(x)
