"""Quantised dense layers: straight-through estimators over the emulated formats.

:func:`quant_linear` is the one quantised matrix product. Its forward multiplies the
activations and weights in the recipe's formats, each scaled along K, the reduction axis;
its backward computes the input gradient ``dY W`` and the weight gradient ``dY^T X`` from the
output gradient in the recipe's gradient format, each operand quantised again along *that*
product's reduction axis (N, then M), as MX hardware does. Rounding itself has no useful
derivative; the estimator passes gradients straight through it.

:func:`quantise_module_` gives the modules of one part of a model its precision in place, by
swapping each dense module's class for its quantised subclass below: parameters, their names
and state_dict keys stay as they are, so checkpoints and exports of an fp32 model load into a
quantised one and back. Covered: ``nn.Linear`` (every MLP, Wukong's FMB MLP and LCB, the DHEN
linear modules, shortcuts, the over-arch), ``nn.Conv1d`` (DHEN conv), torchrec's ``CrossNet`` /
``LowRankCrossNet`` (DCNv2, DHEN dcn), ``nn.MultiheadAttention`` (its Q/K/V and output
projections). Products of two activations (dot interactions, attention scores, the FM's
X (X^T Y)) stay in fp32.

Mixed precision in a supernet: :func:`quant_linear` is a pure function of the shared weight,
so a mixed op over formats evaluates ``sum_i w_i * layer.forward_as(x, p_i)`` on one
:class:`QuantLinear`; for a whole block, :class:`AtPrecision` candidates wrap one shared
module, each running it under its own precision (:func:`as_precision`), so
``supernet.mixed.MixedChoice("layer0.precision", {p: AtPrecision(op, p) for p in formats})``
mixes the formats over one set of weights.

Example:
    >>> layer = nn.Linear(64, 8)
    >>> quantise_module_(layer, "mxfp4_e2m1")
    1
    >>> type(layer).__name__, layer.precision
    ('QuantLinear', 'mxfp4_e2m1')
    >>> x = torch.randn(5, 64, requires_grad=True)
    >>> layer(x).sum().backward()
    >>> x.grad.shape, sorted(layer.state_dict())
    (torch.Size([5, 64]), ['bias', 'weight'])
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torchrec.modules.crossnet import CrossNet, LowRankCrossNet

from autorec.precision.native import scaled_product
from autorec.precision.quantisers import Quantiser
from autorec.precision.recipes import Recipe, recipe

NATIVE_RECIPES = ("fp8_e4m3", "fp8_e4m3_rowwise")  # their three products may run natively


class _QuantMatmul(torch.autograd.Function):
    """x [M, K] @ weight[N, K]^T (+ bias) in a recipe's formats; see the module docstring.
    Each product runs natively (:mod:`autorec.precision.native`) where it can, else emulated
    in float32."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                rec: Recipe) -> torch.Tensor:
        qw, qa, _ = rec.quantisers
        ctx.save_for_backward(x, weight)
        ctx.recipe, ctx.has_bias = rec, bias is not None
        ctx.native = rec.weight == rec.activation and rec.weight in NATIVE_RECIPES
        out = scaled_product(x, weight, rec.activation, rec.weight, x.dtype) if ctx.native else None
        if out is None:
            out = (qa.quantise(x.float()) @ qw.quantise(weight.float()).T).to(x.dtype)
        return out + bias.to(out.dtype) if bias is not None else out

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        x, weight = ctx.saved_tensors
        rec = ctx.recipe
        qw, qa, qg = rec.quantisers
        grad_x = grad_w = grad_b = None
        if ctx.needs_input_grad[0]:  # dX = dY W: reduction over N
            if ctx.native:
                grad_x = scaled_product(grad, weight.t(), rec.gradient, rec.weight, x.dtype)
            if grad_x is None:
                grad_x = (qg.quantise(grad.float(), axis=1) @ qw.quantise(weight.float(), axis=0)).to(x.dtype)
        if ctx.needs_input_grad[1]:  # dW = dY^T X: reduction over M
            if ctx.native:
                grad_w = scaled_product(grad.t(), x.t(), rec.gradient, rec.activation, weight.dtype)
            if grad_w is None:
                grad_w = qg.quantise(grad.float(), axis=0).T @ qa.quantise(x.float(), axis=0)
                grad_w = grad_w.to(weight.dtype)
        if ctx.has_bias and ctx.needs_input_grad[2]:
            grad_b = grad.sum(0).to(weight.dtype)
        return grad_x, grad_w, grad_b, None


