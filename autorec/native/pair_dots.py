"""DLRM's pairwise dots on the CPU as one compiled pass per direction (``pair_dots.cpp``).

:func:`autorec.blocks.gram.pair_dots` builds the dots of a [B, F, D] batch as batched matrix
products, a gather of the pairs and, in the backward, a zero-filled fold with two scatters. On
the CPU at DLRM's sizes (F = 27, D = 16) those products run far below the machine's rate and
the gather and fold pass over memory. Here, with the pairs in torchrec's order and D a multiple
of 16 (DLRM's case), 16 samples go at a time, one per vector lane, so that each dot is 16 whole
FMAs with no horizontal sum, the rows going in and out by transposes in registers; other pairs
and widths go one sample at a time, its products and fold in L1. The samples are split over
torch's OpenMP team. Written by hand
because no library has a CPU kernel for the dots of many tiny per-sample Gram matrices; built and
loaded by :mod:`autorec.native.build` (None where it cannot be, and gram keeps torch's ops).

Shapes: x [B, F, D] fp32 contiguous, first and second [P] int64 ->
[B, passthrough * D + P + pad] (fp32, or bf16 on request: what autocast would cast it to for the
linear that takes it, in one pass fewer); the backward takes an fp32 or bf16 gradient and gives
dx [B, F, D] fp32.

Example:
    >>> import torch
    >>> x = torch.arange(12.0).view(1, 3, 4)
    >>> first, second = torch.tensor([0, 0, 1]), torch.tensor([1, 2, 2])
    >>> forward(x, first, second, 0, 0) if available() else torch.tensor([[38.0, 62.0, 214.0]])
    tensor([[ 38.,  62., 214.]])
"""

from __future__ import annotations

from typing import Any

import torch

from autorec.native import build


def _forward_fn() -> Any | None:
    return build.load("pair_dots", "autorec_pair_dots_forward", build.PAIR_DOTS_FORWARD_ARGS)


def _backward_fn() -> Any | None:
    return build.load("pair_dots", "autorec_pair_dots_backward", build.PAIR_DOTS_BACKWARD_ARGS)


SWITCH = build.Switch()
disabled = SWITCH.disabled  # inside, torch's path runs (A/B benchmarks, tests)
MAX_VECTORS = MAX_DIM = 64  # the kernel's largest F (vectors per sample) and D


def available() -> bool:
    """Whether the kernel could be built and loaded here."""
    return _forward_fn() is not None


def eligible(x: torch.Tensor) -> bool:
    """Whether ``x``'s dots can run here: fp32 [B, F <= 64, D <= 64] on the CPU, outside
    :func:`disabled`, the kernel available. Under autocast too: an fp32 ``x`` then gets its dots
    in fp32 (torch's path would round both products' inputs to bf16), faster than in bf16."""
    return (SWITCH.on and x.device.type == "cpu" and x.dtype == torch.float32 and x.dim() == 3
            and x.shape[1] <= MAX_VECTORS and x.shape[2] <= MAX_DIM and available())


