"""Pairwise dot products of a batch of vectors, with a backward written for the CPU.

``torch.bmm(x, x.mT)[:, first, second]`` (what torchrec's DLRM interaction computes) spends most
of its backward in two places that are slow on the CPU: the advanced-indexing backward (an
``index_put_`` with accumulation into a [B, F, F] zero tensor) and the two batched matmuls that
autograd runs for ``x`` and ``x.mT``. :func:`pair_dots` computes the same values, and its
backward folds the gradient once into a symmetric [B, F, F] matrix (two ``index_add_`` along the
flattened pair axis) and runs one batched matmul: ``dX = (G + G^T) X``. At the shapes of
``benchmarks/train_throughput.py`` (B=4096, F=27, D=64, 2 threads of an Intel Xeon) forward plus
backward take about half the time of the indexing form (``python -m benchmarks.pair_dots``);
``tests/blocks/test_gram.py`` checks the values and gradients against it. When no gradient is
taken, or under ``torch.export`` (which traces plain operators), it runs the plain form; under
``torch.compile`` it runs eagerly (a graph break), its backward unchanged. Under autocast
(``train.autocast: bf16``) torch's path runs the products in bf16 and the dots come back in
``x``'s dtype.

For an fp32 ``x`` on the CPU, forward, backward and evaluation run the compiled kernel of
:mod:`autorec.native.pair_dots` instead (each sample's products and fold in L1), where it could
be built; the same values to float rounding. Under autocast too: there it computes the dots in
fp32, where torch's path rounds the products' inputs to bf16, and in less time.
"""

from __future__ import annotations

import torch

from autorec.native import pair_dots as native_dots

BLOCK = 512  # samples whose [F, F] products the forward and backward build at a time