def quant_linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                 precision: str | Recipe) -> torch.Tensor:
    """``F.linear(x, weight, bias)`` with the operands in ``precision``'s formats.

    Shapes: x [..., K], weight [N, K], bias [N] -> [..., N].

    Example:
        >>> w = torch.tensor([[1.0, 0.3]])
        >>> quant_linear(torch.tensor([[1.0, 1.0]]), w, None, "mxfp4_e2m1")  # 0.3 -> 0.25
        tensor([[1.2500]])
    """
    rec = recipe(precision)
    if rec.is_identity:
        return F.linear(x, weight, bias)
    out = _QuantMatmul.apply(x.reshape(-1, x.shape[-1]), weight, bias, rec)
    return out.reshape(*x.shape[:-1], weight.shape[0])


class _FakeQuant(torch.autograd.Function):
    """Forward: quantise along ``axis``. Backward: the gradient straight through."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, q: Quantiser, axis: int) -> torch.Tensor:
        return q.quantise(x, axis).to(x.dtype)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        return grad, None, None


class _GradQuant(torch.autograd.Function):
    """Forward: the identity. Backward: the gradient quantised along ``axis``."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, q: Quantiser, axis: int) -> torch.Tensor:
        ctx.q, ctx.axis = q, axis
        return x.view_as(x)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        return ctx.q.quantise(grad, ctx.axis).to(grad.dtype), None, None


class QuantLinear(nn.Linear):
    """``nn.Linear`` whose product runs in ``precision`` (see :func:`quant_linear`).

    Shapes: [..., in_features] -> [..., out_features].

    Example:
        >>> layer = QuantLinear(32, 4, precision="mxfp8_e4m3")
        >>> layer(torch.randn(2, 32)).shape
        torch.Size([2, 4])
    """

    precision: str = "fp32"

    def __init__(self, in_features: int, out_features: int, bias: bool = True,
                 precision: str = "fp32", **kwargs: Any) -> None:
        super().__init__(in_features, out_features, bias, **kwargs)
        self.precision = precision

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.forward_as(x, self.precision)

    def forward_as(self, x: torch.Tensor, precision: str | Recipe) -> torch.Tensor:
        """The output under another precision, from the same weights (for mixed ops)."""
        return quant_linear(x, self.weight, self.bias, precision)

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, precision={self.precision}"


class QuantConv1d(nn.Conv1d):
    """``nn.Conv1d`` with input and weight quantised along the input channels (part of the
    reduction) and its output gradient along the output channels; straight-through.

    Shapes: [B, C_in, L] -> [B, C_out, L'].

    Example:
        >>> conv = QuantConv1d(4, 2, 3, padding=1)
        >>> conv.precision = "mxfp8_e4m3"
        >>> conv(torch.randn(5, 4, 8)).shape
        torch.Size([5, 2, 8])
    """

    precision: str = "fp32"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rec = recipe(self.precision)
        if rec.is_identity:
            return super().forward(x)
        qw, qa, qg = rec.quantisers
        out = self._conv_forward(_FakeQuant.apply(x, qa, 1), _FakeQuant.apply(self.weight, qw, 1), self.bias)
        return _GradQuant.apply(out, qg, 1)


