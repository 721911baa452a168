"""Wukong's layer on the CPU around its MLP, as two compiled passes each way (``wukong_layer.cpp``).

:class:`~autorec.blocks.wukong.WukongLayer` maps X [B, F, D] over the feature axis (the FM's
projection Y, the LCB's W_L and a projecting residual's W_R, one product), forms the FM's
X (X^T Y), normalises it over its F * k values, runs the FM's MLP, then concatenates the MLP's
n_fm rows with the LCB's, adds the residual and normalises every row over D. In torch each step is
a pass over the batch (transposes, casts, cat, add, split and their backward); on the CPU at the
preset's sizes those passes, not the products, are most of a Wukong step. Here the steps before
the MLP are one pass (the *head*: ``fm`` and ``base`` = [0; LCB(X)] + residual(X)) and the steps
after it another (the *tail*: ``LN_D(base + [MLP(fm); 0])``); each sample's vectors stay in L1.
The backward runs the same two passes in reverse, the weights' and norms' gradients summed per
thread and added in the threads' order (a run repeats bit for bit at the same thread count).
Written by hand because no library fuses a per-sample product, a LayerNorm and a residual around
an MLP on the CPU; built and loaded by :mod:`autorec.native.build` (None where it cannot be, and
the layer keeps torch's ops).

Everything is computed in fp32. Under bf16 autocast ``fm`` is written in bf16 where a plain linear
takes it (what that linear would cast it to) and the MLP's bf16 output is read as it is; torch's
path rounds X and the maps' weights to bf16 for the products, the kernel does not.

The head reads X whole or in two parts (the model's dense vector and its pooled embeddings,
each sample's rows in place, with no concatenation) and gives each part its gradient. Between
two stacked layers, :func:`mid` runs the first one's tail and the second one's head as one
pass (``wukong_mid.cpp``), so the layer's output and its gradient never leave L1.

Shapes: x [B, F, D] fp32 with D a multiple of 16 up to 64 (or its parts [B, F0, D] and
[B, F - F0, D]), wcat [F, C] -> fm [B, F * k],
base [B, n_fm + n_lcb, D]; base and m [B, n_fm * D] -> y [B, n_fm + n_lcb, D].

Example:
    >>> import torch
    >>> x, wcat = torch.randn(2, 3, 16), torch.randn(3, 2 + 1)  # k = 2, n_lcb = 1, identity residual
    >>> ones, zeros = torch.ones(6), torch.zeros(6)
    >>> fm, base = head(x, wcat, ones, zeros, 1e-5, k=2, n_fm=2, n_lcb=1) if available() else (
    ...     torch.zeros(2, 6), torch.zeros(2, 3, 16))
    >>> fm.shape, base.shape
    (torch.Size([2, 6]), torch.Size([2, 3, 16]))
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch.autograd.function import once_differentiable

from autorec.native import build

SWITCH = build.Switch()
disabled = SWITCH.disabled  # inside, torch's path runs (A/B benchmarks, tests)
STACK = build.Switch()
stack_disabled = STACK.disabled  # inside, stacked layers run one by one on the kernels, no mid
MAX_DIM = 64


def _fn(symbol: str, args: tuple[Any, ...], source: str = "wukong_layer") -> Any | None:
    return build.load(source, symbol, args)


def available() -> bool:
    """Whether the kernel could be built and loaded here."""
    return _fn("autorec_wukong_head_forward", build.WUKONG_HEAD_FORWARD_ARGS) is not None


def mid_available() -> bool:
    """Whether :func:`mid`'s kernel (``wukong_mid.cpp``) could be built and loaded here."""
    return _fn("autorec_wukong_mid_forward", build.WUKONG_MID_FORWARD_ARGS, "wukong_mid") is not None


