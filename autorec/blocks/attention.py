"""Batch-first self-attention written out for the CPU, with ``nn.MultiheadAttention``'s weights.

At DHEN's shapes (a few to a few dozen vectors of D = 16, two heads, batch 4096) torch's CPU
path is slow in two places: the fused attention kernel (``_scaled_dot_product_flash_attention``
for CPU: 45 of the module's 72 ms, forward and backward, at 27 vectors) and ATen's softmax over
rows shorter than one SIMD vector (16 fp32 lanes on AVX-512: 10x the time per element of a row
of 16, backward included). :func:`self_attention` computes the same values head by head, two
batched products on strided views of the projections (folding the heads into the batch would
copy Q, K and V into a permuted layout, and their gradient back: 1.2x slower at 27 vectors),
and a softmax whose rows are padded with -inf to the vector width when shorter
(``python -m benchmarks.dhen_attention``). ``tests/blocks/test_attention.py`` checks values and
gradients against ``nn.MultiheadAttention``.
"""

from __future__ import annotations

import functools
import math

import torch
import torch.nn.functional as F
from torch import nn

from autorec.blocks.base import global_forward_hooks

# fp32 lanes of ATen's CPU kernels per capability (torch.backends.cpu.get_cpu_capability)
_LANES = {"AVX512": 16, "AVX2": 8}


@functools.cache
def softmax_lanes() -> int:
    """The row length below which a row of the softmax is padded: ATen's fp32 SIMD width here."""
    return _LANES.get(torch.backends.cpu.get_cpu_capability(), 1)


def by_hand(mha: nn.Module, x: torch.Tensor) -> bool:
    """Whether :func:`self_attention` computes ``mha(x, x, x, need_weights=False)`` here: a
    plain batch-first ``nn.MultiheadAttention`` (not a quantised subclass, no extra key/value
    biases, no dropout while training, no hooks that must see its call) on a CPU tensor,
    outside ``torch.export`` (whose graph keeps the module's own operators)."""
    if type(mha) is not nn.MultiheadAttention or x.device.type != "cpu" or torch.compiler.is_exporting():
        return False
    plain = mha.batch_first and mha._qkv_same_embed_dim and mha.bias_k is None and not mha.add_zero_attn
    hooked = global_forward_hooks() or any(m._forward_hooks or m._forward_pre_hooks
                                           for m in (mha, mha.out_proj))
    return plain and not hooked and not (mha.training and mha.dropout > 0)


def self_attention(mha: nn.MultiheadAttention, x: torch.Tensor) -> torch.Tensor:
    """``mha(x, x, x, need_weights=False)[0]`` by two batched products (see the module docstring).

    Shapes: x [B, L, E] -> [B, L, E]; E = heads x head width.

    Example:
        >>> mha = nn.MultiheadAttention(8, 2, batch_first=True)
        >>> x = torch.randn(3, 5, 8)
        >>> torch.allclose(self_attention(mha, x), mha(x, x, x, need_weights=False)[0], atol=1e-6)
        True
    """
    b, length, _ = x.shape
    heads, width = mha.num_heads, mha.head_dim
    qkv = F.linear(x, mha.in_proj_weight, mha.in_proj_bias).view(b, length, 3 * heads, width)
    parts = qkv.unbind(2)  # per head [B, L, width], views of qkv: their gradient is one stack
    q, k, v = parts[:heads], parts[heads: 2 * heads], parts[2 * heads:]
    scale = 1.0 / math.sqrt(width)
    outs = [torch.bmm(_softmax(torch.bmm(hq * scale, hk.transpose(1, 2))), hv)  # [B, L, width]
            for hq, hk, hv in zip(q, k, v, strict=True)]
    out = outs[0] if heads == 1 else torch.cat(outs, -1)  # [B, L, E], heads side by side
    return F.linear(out, mha.out_proj.weight, mha.out_proj.bias)


def _softmax(scores: torch.Tensor) -> torch.Tensor:
    """Softmax over the last dim of ``scores`` [..., L]; rows shorter than :func:`softmax_lanes`
    are padded with -inf to it (ATen runs those on a scalar path), then cut back."""
    length, lanes = scores.shape[-1], softmax_lanes()
    if length < lanes:
        return torch.softmax(F.pad(scores, (0, lanes - length), value=float("-inf")), -1)[..., :length]
    return torch.softmax(scores, -1)