class QuantCrossNet(CrossNet):
    """torchrec's full-rank ``CrossNet`` with ``W_l x_l`` in ``precision``.

    Shapes: [B, N] -> [B, N].

    Example:
        >>> net = CrossNet(in_features=8, num_layers=2)
        >>> quantise_module_(net, "mxfp8_e4m3")
        1
        >>> net(torch.randn(3, 8)).shape
        torch.Size([3, 8])
    """

    precision: str = "fp32"

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        x_0 = x_l = input
        for kernel, bias in zip(self.kernels, self.bias, strict=True):
            x_l = x_0 * (quant_linear(x_l, kernel, None, self.precision) + bias.squeeze(-1)) + x_l
        return x_l


class QuantLowRankCrossNet(LowRankCrossNet):
    """torchrec's ``LowRankCrossNet`` with both low-rank products in ``precision``.

    Shapes: [B, N] -> [B, N].

    Example:
        >>> net = LowRankCrossNet(in_features=8, num_layers=2, low_rank=2)
        >>> quantise_module_(net, "mxfp6_e2m3")
        1
        >>> net(torch.randn(3, 8)).shape
        torch.Size([3, 8])
    """

    precision: str = "fp32"

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        x_0 = x_l = input
        for v, w, bias in zip(self.V_kernels, self.W_kernels, self.bias, strict=True):
            x_l_v = quant_linear(x_l, v, None, self.precision)
            x_l = x_0 * (quant_linear(x_l_v, w, None, self.precision) + bias) + x_l
        return x_l


class QuantMultiheadAttention(nn.MultiheadAttention):
    """Batch-first self-attention whose Q/K/V and output projections run in ``precision``;
    the attention product itself (two activations) stays in the input's dtype.

    Shapes: [B, L, E] -> ([B, L, E], None). Only what autorec's blocks call is supported:
    ``attention(x, x, x, need_weights=False)`` without masks.

    Example:
        >>> mha = nn.MultiheadAttention(8, 2, batch_first=True)
        >>> quantise_module_(mha, "mxfp8_e4m3")
        1
        >>> x = torch.randn(3, 5, 8)
        >>> mha(x, x, x, need_weights=False)[0].shape
        torch.Size([3, 5, 8])
    """

    precision: str = "fp32"

    def forward(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                key_padding_mask: torch.Tensor | None = None, need_weights: bool = True,
                attn_mask: torch.Tensor | None = None, average_attn_weights: bool = True,
                is_causal: bool = False) -> tuple[torch.Tensor, None]:
        if not (query is key is value and self.batch_first and self._qkv_same_embed_dim) or need_weights \
                or key_padding_mask is not None or attn_mask is not None or is_causal:
            raise NotImplementedError("quantised attention supports batch-first self-attention "
                                      "without masks or returned weights")
        batch, length, embed = query.shape
        qkv = quant_linear(query, self.in_proj_weight, self.in_proj_bias, self.precision)
        q, k, v = (t.view(batch, length, self.num_heads, self.head_dim).transpose(1, 2)
                   for t in qkv.chunk(3, dim=-1))
        attended = F.scaled_dot_product_attention(q, k, v, dropout_p=self.dropout if self.training else 0.0)
        attended = attended.transpose(1, 2).reshape(batch, length, embed)
        return quant_linear(attended, self.out_proj.weight, self.out_proj.bias, self.precision), None


class PrecisionAware(nn.Module):
    """Base of a module that runs its own products through :func:`quant_linear` in
    ``self.precision`` (e.g. a supernet op holding raw weight tensors rather than the modules
    that :data:`QUANTISED` maps): :func:`quantise_module_` and :func:`as_precision` set that
    attribute instead of swapping the class.
    """

    precision: str = "fp32"


QUANTISED: dict[type[nn.Module], type[nn.Module]] = {
    nn.Linear: QuantLinear, nn.Conv1d: QuantConv1d, CrossNet: QuantCrossNet,
    LowRankCrossNet: QuantLowRankCrossNet, nn.MultiheadAttention: QuantMultiheadAttention,
}
_BASES = {quantised: base for base, quantised in QUANTISED.items()}


