"""torchrec's MLP (linear then ReLU, every layer) with each layer's forward in one oneDNN call on
the CPU under bf16 autocast.

Under autocast a torchrec ``Perceptron`` runs ``addmm`` (the product and its bias) and then
``relu``, a second pass over the output; on the CPU torch's bf16 ``relu`` costs about as much
as the product at the presets' sizes (batch 4096, layers of 64 to 256: 0.26 against 0.14 ms at
[4096, 128] x [128, 128]; BENCHMARKS.md, "ReLU layers in one call"). oneDNN's linear with a ReLU
post-op (``torch.ops.mkldnn._linear_pointwise``, the op torch's inductor uses on the CPU) gives
the same values in one pass. The backward runs the ops autograd runs for the autocast layer
(``threshold_backward``, the two products ``addmm``'s backward picks, the bias's column sum),
so the gradients are the same bits as well. Outside bf16 autocast (fp32 training) and wherever
a hook, a compiler or another module could see the difference, torchrec's layers run as they
are.

Shapes: [B, in_size] -> [B, layer_sizes[-1]].

Example:
    >>> mlp = ReluMLP(8, [32, 16])
    >>> x = torch.randn(4, 8)
    >>> with torch.autocast("cpu", dtype=torch.bfloat16):
    ...     torch.equal(mlp(x), MLP.forward(mlp, x))
    True
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import nn
from torch.autograd.function import once_differentiable
from torchrec.modules.mlp import MLP

from autorec.blocks.base import global_forward_hooks
from autorec.native.build import Switch

SWITCH = Switch()
disabled = SWITCH.disabled  # inside, torchrec's layers run as they are (A/B benchmarks, tests)


def _fused_op() -> Any | None:
    """oneDNN's linear with a post-op, where this torch build has it."""
    ops = getattr(torch.ops, "mkldnn", None)
    return getattr(ops, "_linear_pointwise", None) if ops is not None else None


def fusable(layers: Sequence[nn.Module], x: torch.Tensor) -> bool:
    """Whether torchrec ``Perceptron`` ``layers`` can each run as one call for ``x`` [B, I]:
    every one a plain ``nn.Linear`` with bias and at least 16 outputs (oneDNN's product for
    fewer sums in another order) followed by ``torch.relu``, no hook on either, eager, on the
    CPU under bf16 autocast with ``x`` fp32 or bf16, outside :func:`disabled`, oneDNN there."""
    if not (SWITCH.on and layers and x.dim() == 2 and x.device.type == "cpu"
            and x.dtype in (torch.float32, torch.bfloat16) and torch.is_autocast_enabled("cpu")
            and torch.get_autocast_dtype("cpu") == torch.bfloat16):
        return False
    if (torch.compiler.is_compiling() or torch.compiler.is_exporting() or global_forward_hooks()
            or not torch.backends.mkldnn.is_available() or _fused_op() is None):
        return False
    for layer in layers:
        linear = getattr(layer, "_linear", None)
        if (getattr(layer, "_activation_fn", None) is not torch.relu or type(linear) is not nn.Linear
                or linear.bias is None or linear.out_features < 16 or _hooked(layer) or _hooked(linear)):
            return False
    return True


def _hooked(module: nn.Module) -> bool:
    return bool(module._forward_hooks or module._forward_pre_hooks or module._backward_hooks
                or module._backward_pre_hooks)


class _ReluLinear(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        # the casts autocast makes for F.linear; then the product, its bias and the ReLU at once
        xs, w, b = (t.detach().to(torch.bfloat16) for t in (x, weight, bias))
        with torch.autocast("cpu", enabled=False):
            a = _fused_op()(xs, w, b, "relu", [], "")
        ctx.save_for_backward(xs, w, a)
        ctx.dtypes = x.dtype, weight.dtype, bias.dtype
        return a

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        xs, w, a = ctx.saved_tensors
        x_dtype, w_dtype, b_dtype = ctx.dtypes
        with torch.autocast("cpu", enabled=False):
            # what autograd runs for relu(addmm(b, x, w^T)): the ReLU's mask by its output, then
            # addmm's backward (its second operand w^T is column-major, so its gradient is
            # (dh^T x)^T, returned here as dh^T x, w's own layout)
            dh = torch.ops.aten.threshold_backward(grad.to(a.dtype), a, 0)
            dx = dh.mm(w).to(x_dtype) if ctx.needs_input_grad[0] else None
            dw = dh.t().mm(xs).to(w_dtype) if ctx.needs_input_grad[1] else None
            db = dh.sum(0, keepdim=True).view(-1).to(b_dtype) if ctx.needs_input_grad[2] else None
        return dx, dw, db


class ReluMLP(MLP):
    """torchrec's ``MLP`` whose layers run as one call each where :func:`fusable` (the CPU under
    bf16 autocast): the same values and gradients. The same modules and parameters as
    torchrec's (``_mlp.<i>._linear``), so checkpoints and every tool that walks them see no
    difference.

    Shapes: [B, in_size] -> [B, layer_sizes[-1]].

    Example:
        >>> ReluMLP(8, [32, 16])(torch.randn(4, 8)).shape
        torch.Size([4, 16])
    """

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        layers = list(self._mlp)
        if _hooked(self._mlp) or not fusable(layers, input):
            return super().forward(input)
        for layer in layers:
            input = _ReluLinear.apply(input, layer._linear.weight, layer._linear.bias)
        return input
