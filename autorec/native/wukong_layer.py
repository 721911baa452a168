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

Shapes: x [B, F, D] fp32 with D a multiple of 16 up to 64, wcat [F, C] -> fm [B, F * k],
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

from typing import Any

import torch
from torch.autograd.function import once_differentiable

from autorec.native import build

SWITCH = build.Switch()
disabled = SWITCH.disabled  # inside, torch's path runs (A/B benchmarks, tests)
MAX_DIM = 64


def _fn(symbol: str, args: tuple[Any, ...]) -> Any | None:
    return build.load("wukong_layer", symbol, args)


def available() -> bool:
    """Whether the kernel could be built and loaded here."""
    return _fn("autorec_wukong_head_forward", build.WUKONG_HEAD_FORWARD_ARGS) is not None


def eligible(x: torch.Tensor, n_fm: int) -> bool:
    """Whether a Wukong layer on ``x`` can run here: fp32 [B, F, D] on the CPU with D a multiple
    of 16 up to 64 and at least one FM row, eager (not compiled or exported), outside
    :func:`disabled`, the kernel available. Autocast does not matter (see the module)."""
    return (SWITCH.on and x.device.type == "cpu" and x.dtype == torch.float32 and x.dim() == 3
            and x.shape[2] % 16 == 0 and 16 <= x.shape[2] <= MAX_DIM and n_fm >= 1
            and not torch.compiler.is_compiling() and not torch.compiler.is_exporting() and available())


def _check(code: int, what: str) -> None:
    build.raise_on(code, f"wukong layer: {what}",
                   {-1: f"wukong layer: {what}: D must be a multiple of 16 up to {MAX_DIM}",
                    -3: f"wukong layer: {what}: the sizes do not fit together"})


def _low(t: torch.Tensor) -> tuple[torch.Tensor, int]:
    """``t`` contiguous in bf16 (flag 1) or fp32 (flag 0)."""
    if t.dtype == torch.bfloat16:
        return t.contiguous(), 1
    return t.float().contiguous(), 0


class _Head(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, wcat: torch.Tensor, gamma: torch.Tensor, beta: torch.Tensor,
                eps: float, sizes: tuple[int, int, int],
                fm_dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        k, n_fm, n_lcb = sizes
        x, wcat = x.detach().contiguous(), wcat.detach().float().contiguous()
        gamma, beta = gamma.detach().float().contiguous(), beta.detach().float().contiguous()
        b, f, d = x.shape
        c = wcat.shape[1]
        proj = int(c != k + n_lcb)
        fm = x.new_empty(b, f * k, dtype=fm_dtype)
        base, stats = x.new_empty(b, n_fm + n_lcb, d), x.new_empty(b, 2)
        fn = _fn("autorec_wukong_head_forward", build.WUKONG_HEAD_FORWARD_ARGS)
        if fn is None:
            raise RuntimeError("the native Wukong layer kernel is unavailable (see the log)")
        _check(fn(x.data_ptr(), b, f, d, wcat.data_ptr(), c, k, n_fm, n_lcb, proj, gamma.data_ptr(),
                  beta.data_ptr(), eps, fm.data_ptr(), int(fm_dtype == torch.bfloat16), base.data_ptr(),
                  stats.data_ptr(), torch.get_num_threads()), f"x {tuple(x.shape)}, maps {tuple(wcat.shape)}")
        ctx.save_for_backward(x, wcat, gamma, stats)
        ctx.sizes = sizes
        return fm, base

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, dfm: torch.Tensor, dbase: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        x, wcat, gamma, stats = ctx.saved_tensors
        k, n_fm, n_lcb = ctx.sizes
        b, f, d = x.shape
        c = wcat.shape[1]
        dfm, low = _low(dfm)
        dbase = dbase.float().contiguous()
        dx, dwcat = torch.empty_like(x), torch.empty_like(wcat)
        dgamma, dbeta = torch.empty_like(gamma), torch.empty_like(gamma)
        fn = _fn("autorec_wukong_head_backward", build.WUKONG_HEAD_BACKWARD_ARGS)
        _check(fn(x.data_ptr(), b, f, d, wcat.data_ptr(), c, k, n_fm, n_lcb, int(c != k + n_lcb),
                  gamma.data_ptr(), stats.data_ptr(), dfm.data_ptr(), low, dbase.data_ptr(), dx.data_ptr(),
                  dwcat.data_ptr(), dgamma.data_ptr(), dbeta.data_ptr(), torch.get_num_threads()),
               f"x {tuple(x.shape)}, maps {tuple(wcat.shape)}")
        return dx, dwcat, dgamma, dbeta, None, None, None


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


def head(x: torch.Tensor, wcat: torch.Tensor, gamma: torch.Tensor, beta: torch.Tensor, eps: float, *, k: int,
         n_fm: int, n_lcb: int, fm_dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, torch.Tensor]:
    """(fm, base) of X [B, F, D] and the maps ``wcat`` = [Y | W_L^T | W_R^T] [F, C] (W_R^T only
    with a projecting residual, else the residual is X): fm = LN(flatten(X (X^T Y))) with
    ``gamma``, ``beta`` and ``eps`` over its F * k values, in ``fm_dtype`` (fp32 or bf16);
    base = [0; W_L X] + residual, [B, n_fm + n_lcb, D] fp32."""
    if fm_dtype not in (torch.float32, torch.bfloat16):
        raise ValueError(f"wukong layer: fm dtype {fm_dtype}, expected torch.float32 or torch.bfloat16")
    return _Head.apply(x, wcat, gamma, beta, eps, (k, n_fm, n_lcb), fm_dtype)


def tail(base: torch.Tensor, m: torch.Tensor, gamma: torch.Tensor, beta: torch.Tensor, eps: float,
         y_dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """LN_D(base + [m; 0]) [B, F_out, D] in ``y_dtype`` (fp32, or bf16 for a linear under autocast
    that would cast it so), ``m`` [B, n_fm * D] (fp32 or bf16, any other dtype read as fp32) the
    FM's MLP output, normalised over D with ``gamma``, ``beta`` and ``eps``."""
    if y_dtype not in (torch.float32, torch.bfloat16):
        raise ValueError(f"wukong layer: output dtype {y_dtype}, expected torch.float32 or torch.bfloat16")
    return _Tail.apply(base, m, gamma, beta, eps, y_dtype)