def quantise_module_(module: nn.Module, precision: str) -> int:
    """Give every dense module inside ``module`` (itself included) ``precision``, in place.

    ``fp32`` turns quantised modules back into their plain classes. Returns how many
    modules were set. An unknown precision raises ValueError naming it.
    """
    recipe(precision)
    count = 0
    for sub in list(module.modules()):
        if isinstance(sub, PrecisionAware):
            if precision == "fp32":
                sub.__dict__.pop("precision", None)
            else:
                sub.precision = precision
            count += 1
            continue
        base = _BASES.get(type(sub), type(sub))
        if base not in QUANTISED:
            continue
        if precision == "fp32":
            sub.__class__ = base
            sub.__dict__.pop("precision", None)
        else:
            sub.__class__ = QUANTISED[base]
            sub.precision = precision  # type: ignore[assignment]
        count += 1
    return count


def dense_parts(model: nn.Module) -> dict[str, tuple[nn.Module, str]]:
    """The parts of a :class:`~autorec.models.RecModel` that carry a precision, by the
    attribute path the cost model uses: ``dense_arch``, ``towers`` (DMT tower modules, where the
    spec has towers), ``layers.<i>``, ``over_arch``."""
    spec = model.spec
    parts: dict[str, tuple[nn.Module, str]] = {}
    if model.dense_arch is not None:
        parts["dense_arch"] = (model.dense_arch, spec.dense_arch_precision)
    if getattr(model, "towers", None) is not None:
        parts["towers"] = (model.towers, spec.towers.module.precision)
    for i, (block, config) in enumerate(zip(model.layers, spec.layers, strict=True)):
        parts[f"layers.{i}"] = (block, config.precision)
    parts["over_arch"] = (model.over_arch, spec.over_arch_precision)
    return parts


def quantise_model(model: nn.Module) -> nn.Module:
    """Give each part of a RecModel the precision its ArchSpec names (in place)."""
    for module, precision in dense_parts(model).values():
        if precision != "fp32":
            quantise_module_(module, precision)
    return model


@contextmanager
def as_precision(module: nn.Module, precision: str) -> Iterator[nn.Module]:
    """Run ``module`` (its dense modules) in ``precision`` inside the block; restore after.

    Example:
        >>> layer = nn.Linear(32, 2)
        >>> with as_precision(layer, "mxfp4_e2m1"):
        ...     type(layer).__name__
        'QuantLinear'
        >>> type(layer).__name__
        'Linear'
    """
    saved = [(sub, type(sub), sub.__dict__.get("precision")) for sub in module.modules()
             if _BASES.get(type(sub), type(sub)) in QUANTISED or isinstance(sub, PrecisionAware)]
    quantise_module_(module, precision)
    try:
        yield module
    finally:
        for sub, cls, previous in saved:
            sub.__class__ = cls
            if previous is None:
                sub.__dict__.pop("precision", None)
            else:
                sub.precision = previous


class AtPrecision(nn.Module):
    """A candidate of a mixed op over formats: the shared ``module`` run in ``precision``.

    Shapes: those of ``module``.

    Args:
        module: the shared module (the same object in every candidate: one set of weights).
        precision: a layer precision (``autorec.arch.PRECISIONS``).

    Example:
        >>> shared = nn.Linear(32, 2)
        >>> mixed = [AtPrecision(shared, p) for p in ("fp32", "mxfp4_e2m1")]
        >>> x = torch.randn(3, 32)
        >>> torch.equal(mixed[0](x), shared(x)), torch.equal(mixed[1](x), shared(x))
        (True, False)
    """

    def __init__(self, module: nn.Module, precision: str) -> None:
        super().__init__()
        recipe(precision)
        self.module, self.precision = module, precision

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        with as_precision(self.module, self.precision):
            return self.module(*args, **kwargs)