def forward(x: torch.Tensor, first: torch.Tensor, second: torch.Tensor, passthrough: int,
            pad: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """``[x[:, :passthrough] flattened, <x_first[p], x_second[p]> for each p, pad zeros]``, in
    ``dtype`` (fp32 or bf16: the values computed in fp32, then rounded as ``.to(dtype)`` rounds)."""
    if dtype not in (torch.float32, torch.bfloat16):
        raise ValueError(f"pair dots: output dtype {dtype}, expected torch.float32 or torch.bfloat16")
    fn = _forward_fn()
    if fn is None:
        raise RuntimeError("the native pair-dots kernel is unavailable (see the log)")
    x, first, second = x.contiguous(), first.long().contiguous(), second.long().contiguous()
    b, f, d = x.shape
    _check_pairs(first, second, f)
    out = x.new_empty(b, passthrough * d + first.numel() + pad, dtype=dtype)
    _raise_on(fn(x.data_ptr(), b, f, d, first.data_ptr(), second.data_ptr(), first.numel(), passthrough,
                 pad, out.data_ptr(), int(dtype == torch.bfloat16), torch.get_num_threads()),
              f"{f} vectors per sample", MAX_VECTORS, f)
    return out


def backward(grad: torch.Tensor, x: torch.Tensor, first: torch.Tensor, second: torch.Tensor,
             passthrough: int) -> torch.Tensor:
    """dx [B, F, D] of :func:`forward`'s output gradient ``grad``, fp32 or bf16 (its pad columns
    ignored)."""
    fn = _backward_fn()
    if fn is None:
        raise RuntimeError("the native pair-dots kernel is unavailable (see the log)")
    x, first, second = x.contiguous(), first.long().contiguous(), second.long().contiguous()
    b, f, d = x.shape
    _check_pairs(first, second, f)
    grad = _gradient_rows(grad, b, passthrough * d, first.numel())
    dx = torch.empty_like(x)
    _raise_on(fn(grad.data_ptr(), int(grad.dtype == torch.bfloat16), grad.stride(0), x.data_ptr(), b, f, d,
                 first.data_ptr(), second.data_ptr(), first.numel(), passthrough, dx.data_ptr(),
                 torch.get_num_threads()),
              f"vectors of {d}", MAX_DIM, f)
    return dx


def _forward_parts_fn() -> Any | None:
    return build.load("pair_dots", "autorec_pair_dots_forward_parts", build.PAIR_DOTS_FORWARD_PARTS_ARGS)


def _backward_parts_fn() -> Any | None:
    return build.load("pair_dots", "autorec_pair_dots_backward_parts", build.PAIR_DOTS_BACKWARD_PARTS_ARGS)


def parts_eligible(x0: torch.Tensor, x1: torch.Tensor) -> bool:
    """Whether the dots of ``cat([x0, x1], 1)`` can be read from the two parts where they lie:
    each :func:`eligible`, of one batch and D, D a multiple of 16, F in all at most 64, each
    sample's vectors contiguous within its part (its rows may be apart)."""
    return (eligible(x0) and eligible(x1) and x0.shape[0] == x1.shape[0] and x0.shape[2] == x1.shape[2]
            and x0.shape[2] % 16 == 0 and x0.shape[1] + x1.shape[1] <= MAX_VECTORS
            and all(t.stride(2) == 1 and t.stride(1) == t.shape[2] for t in (x0, x1)))


def forward_parts(x0: torch.Tensor, x1: torch.Tensor, first: torch.Tensor, second: torch.Tensor,
                  passthrough: int, pad: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """:func:`forward` of ``cat([x0, x1], 1)``, read from the parts (callers check
    :func:`parts_eligible`; the pairs must be in torchrec's order)."""
    fn = _forward_parts_fn()
    first, second, (b, n0, d, f) = _parts_call(fn, x0, x1, first, second)
    out = x0.new_empty(b, passthrough * d + first.numel() + pad, dtype=dtype)
    _raise_parts(fn(x0.data_ptr(), x0.stride(0), n0, x1.data_ptr(), x1.stride(0), b, f, d, first.data_ptr(),
                    second.data_ptr(), first.numel(), passthrough, pad, out.data_ptr(),
                    int(dtype == torch.bfloat16), torch.get_num_threads()), f)
    return out


def backward_parts(grad: torch.Tensor, x0: torch.Tensor, x1: torch.Tensor, first: torch.Tensor,
                   second: torch.Tensor, passthrough: int) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`backward` of :func:`forward_parts`: (dx0, dx1) shaped as x0 and x1."""
    fn = _backward_parts_fn()
    first, second, (b, n0, d, f) = _parts_call(fn, x0, x1, first, second)
    grad = _gradient_rows(grad, b, passthrough * d, first.numel())
    dx0, dx1 = torch.empty(x0.shape), torch.empty(x1.shape)
    _raise_parts(fn(grad.data_ptr(), int(grad.dtype == torch.bfloat16), grad.stride(0), x0.data_ptr(),
                    x0.stride(0), n0, x1.data_ptr(), x1.stride(0), b, f, d, first.data_ptr(),
                    second.data_ptr(), first.numel(), passthrough, dx0.data_ptr(), dx0.stride(0),
                    dx1.data_ptr(), dx1.stride(0), torch.get_num_threads()), f)
    return dx0, dx1


def _parts_call(fn: Any | None, x0: torch.Tensor, x1: torch.Tensor, first: torch.Tensor,
                second: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, tuple[int, int, int, int]]:
    """The pairs as the kernels take them and (B, F0, D, F) of two parts, the kernel ``fn``
    present (a RuntimeError where it is not)."""
    if fn is None:
        raise RuntimeError("the native pair-dots kernel is unavailable (see the log)")
    first, second = first.long().contiguous(), second.long().contiguous()
    (b, n0, d), f = x0.shape, x0.shape[1] + x1.shape[1]
    _check_pairs(first, second, f)
    return first, second, (b, n0, d, f)


def _raise_parts(code: int, f: int) -> None:
    build.raise_on(code, "pair dots", {-1: f"pair dots: {f} vectors of more than {MAX_DIM} per sample",
                                       -2: f"pairs: a vector index outside [0, {f})",
                                       -3: "pair dots from two parts: the pairs must be in torchrec's order "
                                           "and D a multiple of 16"})


def _gradient_rows(grad: torch.Tensor, b: int, passed: int, dots: int) -> torch.Tensor:
    """``grad`` as the kernels read it: bf16 or fp32, its values contiguous within a row (rows
    may be apart); a ValueError unless it has ``b`` rows of at least ``passed + dots`` values."""
    if grad.dtype != torch.bfloat16:
        grad = grad.float()
    if grad.stride(-1) != 1:
        grad = grad.contiguous()
    if grad.shape[0] != b or grad.shape[1] < passed + dots:
        raise ValueError(f"pair dots: gradient {tuple(grad.shape)} for {b} samples of "
                         f"{passed} + {dots} outputs")
    return grad


def _check_pairs(first: torch.Tensor, second: torch.Tensor, f: int) -> None:
    """The pairs' shapes (their values are checked by the kernel, without a host read)."""
    if first.shape != second.shape or first.dim() != 1:
        raise ValueError(f"pairs: first {tuple(first.shape)} and second {tuple(second.shape)}, "
                         "expected two [P] tensors")


def _raise_on(code: int, size: str, limit: int, f: int) -> None:
    """The kernel's return code as an error: -1 a size over ``limit``, -2 a pair's index outside [0, f)."""
    build.raise_on(code, "pair dots", {-1: f"pair dots: {size}, the kernel takes at most {limit}",
                                       -2: f"pairs: a vector index outside [0, {f})"})
