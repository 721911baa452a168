"""LayerNorm over short rows (D <= 64) on the CPU as one compiled pass per direction
(``layer_norm.cpp``).

torch's CPU LayerNorm pays a per-row setup that dominates rows of 16 floats: Wukong normalizes
[4096, 16, 16] twice a step, 0.97 ms forward and 0.56 ms backward a call on an Intel Xeon
(BENCHMARKS.md), against 0.43 and 0.41 ms here. Here a
row is one to four vector registers: mean, variance, the affine map, and backward the input's
gradient and each thread's partial sums of the weight's and bias's. Written by hand because no
library has a CPU LayerNorm tuned for short rows; built and loaded by :mod:`autorec.native.build`
(None where it cannot be, and :class:`autorec.blocks.layout.FloatLayerNorm` keeps torch's).

Shapes: x [..., D] -> the same; weight and bias [D].

Example:
    >>> import torch
    >>> x = torch.tensor([[1.0, 2.0, 3.0, 6.0]])
    >>> out = layer_norm(x, torch.ones(4), torch.zeros(4), 1e-5) if available() else None
    >>> out is None or torch.allclose(out, torch.nn.functional.layer_norm(x, (4,)), atol=1e-6)
    True
"""

from __future__ import annotations

from typing import Any

import torch
from torch.autograd.function import once_differentiable

from autorec.native import build

MAX_DIM = 64
SWITCH = build.Switch()
disabled = SWITCH.disabled  # inside, torch's path runs (A/B benchmarks, tests)


def _forward_fn() -> Any | None:
    return build.load("layer_norm", "autorec_layer_norm_forward", build.LAYER_NORM_FORWARD_ARGS)


def _backward_fn() -> Any | None:
    return build.load("layer_norm", "autorec_layer_norm_backward", build.LAYER_NORM_BACKWARD_ARGS)


def available() -> bool:
    """Whether the kernel could be built and loaded here."""
    return _forward_fn() is not None


def eligible(x: torch.Tensor, weight: torch.Tensor | None, bias: torch.Tensor | None,
             normalized_shape: tuple[int, ...]) -> bool:
    """Whether a LayerNorm of ``x`` over its last dimension can run here: fp32 on the CPU with an
    fp32 weight and bias, D <= 64, eager (not compiled or exported), outside :func:`disabled`,
    the kernel available. Autocast does not matter: the kernel works in fp32 and gives fp32,
    what :class:`~autorec.blocks.layout.FloatLayerNorm` gives under autocast."""
    return (SWITCH.on and x.device.type == "cpu" and x.dtype == torch.float32 and x.dim() >= 1
            and len(normalized_shape) == 1 and normalized_shape[0] == x.shape[-1] <= MAX_DIM
            and weight is not None and bias is not None
            and weight.dtype == bias.dtype == torch.float32 and weight.device.type == "cpu"
            and not torch.compiler.is_compiling() and not torch.compiler.is_exporting() and available())


class _LayerNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor,
                eps: float) -> torch.Tensor:
        d = x.shape[-1]
        rows = x.detach().reshape(-1, d).contiguous()
        y = torch.empty_like(rows)
        mean, rstd = rows.new_empty(rows.shape[0]), rows.new_empty(rows.shape[0])
        fn = _forward_fn()
        if fn is None or fn(rows.data_ptr(), weight.detach().contiguous().data_ptr(),
                            bias.detach().contiguous().data_ptr(), rows.shape[0], d, eps, y.data_ptr(),
                            mean.data_ptr(), rstd.data_ptr(), torch.get_num_threads()):
            raise RuntimeError(f"native layer norm: rows of {d}, the kernel takes 1 to {MAX_DIM}")
        ctx.save_for_backward(rows, weight, mean, rstd)
        return y.view(x.shape)

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, None]:
        rows, weight, mean, rstd = ctx.saved_tensors
        d = rows.shape[1]
        dy = grad.reshape(-1, d).float().contiguous()
        dx = torch.empty_like(rows)
        dw, db = weight.new_empty(d, dtype=torch.float32), weight.new_empty(d, dtype=torch.float32)
        fn = _backward_fn()
        if fn is None or fn(dy.data_ptr(), rows.data_ptr(), mean.data_ptr(), rstd.data_ptr(),
                            weight.detach().contiguous().data_ptr(), rows.shape[0], d, dx.data_ptr(),
                            dw.data_ptr(), db.data_ptr(), torch.get_num_threads()):
            raise RuntimeError(f"native layer norm: rows of {d}, the kernel takes 1 to {MAX_DIM}")
        return dx.view(grad.shape), dw, db, None


def layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float) -> torch.Tensor:
    """``F.layer_norm(x, (D,), weight, bias, eps)`` on the kernel (callers check :func:`eligible`)."""
    return _LayerNorm.apply(x, weight, bias, eps)