def eligible(x: torch.Tensor, n_fm: int) -> bool:
    """Whether a Wukong layer on ``x`` can run here: fp32 [B, F, D] on the CPU with D a multiple
    of 16 up to 64 and at least one FM row, eager (not compiled or exported), outside
    :func:`disabled`, the kernel available. Autocast does not matter (see the module)."""
    return (SWITCH.on and x.device.type == "cpu" and x.dtype == torch.float32 and x.dim() == 3
            and x.shape[2] % 16 == 0 and 16 <= x.shape[2] <= MAX_DIM and n_fm >= 1
            and not torch.compiler.is_compiling() and not torch.compiler.is_exporting() and available())


def parts_eligible(x0: torch.Tensor, x1: torch.Tensor, n_fm: int) -> bool:
    """Whether a Wukong layer on ``cat([x0, x1], 1)`` can read its input in the two parts where
    they lie: x1 :func:`eligible`, x0 [B, F0, D] of the same batch and D in fp32 or bf16 (the
    dense arch's output under autocast; widened to fp32 as the concatenation would), each
    sample's vectors contiguous within x1."""
    return (eligible(x1, n_fm) and x0.dtype in (torch.float32, torch.bfloat16) and x0.dim() == 3
            and x0.device.type == "cpu" and x0.shape[0] == x1.shape[0] and x0.shape[2] == x1.shape[2]
            and x1.stride(2) == 1 and x1.stride(1) == x1.shape[2])


def _check(code: int, what: str) -> None:
    build.raise_on(code, f"wukong layer: {what}",
                   {-1: f"wukong layer: {what}: D must be a multiple of 16 up to {MAX_DIM}",
                    -3: f"wukong layer: {what}: the sizes do not fit together"})


def _rows(x: torch.Tensor) -> torch.Tensor:
    """``x`` [B, F, D] fp32 with each sample's vectors one after another (samples may be apart)."""
    x = x.detach().float()
    return x if x.stride(2) == 1 and x.stride(1) == x.shape[2] else x.contiguous()


def _parts(x0: torch.Tensor, x1: torch.Tensor | None) -> tuple[int, int, int, int, int]:
    """The kernels' x0, s0, n0, x1, s1 of X in parts (x1 None: x0 alone)."""
    if x1 is None:
        return x0.data_ptr(), x0.stride(0), x0.shape[1], x0.data_ptr(), 0
    return x0.data_ptr(), x0.stride(0), x0.shape[1], x1.data_ptr(), x1.stride(0)


def _low(t: torch.Tensor) -> tuple[torch.Tensor, int]:
    """``t`` contiguous in bf16 (flag 1) or fp32 (flag 0)."""
    if t.dtype == torch.bfloat16:
        return t.contiguous(), 1
    return t.float().contiguous(), 0


