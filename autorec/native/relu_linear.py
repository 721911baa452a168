"""torchrec's ReLU layers (``Perceptron``: linear, then ReLU) on the CPU under bf16 autocast,
with their backward's elementwise work in one compiled pass (``relu_grad.cpp``).

In torch a ReLU layer's backward is ``threshold_backward`` (a pass writing the masked gradient)
and then, inside ``addmm``'s backward, a column sum for the bias (another pass); its forward
allocates the ReLU's output apart from the product's. On the CPU at the presets' sizes (batch
4096, layers of 64 to 256) those passes cost about as much as the layer's products under bf16
autocast. Here the forward runs the same product (``addmm``, in autocast's dtype where autocast
is on) and the ReLU in place, and the backward masks the gradient and sums its columns in one
pass, then runs the same two products. Written by hand because torch has no fused ReLU backward
with a bias gradient on the CPU; built and loaded by :mod:`autorec.native.build` (None where it
cannot be, and :class:`autorec.blocks.mlp.ReluMLP` runs torchrec's layers as they are).

The values are autocast's bit for bit, and so are the input's and weight's gradients; the
bias's gradient is summed in fp32 in another order, then rounded to bf16 as autocast's bf16 sum
is, so it may differ in its last bit where the two sums straddle a rounding point. In fp32 the
layers keep torch's ops: there the other order would change the bias's gradient in its last
bits every step, and an fp32 training would no longer repeat the one before it bit for bit.

Shapes: x [B, I], a plain ``nn.Linear(I, N)`` with bias, N a multiple of 16 -> [B, N].

Example:
    >>> import torch
    >>> from torch import nn
    >>> layer = nn.Linear(4, 16)
    >>> x = torch.randn(3, 4)
    >>> with torch.autocast("cpu", dtype=torch.bfloat16):
    ...     out = relu_linear(x, layer) if available() else torch.relu(layer(x))
    ...     torch.equal(out, torch.relu(layer(x)))
    True
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import nn
from torch.autograd.function import once_differentiable

from autorec.native import build

SWITCH = build.Switch()
disabled = SWITCH.disabled  # inside, torchrec's layers run as they are (A/B benchmarks, tests)


def _fn() -> Any | None:
    return build.load("relu_grad", "autorec_relu_grad_bias", build.RELU_GRAD_ARGS)


def available() -> bool:
    """Whether the kernel could be built and loaded here."""
    return _fn() is not None


def layer_dtype(x: torch.Tensor) -> torch.dtype | None:
    """bf16, the dtype a ReLU layer on ``x`` runs its product in here (CPU autocast's, ``x`` fp32
    or bf16), or None where this path does not apply (outside bf16 autocast: see the module)."""
    if x.device.type != "cpu" or not torch.is_autocast_enabled("cpu"):
        return None
    low = torch.get_autocast_dtype("cpu")
    return low if low == torch.bfloat16 and x.dtype in (torch.float32, torch.bfloat16) else None


def fusable(layers: Sequence[nn.Module], x: torch.Tensor) -> bool:
    """Whether torchrec ``Perceptron`` ``layers`` can run on this path for ``x`` [B, I]: each a
    plain ``nn.Linear`` with bias and N a multiple of 16 followed by ``torch.relu``, no hook on
    either (a probe then sees every call; the caller checks module-wide hooks), eager, on the CPU
    under bf16 autocast, outside :func:`disabled`, the kernel available."""
    if not (SWITCH.on and x.dim() == 2 and layer_dtype(x) is not None and layers and available()):
        return False
    if torch.compiler.is_compiling() or torch.compiler.is_exporting():
        return False
    for layer in layers:
        linear = getattr(layer, "_linear", None)
        if (getattr(layer, "_activation_fn", None) is not torch.relu or type(linear) is not nn.Linear
                or linear.bias is None or linear.out_features % 16 or _hooked(layer) or _hooked(linear)):
            return False
    return True


def _hooked(module: nn.Module) -> bool:
    return bool(module._forward_hooks or module._forward_pre_hooks or module._backward_hooks)


class _ReluLinear(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor,
                dtype: torch.dtype) -> torch.Tensor:
        # the casts autocast makes for F.linear, then the addmm F.linear runs: the same bits
        xs, w = x.detach().to(dtype), weight.detach().to(dtype)
        with torch.autocast("cpu", enabled=False):
            a = torch.addmm(bias.detach().to(dtype), xs, w.t()).relu_()
        ctx.save_for_backward(xs, w, a)
        ctx.x_dtype, ctx.w_dtype = x.dtype, weight.dtype
        return a

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        xs, w, a = ctx.saved_tensors
        g = grad.to(a.dtype).contiguous()
        dh, db = torch.empty_like(a), torch.empty(a.shape[1], dtype=torch.float32)
        fn = _fn()
        if fn is None:
            raise RuntimeError("the native ReLU-layer kernel is unavailable (see the log)")
        build.raise_on(fn(a.data_ptr(), g.data_ptr(), int(a.dtype == torch.bfloat16), a.shape[0], a.shape[1],
                          dh.data_ptr(), db.data_ptr(), torch.get_num_threads()), "relu layer",
                       {-1: f"relu layer: {a.shape[1]} outputs, expected a multiple of 16"})
        dx = dh.mm(w).to(ctx.x_dtype) if ctx.needs_input_grad[0] else None
        # addmm's own backward for its second operand (w^T): x^T dh, then transposed back
        dw = xs.t().mm(dh).t().to(ctx.w_dtype) if ctx.needs_input_grad[1] else None
        bias_grad = db.to(a.dtype).to(ctx.w_dtype) if ctx.needs_input_grad[2] else None
        return dx, dw, bias_grad, None


def relu_linear(x: torch.Tensor, linear: nn.Linear) -> torch.Tensor:
    """``relu(linear(x))`` on this path (callers check :func:`fusable`)."""
    dtype = layer_dtype(x)
    if dtype is None:
        raise ValueError(f"relu layer: x {x.dtype} on {x.device}, expected fp32 or bf16 on the CPU under "
                         "bf16 autocast")
    return _ReluLinear.apply(x, linear.weight, linear.bias, dtype)