class _PairDots(torch.autograd.Function):
    """``bmm(x, x^T)`` flattened and gathered at ``flat``; the backward mirrors at ``mirror``.

    With ``passthrough`` n > 0 the first n vectors lead the output, flattened, and ``pad`` zeros
    close it, in one buffer: the backward adds their gradient into the product's ``dX`` in place,
    where the plain ``cat(x[:, :n].flatten(1), dots)`` would have autograd build a zero [B, F, D]
    gradient for the slice and add it to ``dX`` (at the benchmark's shapes, 4096 x 27 x 64, two
    passes over 28 MB a step).

    Under autocast both batched products run at autocast's dtype (the backward's too, which
    autograd would otherwise run in fp32), while the gather and the fold stay in ``x``'s dtype:
    on the CPU, ``index_select`` and ``index_add_`` on bf16 run 2-6x slower than on fp32.

    Both directions (and evaluation, which saves nothing) work through the batch ``BLOCK``
    samples at a time, so that each block's [m, F * F] products and fold (1.5 MB at F = 27)
    stay in cache between the product and the gather or the fold, where the whole batch's
    (12 MB at B = 4096) went to memory and back:
    the same values bit for bit (each sample's products are its own), 1.05-1.06x on the DLRM
    preset's step (``benchmarks/dot_blocks.py``)."""

    @staticmethod
    def forward(ctx: torch.autograd.function.FunctionCtx, x: torch.Tensor, flat: torch.Tensor,
                mirror: torch.Tensor, passthrough: int, pad: int, native: bool = False,
                dtype: torch.dtype = torch.float32) -> torch.Tensor:
        ctx.native = native  # type: ignore[attr-defined]
        if native:  # the kernel's output in ``dtype``, its backward taking that dtype's gradient
            first, second = _pairs(flat, x.shape[1])
            ctx.save_for_backward(x, first, second)
            ctx.passthrough = passthrough  # type: ignore[attr-defined]
            return native_dots.forward(x, first, second, passthrough, pad, dtype)
        low = _autocast_dtype(x)
        xs = x if low is None else x.to(low)
        ctx.save_for_backward(xs, flat, mirror)
        ctx.dtype, ctx.passthrough = x.dtype, passthrough  # type: ignore[attr-defined]
        return _in_blocks(x, xs, flat, passthrough, pad)

    @staticmethod
    def backward(ctx: torch.autograd.function.FunctionCtx,  # type: ignore[override]
                 grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        n = ctx.passthrough  # type: ignore[attr-defined]
        if ctx.native:  # type: ignore[attr-defined]
            x, first, second = ctx.saved_tensors  # type: ignore[attr-defined]
            return native_dots.backward(grad, x, first, second, n), None, None, None, None, None, None
        xs, flat, mirror = ctx.saved_tensors  # type: ignore[attr-defined]
        b, f, d = xs.shape
        dtype = ctx.dtype  # type: ignore[attr-defined]
        dx = xs.new_empty(b, f, d, dtype=dtype)
        sym = grad.new_empty(min(b, BLOCK), f * f)
        for start in range(0, b, BLOCK):
            m = min(b - start, BLOCK)
            dots = grad[start: start + m].narrow(1, n * d, flat.numel())
            fold = sym[:m].zero_()
            fold.index_add_(1, flat, dots)
            fold.index_add_(1, mirror, dots)  # a diagonal pair lands twice: d(x.x)/dx = 2x
            product = fold.view(m, f, f).to(xs.dtype)
            if xs.dtype == dtype:
                torch.bmm(product, xs[start: start + m], out=dx[start: start + m])
            else:
                dx[start: start + m] = torch.bmm(product, xs[start: start + m])
        if n:
            dx[:, :n].add_(grad[:, : n * d].unflatten(1, (n, d)))
        return dx, None, None, None, None, None, None


class _PairDotsParts(torch.autograd.Function):
    """The native kernel's dots of ``cat([x0, x1], 1)`` read from the two parts, its backward
    giving each part's gradient (see :func:`pair_dots_parts`)."""

    @staticmethod
    def forward(ctx: torch.autograd.function.FunctionCtx, x0: torch.Tensor, x1: torch.Tensor,
                first: torch.Tensor, second: torch.Tensor, passthrough: int, pad: int,
                dtype: torch.dtype) -> torch.Tensor:
        ctx.save_for_backward(x0, x1, first, second)
        ctx.passthrough = passthrough  # type: ignore[attr-defined]
        return native_dots.forward_parts(x0, x1, first, second, passthrough, pad, dtype)

    @staticmethod
    def backward(ctx: torch.autograd.function.FunctionCtx,  # type: ignore[override]
                 grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        x0, x1, first, second = ctx.saved_tensors  # type: ignore[attr-defined]
        dx0, dx1 = native_dots.backward_parts(grad, x0, x1, first, second, ctx.passthrough)  # type: ignore[attr-defined]
        return dx0, dx1, None, None, None, None, None


def _pairs(flat: torch.Tensor, f: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(first, second) of the flattened pair indices ``flat`` = first * F + second."""
    return flat.div(f, rounding_mode="floor"), flat.remainder(f)


def _in_blocks(x: torch.Tensor, xs: torch.Tensor, flat: torch.Tensor, passthrough: int,
               pad: int) -> torch.Tensor:
    """:func:`_laid_out` of ``xs``' products (``x`` itself, or cast to autocast's dtype), built
    ``BLOCK`` samples at a time: each block's [m, F * F] products stay in cache."""
    b, _, d = x.shape
    out = x.new_empty(b, passthrough * d + flat.numel() + pad)
    if passthrough:
        out[:, : passthrough * d] = x[:, :passthrough].flatten(1)
    if pad:
        out[:, out.shape[1] - pad:] = 0
    dots = out.narrow(1, passthrough * d, flat.numel())
    for start in range(0, b, BLOCK):
        block = xs[start: start + BLOCK]
        gram = torch.bmm(block, block.transpose(1, 2)).flatten(1).to(x.dtype)
        dots[start: start + BLOCK] = gram.index_select(1, flat)
    return out


def _laid_out(x: torch.Tensor, gram: torch.Tensor, flat: torch.Tensor, passthrough: int,
              pad: int) -> torch.Tensor:
    """``[x[:, :passthrough] flattened, gram's entries at flat, pad zeros]`` in one tensor, from
    the whole batch's products (plain operators, for ``torch.export`` and compiled code)."""
    dots = gram.index_select(1, flat)
    if not passthrough and not pad:
        return dots
    parts = [x[:, :passthrough].flatten(1), dots] if passthrough else [dots]
    if pad:
        parts.append(dots.new_zeros(dots.shape[0], pad))
    return torch.cat(parts, dim=1)


def _autocast_dtype(x: torch.Tensor) -> torch.dtype | None:
    """The dtype autocast gives ``x``'s products here, or None outside autocast."""
    device = x.device.type
    return torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device) else None


def pair_dots(x: torch.Tensor, first: torch.Tensor, second: torch.Tensor, passthrough: int = 0,
              pad: int = 0, dtype: torch.dtype | None = None) -> torch.Tensor:
    """The dots ``<x[:, first[p]], x[:, second[p]]>`` for every pair p, after the first
    ``passthrough`` vectors flattened and before ``pad`` zeros (DLRM's interaction layout).

    ``dtype`` (default ``x``'s) is the output's: a caller whose output goes to a linear under
    autocast asks for autocast's dtype, which the native kernel writes directly (and whose
    gradient its backward reads) where that linear would cast it, a pass over the output each way.

    Shapes: x [B, F, D], first and second [P] (long, values in [0, F)) ->
    [B, passthrough * D + P + pad].

    Example:
        >>> x = torch.arange(12.0).view(1, 3, 4)
        >>> pair_dots(x, torch.tensor([0, 0, 1]), torch.tensor([1, 2, 2]))
        tensor([[ 38.,  62., 214.]])
        >>> pair_dots(x, torch.tensor([0]), torch.tensor([1]), passthrough=1, pad=3)
        tensor([[ 0.,  1.,  2.,  3., 38.,  0.,  0.,  0.]])
    """
    dtype = x.dtype if dtype is None else dtype
    native = native_dots.eligible(x) and dtype in (torch.float32, torch.bfloat16)
    return _dots(x, first, second, passthrough, pad, native, dtype).to(dtype)


def _dots(x: torch.Tensor, first: torch.Tensor, second: torch.Tensor, passthrough: int, pad: int,
          native: bool, dtype: torch.dtype) -> torch.Tensor:
    """:func:`pair_dots`' values: in ``dtype`` from the native kernel (``native``), else in
    ``x``'s dtype by the path that suits the call."""
    f = x.shape[1]
    flat = first * f + second
    graded = torch.is_grad_enabled() and x.requires_grad
    eager = not torch.compiler.is_compiling() and x.device.type in ("cpu", "cuda")
    if torch.compiler.is_exporting() or not (graded or eager):
        return _laid_out(x, torch.bmm(x, x.transpose(1, 2)).flatten(1).to(x.dtype), flat, passthrough, pad)
    if not graded:  # evaluation, eager on the CPU or CUDA: the forward's own path, nothing saved
        if native:
            return native_dots.forward(x, first, second, passthrough, pad, dtype)
        low = _autocast_dtype(x)
        return _in_blocks(x, x if low is None else x.to(low), flat, passthrough, pad)
    if torch.compiler.is_compiling():  # (train.compile) a graph break: the backward below, eager
        return _eager_pair_dots(x, flat, second * f + first, passthrough, pad, native, dtype)
    return _PairDots.apply(x, flat, second * f + first, passthrough, pad, native, dtype)


def pair_dots_parts(x0: torch.Tensor, x1: torch.Tensor, first: torch.Tensor, second: torch.Tensor,
                    passthrough: int = 0, pad: int = 0, dtype: torch.dtype | None = None) -> torch.Tensor:
    """:func:`pair_dots` of ``cat([x0, x1], 1)`` (both in their promoted dtype), read from the two
    parts where the native kernel can (:func:`autorec.native.pair_dots.parts_eligible`, eager, the
    pairs in torchrec's order, as :class:`~autorec.blocks.dlrm.PairwiseDots` gives them): DLRM's
    dense vector and pooled embeddings then skip their concatenation, a pass over the batch's
    vectors (its backward, a split into views, cost nothing). Elsewhere it concatenates and calls
    :func:`pair_dots`. The same values bit for bit either way.

    Shapes: x0 [B, F0, D], x1 [B, F1, D], first and second [P] -> [B, passthrough * D + P + pad].

    Example:
        >>> x = torch.arange(16.0).view(1, 4, 4)
        >>> first, second = torch.triu_indices(4, 4, offset=1)
        >>> torch.equal(pair_dots_parts(x[:, :1], x[:, 1:], first, second), pair_dots(x, first, second))
        True
    """
    common = torch.promote_types(x0.dtype, x1.dtype)
    x0, x1 = x0.to(common), x1.to(common)
    dtype = common if dtype is None else dtype
    if (dtype in (torch.float32, torch.bfloat16) and native_dots.parts_eligible(x0, x1)
            and not torch.compiler.is_compiling() and not torch.compiler.is_exporting()):
        if torch.is_grad_enabled() and (x0.requires_grad or x1.requires_grad):
            return _PairDotsParts.apply(x0, x1, first, second, passthrough, pad, dtype)
        return native_dots.forward_parts(x0, x1, first, second, passthrough, pad, dtype)
    return pair_dots(torch.cat([x0, x1], 1), first, second, passthrough, pad, dtype)


@torch.compiler.disable
def _eager_pair_dots(x: torch.Tensor, flat: torch.Tensor, mirror: torch.Tensor, passthrough: int,
                     pad: int, native: bool, dtype: torch.dtype) -> torch.Tensor:
    """:class:`_PairDots` run eagerly from compiled code: Inductor's code for its backward's
    ``index_add_`` is slower than ATen's on the CPU (``benchmarks.step_profile --compile``)."""
    return _PairDots.apply(x, flat, mirror, passthrough, pad, native, dtype)