class _Head(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x0: torch.Tensor, x1: torch.Tensor | None, wcat: torch.Tensor, gamma: torch.Tensor,
                beta: torch.Tensor, eps: float, sizes: tuple[int, int, int],
                fm_dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        k, n_fm, n_lcb = sizes
        ctx.x0_dtype = x0.dtype
        x0, wcat = _rows(x0), wcat.detach().float().contiguous()
        x1 = None if x1 is None else _rows(x1)
        gamma, beta = gamma.detach().float().contiguous(), beta.detach().float().contiguous()
        b, d, f = x0.shape[0], x0.shape[2], x0.shape[1] + (0 if x1 is None else x1.shape[1])
        c = wcat.shape[1]
        proj = int(c != k + n_lcb)
        fm = x0.new_empty(b, f * k, dtype=fm_dtype)
        base, stats = x0.new_empty(b, n_fm + n_lcb, d), x0.new_empty(b, 2)
        fn = _fn("autorec_wukong_head_forward", build.WUKONG_HEAD_FORWARD_ARGS)
        if fn is None:
            raise RuntimeError("the native Wukong layer kernel is unavailable (see the log)")
        _check(fn(*_parts(x0, x1), b, f, d, wcat.data_ptr(), c, k, n_fm, n_lcb, proj, gamma.data_ptr(),
                  beta.data_ptr(), eps, fm.data_ptr(), int(fm_dtype == torch.bfloat16), base.data_ptr(),
                  stats.data_ptr(), torch.get_num_threads()),
               f"x {_described(x0, x1)}, maps {tuple(wcat.shape)}")
        ctx.save_for_backward(x0, x1, wcat, gamma, stats)
        ctx.sizes = sizes
        return fm, base

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, dfm: torch.Tensor, dbase: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        x0, x1, wcat, gamma, stats = ctx.saved_tensors
        k, n_fm, n_lcb = ctx.sizes
        b, d, f = x0.shape[0], x0.shape[2], x0.shape[1] + (0 if x1 is None else x1.shape[1])
        c = wcat.shape[1]
        dfm, low = _low(dfm)
        dbase = dbase.float().contiguous()
        dx0 = torch.empty(x0.shape)
        dx1 = None if x1 is None else torch.empty(x1.shape)
        dwcat, dgamma, dbeta = torch.empty_like(wcat), torch.empty_like(gamma), torch.empty_like(gamma)
        fn = _fn("autorec_wukong_head_backward", build.WUKONG_HEAD_BACKWARD_ARGS)
        _check(fn(*_parts(x0, x1), b, f, d, wcat.data_ptr(), c, k, n_fm, n_lcb, int(c != k + n_lcb),
                  gamma.data_ptr(), stats.data_ptr(), dfm.data_ptr(), low, dbase.data_ptr(), dx0.data_ptr(),
                  dx0.stride(0), dx0.data_ptr() if dx1 is None else dx1.data_ptr(),
                  0 if dx1 is None else dx1.stride(0), dwcat.data_ptr(), dgamma.data_ptr(), dbeta.data_ptr(),
                  torch.get_num_threads()), f"x {_described(x0, x1)}, maps {tuple(wcat.shape)}")
        return dx0.to(ctx.x0_dtype), dx1, dwcat, dgamma, dbeta, None, None, None


class _Tail(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, base: torch.Tensor, m: torch.Tensor, gamma: torch.Tensor, beta: torch.Tensor,
                eps: float, y_dtype: torch.dtype) -> torch.Tensor:
        base = base.detach().contiguous()
        m, low = _low(m.detach().flatten(1))
        gamma, beta = gamma.detach().float().contiguous(), beta.detach().float().contiguous()
        b, f_out, d = base.shape
        n_fm = m.shape[1] // d
        y, stats = torch.empty_like(base, dtype=y_dtype), base.new_empty(b, f_out, 2)
        fn = _fn("autorec_wukong_tail_forward", build.WUKONG_TAIL_FORWARD_ARGS)
        if fn is None:
            raise RuntimeError("the native Wukong layer kernel is unavailable (see the log)")
        _check(fn(base.data_ptr(), m.data_ptr(), low, b, d, n_fm, f_out, gamma.data_ptr(), beta.data_ptr(),
                  eps, y.data_ptr(), int(y_dtype == torch.bfloat16), stats.data_ptr(),
                  torch.get_num_threads()),
               f"base {tuple(base.shape)}, MLP output {tuple(m.shape)}")
        ctx.save_for_backward(base, m, gamma, stats)
        return y

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, dy: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        base, m, gamma, stats = ctx.saved_tensors
        b, f_out, d = base.shape
        n_fm = m.shape[1] // d
        dy, dy_low = _low(dy)
        dbase, dm = torch.empty_like(base), torch.empty_like(m)
        dgamma, dbeta = torch.empty_like(gamma), torch.empty_like(gamma)
        fn = _fn("autorec_wukong_tail_backward", build.WUKONG_TAIL_BACKWARD_ARGS)
        _check(fn(dy.data_ptr(), dy_low, base.data_ptr(), m.data_ptr(), int(m.dtype == torch.bfloat16), b, d,
                  n_fm, f_out, gamma.data_ptr(), stats.data_ptr(), dm.data_ptr(), dbase.data_ptr(),
                  dgamma.data_ptr(), dbeta.data_ptr(), torch.get_num_threads()), f"base {tuple(base.shape)}")
        return dbase, dm, dgamma, dbeta, None, None


def head(x: torch.Tensor | Sequence[torch.Tensor], wcat: torch.Tensor, gamma: torch.Tensor,
         beta: torch.Tensor, eps: float, *, k: int, n_fm: int, n_lcb: int,
         fm_dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, torch.Tensor]:
    """(fm, base) of X [B, F, D] and the maps ``wcat`` = [Y | W_L^T | W_R^T] [F, C] (W_R^T only
    with a projecting residual, else the residual is X): fm = LN(flatten(X (X^T Y))) with
    ``gamma``, ``beta`` and ``eps`` over its F * k values, in ``fm_dtype`` (fp32 or bf16);
    base = [0; W_L X] + residual, [B, n_fm + n_lcb, D] fp32. X may come as its two parts
    (x0 [B, F0, D], x1 [B, F - F0, D]; see :func:`parts_eligible`), read where they lie, each
    part then given its own gradient."""
    if fm_dtype not in (torch.float32, torch.bfloat16):
        raise ValueError(f"wukong layer: fm dtype {fm_dtype}, expected torch.float32 or torch.bfloat16")
    x0, x1 = (x, None) if isinstance(x, torch.Tensor) else _two(x)
    return _Head.apply(x0, x1, wcat, gamma, beta, eps, (k, n_fm, n_lcb), fm_dtype)


def _two(parts: Sequence[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """X's two parts, checked to fit together (a ValueError naming them where they do not)."""
    if len(parts) != 2:
        raise ValueError(f"wukong layer: X in {len(parts)} parts, expected a tensor or two parts")
    x0, x1 = parts
    if x0.dim() != 3 or x1.dim() != 3 or x0.shape[0] != x1.shape[0] or x0.shape[2] != x1.shape[2]:
        raise ValueError(f"wukong layer: X's parts {tuple(x0.shape)} and {tuple(x1.shape)}, expected "
                         "[B, F0, D] and [B, F - F0, D]")
    return x0, x1


def _described(x0: torch.Tensor, x1: torch.Tensor | None) -> str:
    return str(tuple(x0.shape)) if x1 is None else f"in parts {tuple(x0.shape)} + {tuple(x1.shape)}"


def tail(base: torch.Tensor, m: torch.Tensor, gamma: torch.Tensor, beta: torch.Tensor, eps: float,
         y_dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """LN_D(base + [m; 0]) [B, F_out, D] in ``y_dtype`` (fp32, or bf16 for a linear under autocast
    that would cast it so), ``m`` [B, n_fm * D] (fp32 or bf16, any other dtype read as fp32) the
    FM's MLP output, normalised over D with ``gamma``, ``beta`` and ``eps``."""
    if y_dtype not in (torch.float32, torch.bfloat16):
        raise ValueError(f"wukong layer: output dtype {y_dtype}, expected torch.float32 or torch.bfloat16")
    return _Tail.apply(base, m, gamma, beta, eps, y_dtype)


class _Mid(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, base1: torch.Tensor, m1: torch.Tensor, gamma1: torch.Tensor, beta1: torch.Tensor,
                wcat: torch.Tensor, fm_gamma: torch.Tensor, fm_beta: torch.Tensor, eps: tuple[float, float],
                sizes: tuple[int, int, int], fm_dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        k, n_fm, n_lcb = sizes
        base1 = base1.detach().contiguous()
        m1, m1_low = _low(m1.detach().flatten(1))
        gamma1, beta1, wcat, fm_gamma, fm_beta = (t.detach().float().contiguous()
                                                  for t in (gamma1, beta1, wcat, fm_gamma, fm_beta))
        b, f, d = base1.shape
        c = wcat.shape[1]
        fm = base1.new_empty(b, f * k, dtype=fm_dtype)
        base, stats = base1.new_empty(b, n_fm + n_lcb, d), base1.new_empty(b, 2)
        stats1 = base1.new_empty(b, f, 2)
        fn = _fn("autorec_wukong_mid_forward", build.WUKONG_MID_FORWARD_ARGS, "wukong_mid")
        if fn is None:
            raise RuntimeError("the native Wukong layer kernel is unavailable (see the log)")
        _check(fn(base1.data_ptr(), m1.data_ptr(), m1_low, b, d, m1.shape[1] // d, f, gamma1.data_ptr(),
                  beta1.data_ptr(), eps[0], stats1.data_ptr(), wcat.data_ptr(), c, k, n_fm, n_lcb,
                  int(c != k + n_lcb), fm_gamma.data_ptr(), fm_beta.data_ptr(), eps[1], fm.data_ptr(),
                  int(fm_dtype == torch.bfloat16), base.data_ptr(), stats.data_ptr(),
                  torch.get_num_threads()),
               f"base {tuple(base1.shape)}, MLP output {tuple(m1.shape)}, maps {tuple(wcat.shape)}")
        ctx.save_for_backward(base1, m1, gamma1, beta1, stats1, wcat, fm_gamma, stats)
        ctx.eps, ctx.sizes = eps, sizes
        return fm, base

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, dfm: torch.Tensor, dbase: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        base1, m1, gamma1, beta1, stats1, wcat, fm_gamma, stats = ctx.saved_tensors
        k, n_fm, n_lcb = ctx.sizes
        b, f, d = base1.shape
        c = wcat.shape[1]
        dfm, low = _low(dfm)
        dbase = dbase.float().contiguous()
        dbase1, dm1 = torch.empty_like(base1), torch.empty_like(m1)
        dgamma1, dbeta1, dwcat = torch.empty_like(gamma1), torch.empty_like(gamma1), torch.empty_like(wcat)
        dfm_gamma, dfm_beta = torch.empty_like(fm_gamma), torch.empty_like(fm_gamma)
        fn = _fn("autorec_wukong_mid_backward", build.WUKONG_MID_BACKWARD_ARGS, "wukong_mid")
        _check(fn(base1.data_ptr(), m1.data_ptr(), int(m1.dtype == torch.bfloat16), b, d, m1.shape[1] // d, f,
                  gamma1.data_ptr(), beta1.data_ptr(), ctx.eps[0], stats1.data_ptr(), wcat.data_ptr(), c, k,
                  n_fm, n_lcb, int(c != k + n_lcb), fm_gamma.data_ptr(), stats.data_ptr(), dfm.data_ptr(),
                  low, dbase.data_ptr(), dbase1.data_ptr(), dm1.data_ptr(), dgamma1.data_ptr(),
                  dbeta1.data_ptr(), dwcat.data_ptr(), dfm_gamma.data_ptr(), dfm_beta.data_ptr(),
                  torch.get_num_threads()),
               f"base {tuple(base1.shape)}")
        return dbase1, dm1, dgamma1, dbeta1, dwcat, dfm_gamma, dfm_beta, None, None, None


def mid(base1: torch.Tensor, m1: torch.Tensor, norm1: tuple[torch.Tensor, torch.Tensor, float],
        wcat: torch.Tensor, fm_norm: tuple[torch.Tensor, torch.Tensor, float], *, k: int, n_fm: int,
        n_lcb: int, fm_dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`head` of :func:`tail` ``(base1, m1)`` in one pass: a layer's tail (its norm over D
    ``norm1`` = (gamma, beta, eps)) and the next layer's head (maps ``wcat``, FM norm ``fm_norm``,
    sizes and ``fm_dtype`` as :func:`head` takes them), with the layer's output between them
    never written (the backward recomputes it). The same values and gradients as the two apart.

    Shapes: base1 [B, F, D], m1 [B, n_fm1 * D] -> fm [B, F * k], base [B, n_fm + n_lcb, D]."""
    if fm_dtype not in (torch.float32, torch.bfloat16):
        raise ValueError(f"wukong layer: fm dtype {fm_dtype}, expected torch.float32 or torch.bfloat16")
    return _Mid.apply(base1, m1, norm1[0], norm1[1], wcat, fm_norm[0], fm_norm[1], (norm1[2], fm_norm[2]),
                      (k, n_fm, n_lcb), fm_dtype)
